// Defines FakePeer, a crafted device worker whose answers a test scripts, and the results it sends.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rpc_runner/protocol/ktune.pb.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/worker/prebuilt_runner.h"
#include "rpc_runner/worker/worker_session.h"
#include "schedule_space/task.h"

namespace ktune::rpc_runner::testing {

// What a crafted worker answers the server's calibration at attach (fma_peak, peer_checks.h):
// fp32 GFLOP/s on one thread and on all threads (0: the one-thread figure times its cores), and
// how it answers the proofs that follow (calibration_proof.h): by running them (in a real
// ktune-runner, at this machine's speed), or with forged outputs at once.
struct FakeCalibration {
  double core_gflops = 20;
  double all_gflops = 0;
  bool forge_proof = false;
};

// A crafted worker: it attaches with the worker token, answers the server's calibration runs
// with `calibration`, and answers the n-th other candidate it receives (n counted from 0 over its
// whole life) with answer(n); nullopt: never. A silent one keeps
// heartbeating; with `rejoin` it gives the candidates up once the server drops it and attaches
// again as a new worker, else it stays stuck until destroyed. It keeps the config index of every
// candidate it received. Thread-safe.
class FakePeer {
 public:
  using Answer = std::function<std::optional<rpc::CandidateResult>(size_t n)>;

  FakePeer(WorkerSessionOptions options, Answer answer, bool rejoin = false,
           FakeCalibration calibration = {})
      : answer_(std::move(answer)),
        rejoin_(rejoin),
        calibration_(calibration),
        cores_(std::max(options.cores, 1)) {
    session_ = std::make_unique<WorkerSession>(
        options, [this](const std::vector<rpc::Candidate>& batch, const std::string& target) {
          return measure(batch, target);
        });
    self_ = session_.get();
  }
  ~FakePeer() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    session_->stop();
  }
  FakePeer(const FakePeer&) = delete;
  FakePeer& operator=(const FakePeer&) = delete;

  WorkerSession& session() { return *session_; }
  size_t received() const {
    std::lock_guard lock(mu_);
    return configs_.size();
  }
  // The config index of every candidate received, in order.
  std::vector<uint64_t> configs() const {
    std::lock_guard lock(mu_);
    return configs_;
  }

 private:
  std::vector<rpc::CandidateResult> measure(const std::vector<rpc::Candidate>& batch,
                                            const std::string& target) {
    std::vector<rpc::CandidateResult> out;
    bool silent = false;
    for (const rpc::Candidate& c : batch) {
      if (c.task().template_name() == "fma_peak") {
        out.push_back(c.measure().return_outputs() ? proved(c, target) : calibrated(c));
        continue;
      }
      size_t n;
      {
        std::lock_guard lock(mu_);
        n = configs_.size();
        configs_.push_back(c.config_index());
      }
      std::optional<rpc::CandidateResult> r = answer_(n);
      if (!r) {
        silent = true;
        continue;
      }
      r->set_id(c.id());
      out.push_back(std::move(*r));
    }
    // Silent: stuck until destroyed, or (rejoin) until the server has dropped this connection.
    auto dropped = [&] {
      const WorkerSession* self = self_;
      return rejoin_ && self != nullptr && !self->attached();
    };
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (!silent || released_ || dropped()) return out;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // The calibration answer: fma_peak's flop at the scripted speed.
  rpc::CandidateResult calibrated(const rpc::Candidate& c) const {
    const double flop = from_proto(c.task()).flop();
    const bool one = c.measure().threads() == 1;
    const double all =
        calibration_.all_gflops > 0 ? calibration_.all_gflops : calibration_.core_gflops * cores_;
    const double gflops = one ? calibration_.core_gflops : all;
    rpc::CandidateResult r;
    r.set_id(c.id());
    for (int i = 0; i < std::max(c.measure().repeat(), 1); ++i) r.add_costs(flop / (gflops * 1e9));
    r.set_build_s(0.1);
    r.set_run_s(0.1);
    return r;
  }

  // A calibration proof: run for real (its outputs and time are what the server checks), or forged.
  rpc::CandidateResult proved(const rpc::Candidate& c, const std::string& target) {
    if (calibration_.forge_proof) {
      const schedule_space::Task task = from_proto(c.task());
      rpc::CandidateResult r = calibrated(c);
      r.set_outputs(std::string(
          static_cast<size_t>(task.args().get_int("copies") * task.args().get_int("rows") *
                              task.args().get_int("lanes") * 4),
          '\0'));
      return r;
    }
    if (!prover_) prover_ = std::make_unique<PrebuiltRunner>(KTUNE_RUNNER_PATH);
    return prover_->run(c, target);
  }

  Answer answer_;
  bool rejoin_;
  FakeCalibration calibration_;
  int cores_;
  mutable std::mutex mu_;
  std::vector<uint64_t> configs_;  // guarded by mu_
  bool released_ = false;          // guarded by mu_
  std::atomic<const WorkerSession*> self_{nullptr};
  std::unique_ptr<PrebuiltRunner> prover_;  // the session's measuring thread only
  std::unique_ptr<WorkerSession> session_;
};

// A result with these costs (seconds per run) and build and run times.
inline rpc::CandidateResult costs(std::initializer_list<double> c, double build_s = 0.1,
                                  double run_s = 0.1) {
  rpc::CandidateResult r;
  for (double x : c) r.add_costs(x);
  r.set_build_s(build_s);
  r.set_run_s(run_s);
  return r;
}

// An error result of this kind (to_string of an ErrorKind, or anything) and message.
inline rpc::CandidateResult error(const std::string& kind, const std::string& message) {
  rpc::CandidateResult r;
  r.set_error_kind(kind);
  r.set_error_message(message);
  return r;
}

// A crafted device of `key` with this target (one core, four slots, reconnecting within 0.3 s)
// on the server at `address`: it answers each of its first `answers` candidates in 15 ms with a
// plausible timing of matmul 64x64x64, a little slower for each later candidate, and is silent on
// the rest.
inline std::unique_ptr<FakePeer> quick_matmul_peer(const std::string& address,
                                                   const std::string& key,
                                                   const std::string& target,
                                                   size_t answers = SIZE_MAX) {
  WorkerSessionOptions peer;
  peer.server = address;
  peer.key = key;
  peer.target = target;
  peer.description = "quick";
  peer.cores = 1;
  peer.slots = 4;
  peer.reconnect_initial_s = 0.1;
  peer.reconnect_max_s = 0.3;
  return std::make_unique<FakePeer>(
      peer, [answers](size_t n) -> std::optional<rpc::CandidateResult> {
        if (n >= answers) return std::nullopt;
        constexpr double kFlop = 2.0 * 64 * 64 * 64;
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
        return costs({kFlop / (10e9 * (1 + 0.001 * static_cast<double>(n)))});
      });
}

}  // namespace ktune::rpc_runner::testing
