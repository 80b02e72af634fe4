// A worker's calibration at attach: two fma_peak candidates, its figures checked, then proved.
#include "rpc_runner/server/device_calibration.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "rpc_runner/protocol/measure_convert.h"
#include "rpc_runner/protocol/peer_checks.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/server/calibration_proof.h"
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

// An fma_peak candidate of `args` for worker `info`, timed with `measure`; built here when
// `build_here` (a worker that cannot build, or a proof). Returns its flop.
double fma_peak_candidate(const WorkerInfo& info, const std::map<std::string, std::string>& args,
                          const tuner::MeasureOptions& measure, bool build_here,
                          rpc::Candidate& c) {
  const codegen::Target target = codegen::Target::parse(info.target);
  const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                         target.vector_bits(), info.cores);
  const auto task = schedule_space::Task::create("fma_peak", args, traits);
  to_proto(task, c.mutable_task());
  c.set_config_index(task.fallback_config().index());
  c.set_config_json(task.fallback_config().to_json_string());
  to_proto(measure, c.mutable_measure());
  if (build_here) {
    const schedule_space::Instantiated inst = task.instantiate(task.fallback_config());
    c.set_artifact(cross_build(te::lower(inst.schedule, inst.args, "fma_peak"), target));
  }
  return task.flop();
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
      for (int which = 0; which < 2; ++which)
        runs->flop[which] = fma_peak_candidate(
            info, calibration_args(lanes, which == 0 ? 1 : info.cores),
            calibration_measure(which == 0 ? 1 : 0), !info.can_build, runs->candidates[which]);
      send_run(runs, info, lanes, 0);
    } catch (const std::exception& e) {
      spdlog::warn("cannot calibrate worker {}: {}", id, e.what());
      pool_.refuse(id, std::string("this server cannot calibrate it: ") + e.what());
    }
  });
}

void DeviceCalibration::send_run(const std::shared_ptr<Runs>& runs, const WorkerInfo& info,
                                 int lanes, int which) {
  pool_.send_direct(info.worker_id, runs->candidates[which],
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
                      if (proof_s_ > 0)
                        prove(runs, info, lanes, 0);
                      else
                        conclude(runs, info);
                    });
}

void DeviceCalibration::prove(const std::shared_ptr<Runs>& runs, const WorkerInfo& info, int lanes,
                              int which) {
  builder_.submit([this, runs, info, lanes, which] {
    const char* where = which == 0 ? "one thread" : "all threads";
    ProofShape shape;
    rpc::Candidate c;
    try {
      shape = proof_shape(runs->gflops[which], proof_s_, lanes, which == 0 ? 1 : info.cores);
      tuner::MeasureOptions m = calibration_measure(which == 0 ? 1 : 0);
      m.return_outputs = true;
      m.data_seed = std::random_device{}();
      m.run_timeout_s = proof_s_ * kProofSlack + 30;
      // Built here for every worker: the server's clock then times the run, not a compiler.
      fma_peak_candidate(info, shape.args(), m, true, c);
    } catch (const std::exception& e) {
      spdlog::warn("cannot prove worker {}'s calibration: {}", info.worker_id, e.what());
      pool_.refuse(info.worker_id, std::string("this server cannot calibrate it: ") + e.what());
      return;
    }
    const uint64_t seed = c.measure().data_seed();
    const auto start = std::chrono::steady_clock::now();
    pool_.send_direct(
        info.worker_id, c,
        [this, runs, info, lanes, which, where, shape, seed, start](const WorkerInfo&,
                                                                    rpc::CandidateResult r) {
          const double wall =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          builder_.submit([this, runs, info, lanes, which, where, shape, seed, wall,
                           r = std::move(r)] {
            if (!r.error_kind().empty()) {
              refuse(info, fmt::format("its calibration proof on {} failed ({}: {})", where,
                                       r.error_kind(), clean_text(r.error_message(), 200)));
              return;
            }
            const std::string wrong =
                check_proof(shape, seed, r.outputs(), 4, std::random_device{}());
            if (!wrong.empty()) {
              refuse(info, fmt::format("its calibration proof on {}: {}", where, wrong));
              return;
            }
            const double rate = shape.flop() / std::max(wall, 1e-9) / 1e9;
            if (rate * kProofSlack < runs->gflops[which]) {
              refuse(info, fmt::format("its calibration runs {:.1f} GFLOP/s on {} by its own "
                                       "timing; the same work took {:.2f} s here, {:.1f} GFLOP/s",
                                       runs->gflops[which], where, wall, rate));
              return;
            }
            spdlog::debug("worker {}'s proof on {}: {:.4g} flop in {:.3f} s, {:.1f} GFLOP/s",
                          info.worker_id, where, shape.flop(), wall, rate);
            runs->proven[which] = rate;
            if (which == 0)
              prove(runs, info, lanes, 1);
            else
              conclude(runs, info);
          });
        });
  });
}

void DeviceCalibration::conclude(const std::shared_ptr<Runs>& runs, const WorkerInfo& info) {
  // A proof includes the transfer and the runner's start: below the worker's own timing, it
  // bounds it (a claim is only taken as far as the server saw it run).
  double core = runs->gflops[0], all = runs->gflops[1];
  if (proof_s_ > 0) {
    core = std::min(core, runs->proven[0]);
    all = std::min(all, runs->proven[1]);
  }
  const std::string note = calibration_note(core, all, info.cores);
  spdlog::info("worker {} calibrated: {:.1f} GFLOP/s on one core, {:.1f} on all{}{}",
               info.worker_id, core, all,
               proof_s_ > 0 ? fmt::format(" (proved: {:.1f} and {:.1f} on this server's clock)",
                                          runs->proven[0], runs->proven[1])
                            : std::string(" (no proof)"),
               note.empty() ? "" : " (" + note + ")");
  pool_.calibrated(info.worker_id, core, all, note);
}

void DeviceCalibration::refuse(const WorkerInfo& info, const std::string& why) {
  spdlog::warn("refused worker {} (key {}, {}): {}", info.worker_id, info.key, info.peer, why);
  pool_.refuse(info.worker_id, "refused: " + why);
}

}  // namespace ktune::rpc_runner
