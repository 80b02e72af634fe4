// Defines DeviceCalibration: the fma_peak runs a tuning server sends each worker at attach, whose
// timings set the ceiling of that worker's results (peer_checks.h) before it takes any job.
#pragma once

#include "rpc_runner/protocol/job_types.h"
#include "support/thread_pool.h"

namespace ktune::rpc_runner {

class DevicePool;

// Calibrates attached workers, one at a time on a thread of its own (kernels for a worker that
// cannot build are built there). Borrows the pool, which must outlive it. Thread-safe.
class DeviceCalibration {
 public:
  explicit DeviceCalibration(DevicePool& pool) : pool_(pool), builder_(1) {}

  // Sends worker `info` (attached, not yet calibrated) fma_peak on one thread and on all its
  // threads (one copy per declared core). Once both are answered, the figures are checked
  // (check_calibration): the pool gets them and lists the worker for jobs, or the worker is
  // refused (detached, its stream closed with the one-line reason). A worker that fails a
  // calibration run (an error, not a timing) is refused the same way. Returns at once.
  void start(const WorkerInfo& info);

 private:
  DevicePool& pool_;
  ThreadPool builder_;
};

}  // namespace ktune::rpc_runner
