// Defines SimulatedFleet: many simulated devices in one process, each with a gRPC stream of its
// own to a tuning server, that answer candidates from a recorded landscape instead of building
// and running kernels; and LandscapeAnswers, what such a device answers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rpc_runner/protocol/ktune.pb.h"
#include "rpc_runner/worker/worker_session.h"
#include "tuner/landscape.h"

namespace ktune::rpc_runner {

// The answers of a simulated device. A recorded config is answered with its recorded throughput
// (costs = the task's flop / GFLOP/s, one per repeat) or its recorded error. A config the
// recording does not hold (a server's space is the whole space; a landscape holds a sample of it)
// is answered as the recorded config that a hash of its index picks: every config then gets a
// cost from the recording's distribution, the same one every time. A candidate of another
// workload is answered kUnsupported (its job fails with that message). Thread-safe.
class LandscapeAnswers {
 public:
  // Throws Error(kInvalidArgument) for a landscape without points.
  explicit LandscapeAnswers(tuner::Landscape landscape);

  // The point config `index` is answered with (see the class comment).
  const tuner::LandscapePoint& point(uint64_t index) const;
  // The result of a candidate, with the candidate's id.
  rpc::CandidateResult answer(const rpc::Candidate& candidate) const;
  const tuner::Landscape& landscape() const { return landscape_; }

 private:
  // The task's flop when it is the landscape's workload or the server's calibration (fma_peak);
  // 0 when it is another.
  double flop_of(const rpc::TaskSpec& task) const;
  // The calibration's answer: one core at the landscape's fastest point, all cores at that times
  // the hello's cores (fma_peak's one copy per core), so every recorded point sits under the
  // ceiling the server derives from it.
  rpc::CandidateResult calibration(const rpc::Candidate& candidate, double flop) const;

  tuner::Landscape landscape_;
  std::vector<uint64_t> recorded_;  // the recorded indices, ascending
  mutable std::mutex mu_;
  mutable std::map<std::string, double> flop_;  // by TaskSpec bytes; guarded by mu_
};

struct SimulatedFleetOptions {
  // Server, key, token and TLS, reconnection; the hello's target, cores and vector bits. Target
  // "" = the landscape's, and then cores and vector bits are the landscape's too; description "" =
  // "simulated device N, replays WORKLOAD".
  WorkerSessionOptions worker;
  int devices = 1;
  double delay_s = 0;  // each answer leaves this long after its candidate came (measuring time)
  uint64_t seed = 1;   // of the devices' reconnection jitter: device i draws from seed + i
};

// Serves from construction to stop(): every device dials the server on a connection of its own,
// says the same hello as a WorkerSession (with the same token, over TLS when configured), answers
// its candidates through LandscapeAnswers after delay_s, sends heartbeats at the interval the
// server asked for, and reconnects with jittered exponential backoff (Backoff) when the server
// goes away. Light enough for a thousand devices on a small machine: the devices are gRPC
// callback reactors sharing gRPC's threads and one timer thread, not threads of their own.
// Thread-safe.
class SimulatedFleet {
 public:
  // Throws Error(kInvalidArgument) without a server or key or with devices < 1, Error(kIo) when a
  // security file cannot be read.
  SimulatedFleet(const SimulatedFleetOptions& options,
                 std::shared_ptr<const LandscapeAnswers> answers);
  // Stops (see stop()).
  ~SimulatedFleet();
  SimulatedFleet(const SimulatedFleet&) = delete;
  SimulatedFleet& operator=(const SimulatedFleet&) = delete;

  // Closes every stream at once (the server requeues what the devices held) and waits for gRPC to
  // let go of them. Idempotent.
  void stop();

  // Devices registered with the server now.
  int attached() const;
  // Candidates received and results sent, over every device and connection.
  size_t candidates_received() const;
  size_t results_sent() const;
  // Makes up to `count` attached devices fall silent for good, as a device whose machine hangs:
  // their streams stay open but they send nothing more (no result, no heartbeat) and never
  // reconnect. Returns how many fell silent.
  int silence(int count);
  // The server's refusal of a device that was never attached (a wrong token, another protocol
  // version, a target it does not know): a configuration error. "" when none.
  std::string refused_at_start() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune::rpc_runner
