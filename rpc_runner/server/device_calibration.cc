// A worker's calibration at attach: two fma_peak candidates, then its figures checked.
#include "rpc_runner/server/device_calibration.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "codegen/codegen_llvm.h"
#include "codegen/shared_object.h"
#include "codegen/target.h"
#include "rpc_runner/protocol/measure_convert.h"
#include "rpc_runner/protocol/peer_checks.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/server/device_pool.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "te/lower.h"

namespace ktune::rpc_runner {
namespace {

// The two runs' figures as they arrive.
struct Runs {
  std::mutex mu;
  double gflops[2] = {0, 0};  // one thread, all threads
  int answered = 0;
  std::string failed;  // the first run that failed, and why
};

// The GFLOP/s of a calibration result (its median cost), or why it has none.
double gflops_of(const rpc::CandidateResult& r, double flop, std::string* why) {
  if (!r.error_kind().empty()) {
    *why = r.error_kind() + ": " + clean_text(r.error_message(), 200);
    return 0;
  }
  std::vector<double> costs(r.costs().begin(), r.costs().end());
  if (costs.empty()) {
    *why = "no timing";
    return 0;
  }
  std::sort(costs.begin(), costs.end());
  return flop / costs[costs.size() / 2] / 1e9;
}

}  // namespace

void DeviceCalibration::start(const WorkerInfo& info) {
  builder_.submit([this, info] {
    const std::string id = info.worker_id;
    try {
      const codegen::Target target = codegen::Target::parse(info.target);
      const int lanes = std::max(target.vector_bits() / 32, 1);
      const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                             target.vector_bits(), info.cores);
      auto runs = std::make_shared<Runs>();
      for (int which = 0; which < 2; ++which) {
        const int copies = which == 0 ? 1 : info.cores;
        const auto task =
            schedule_space::Task::create("fma_peak", calibration_args(lanes, copies), traits);
        rpc::Candidate c;
        to_proto(task, c.mutable_task());
        c.set_config_index(task.fallback_config().index());
        c.set_config_json(task.fallback_config().to_json_string());
        to_proto(calibration_measure(which == 0 ? 1 : 0), c.mutable_measure());
        if (!info.can_build) {
          const schedule_space::Instantiated inst = task.instantiate(task.fallback_config());
          const auto bytes =
              codegen::link_shared(
                  codegen::build(te::lower(inst.schedule, inst.args, "fma_peak"), target))
                  .serialize();
          c.set_artifact(std::string(bytes.begin(), bytes.end()));
        }
        const double flop = task.flop();
        DevicePool& pool = pool_;
        pool_.send_direct(
            id, std::move(c),
            [runs, which, flop, lanes, &pool, info](const WorkerInfo&, rpc::CandidateResult r) {
              std::string why;
              const double g = gflops_of(r, flop, &why);
              std::lock_guard lock(runs->mu);
              runs->gflops[which] = g;
              if (runs->failed.empty() && !why.empty())
                runs->failed = fmt::format("its calibration on {} failed ({})",
                                           which == 0 ? "one thread" : "all threads", why);
              if (++runs->answered < 2) return;
              std::string refusal = runs->failed;
              if (refusal.empty())
                refusal = check_calibration(runs->gflops[0], runs->gflops[1], info.cores, lanes);
              if (!refusal.empty()) {
                spdlog::warn("refused worker {} (key {}, {}): {}", info.worker_id, info.key,
                             info.peer, refusal);
                pool.refuse(info.worker_id, "refused: " + refusal);
                return;
              }
              const std::string note =
                  calibration_note(runs->gflops[0], runs->gflops[1], info.cores);
              spdlog::info("worker {} calibrated: {:.1f} GFLOP/s on one core, {:.1f} on all{}",
                           info.worker_id, runs->gflops[0], runs->gflops[1],
                           note.empty() ? "" : " (" + note + ")");
              pool.calibrated(info.worker_id, runs->gflops[0], runs->gflops[1], note);
            });
      }
    } catch (const std::exception& e) {
      spdlog::warn("cannot calibrate worker {}: {}", id, e.what());
      pool_.refuse(id, std::string("this server cannot calibrate it: ") + e.what());
    }
  });
}

}  // namespace ktune::rpc_runner
