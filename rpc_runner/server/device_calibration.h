// Defines DeviceCalibration: the fma_peak runs a tuning server sends each worker at attach, whose
// timings set the ceiling of that worker's results (peer_checks.h) before it takes any job.
#pragma once

#include <memory>
#include <string>

#include "rpc_runner/protocol/job_types.h"
#include "rpc_runner/protocol/ktune.pb.h"
#include "support/thread_pool.h"

namespace ktune::rpc_runner {

class DevicePool;

// Calibrates attached workers, one at a time on a thread of its own (kernels for a worker that
// cannot build are built there). Borrows the pool, which must outlive it. Thread-safe.
class DeviceCalibration {
 public:
  explicit DeviceCalibration(DevicePool& pool) : pool_(pool), builder_(1) {}

  // Sends worker `info` (attached, not yet calibrated) fma_peak on one thread, then, once that is
  // answered, on all its threads (one copy per declared core). Then the figures are checked
  // (check_calibration): the pool gets them and lists the worker for jobs, or the worker is
  // refused (detached, its stream closed with the one-line reason). A worker that fails a
  // calibration run (an error, not a timing) is refused the same way. Returns at once.
  void start(const WorkerInfo& info);

 private:
  // A calibration's two runs: their candidates, flop and figures (one thread, all threads).
  struct Runs {
    rpc::Candidate candidates[2];
    double flop[2] = {0, 0};
    double gflops[2] = {0, 0};
  };
  // Sends run `which` (0: one thread, 1: all); its answer sends the next or concludes.
  void send_run(const std::shared_ptr<Runs>& runs, const WorkerInfo& info, int lanes, int which);
  void refuse(const WorkerInfo& info, const std::string& why);

  DevicePool& pool_;
  ThreadPool builder_;
};

}  // namespace ktune::rpc_runner
