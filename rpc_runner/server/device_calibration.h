// Defines DeviceCalibration: the fma_peak runs a tuning server sends each worker at attach, whose
// timings set the ceiling of that worker's results (peer_checks.h) before it takes any job, and
// the proofs that check those timings on the server's clock (calibration_proof.h).
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
  // proof_s: the seconds of work each proof takes at the speed claimed; 0 = no proofs (simulated
  // devices, whose timings are scripted).
  DeviceCalibration(DevicePool& pool, double proof_s)
      : pool_(pool), proof_s_(proof_s), builder_(1) {}

  // Sends worker `info` (attached, not yet calibrated) fma_peak on one thread, then, once that is
  // answered, on all its threads (one copy per declared core), timed by the worker. Then the
  // figures are checked (check_calibration), and proved: the same runs again, sized to proof_s at
  // the speed the worker timed, built here, their outputs checked (check_proof) and their rates
  // taken on this server's clock from send to answer; a proof more than kProofSlack times slower
  // than its claim refuses the worker. The pool gets the lower of each claim and its proof and
  // lists the worker for jobs, or the worker is refused (detached, its stream closed with the
  // one-line reason). A worker that fails a run (an error, not a timing) is refused the same way.
  // Returns at once.
  void start(const WorkerInfo& info);

 private:
  // A calibration's two runs: their candidates, flop and figures (one thread, all threads), and
  // the figures their proofs measured.
  struct Runs {
    rpc::Candidate candidates[2];
    double flop[2] = {0, 0};
    double gflops[2] = {0, 0};
    double proven[2] = {0, 0};
  };
  // Sends run `which` (0: one thread, 1: all); its answer sends the next or the first proof.
  void send_run(const std::shared_ptr<Runs>& runs, const WorkerInfo& info, int lanes, int which);
  // Builds and sends proof `which`; its answer, checked, sends the next or concludes.
  void prove(const std::shared_ptr<Runs>& runs, const WorkerInfo& info, int lanes, int which);
  // Lists the worker for jobs with the figures of `runs` (the proven ones where lower).
  void conclude(const std::shared_ptr<Runs>& runs, const WorkerInfo& info);
  void refuse(const WorkerInfo& info, const std::string& why);

  DevicePool& pool_;
  const double proof_s_;
  ThreadPool builder_;
};

}  // namespace ktune::rpc_runner
