// A worker's calibration at attach: two fma_peak candidates, then its figures checked.
#include "rpc_runner/server/device_calibration.h"

#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "rpc_runner/protocol/measure_convert.h"
#include "rpc_runner/protocol/peer_checks.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/server/cross_build.h"
#include "rpc_runner/server/device_pool.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "te/lower.h"

namespace ktune::rpc_runner {
namespace {

// The GFLOP/s of a calibration result (its fastest timing), or why it has none.
double gflops_of(const rpc::CandidateResult& r, double flop, std::string* why) {
  if (!r.error_kind().empty()) {
    *why = r.error_kind() + ": " + clean_text(r.error_message(), 200);
    return 0;
  }
  if (r.costs().empty()) {
    *why = "no timing";
    return 0;
  }
  // The fastest timing: load on the device (its other work, workers beside it) only slows a run,
  // and a figure below the device's peak would refuse its honest results later.
  return flop / *std::min_element(r.costs().begin(), r.costs().end()) / 1e9;
}

}  // namespace

void DeviceCalibration::start(const WorkerInfo& info) {
  builder_.submit([this, info] {
    const std::string id = info.worker_id;
    try {
      const codegen::Target target = codegen::Target::parse(info.target);
      const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                             target.vector_bits(), info.cores);
      const int lanes = traits.vector_lanes();  // as FleetMeasurer's ceilings count them
      // The two runs, one thread then all: built here first, sent one after the other (run side
      // by side on a worker of several slots, each would take the other's cores).
      auto runs = std::make_shared<Runs>();
      for (int which = 0; which < 2; ++which) {
        const int copies = which == 0 ? 1 : info.cores;
        const auto task =
            schedule_space::Task::create("fma_peak", calibration_args(lanes, copies), traits);
        rpc::Candidate& c = runs->candidates[which];
        to_proto(task, c.mutable_task());
        c.set_config_index(task.fallback_config().index());
        c.set_config_json(task.fallback_config().to_json_string());
        to_proto(calibration_measure(which == 0 ? 1 : 0), c.mutable_measure());
        if (!info.can_build) {
          const schedule_space::Instantiated inst = task.instantiate(task.fallback_config());
          c.set_artifact(cross_build(te::lower(inst.schedule, inst.args, "fma_peak"), target));
        }
        runs->flop[which] = task.flop();
      }
      send_run(runs, info, lanes, 0);
    } catch (const std::exception& e) {
      spdlog::warn("cannot calibrate worker {}: {}", id, e.what());
      pool_.refuse(id, std::string("this server cannot calibrate it: ") + e.what());
    }
  });
}

void DeviceCalibration::send_run(const std::shared_ptr<Runs>& runs, const WorkerInfo& info,
                                 int lanes, int which) {
  pool_.send_direct(
      info.worker_id, runs->candidates[which],
      [this, runs, info, lanes, which](const WorkerInfo&, rpc::CandidateResult r) {
        std::string why;
        runs->gflops[which] = gflops_of(r, runs->flop[which], &why);
        if (!why.empty()) {
          refuse(info, fmt::format("its calibration on {} failed ({})",
                                   which == 0 ? "one thread" : "all threads", why));
          return;
        }
        if (which == 0) {
          send_run(runs, info, lanes, 1);
          return;
        }
        const std::string refusal =
            check_calibration(runs->gflops[0], runs->gflops[1], info.cores, lanes);
        if (!refusal.empty()) {
          refuse(info, refusal);
          return;
        }
        const std::string note = calibration_note(runs->gflops[0], runs->gflops[1], info.cores);
        spdlog::info("worker {} calibrated: {:.1f} GFLOP/s on one core, {:.1f} on all{}",
                     info.worker_id, runs->gflops[0], runs->gflops[1],
                     note.empty() ? "" : " (" + note + ")");
        pool_.calibrated(info.worker_id, runs->gflops[0], runs->gflops[1], note);
      });
}

void DeviceCalibration::refuse(const WorkerInfo& info, const std::string& why) {
  spdlog::warn("refused worker {} (key {}, {}): {}", info.worker_id, info.key, info.peer, why);
  pool_.refuse(info.worker_id, "refused: " + why);
}

}  // namespace ktune::rpc_runner
