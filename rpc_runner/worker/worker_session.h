// Defines WorkerSession: a device's connection to the tuning server (hello, candidates in,
// results and heartbeats out, reconnection), whatever measures the candidates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rpc_runner/protocol/ktune.pb.h"
#include "rpc_runner/protocol/service_protocol.h"

namespace grpc {
class Status;
}

namespace ktune::rpc_runner {

struct WorkerSessionOptions {
  std::string server;       // "host:port" of the tuning server
  std::string key;          // device key jobs name, e.g. "rk3399"
  std::string target;       // the device's own target string; the server canonicalizes it
  std::string description;  // free text the server lists (cpu, cores, host name)
  int cores = 1;
  int vector_bits = 0;                // 0: the server derives it from the target
  int slots = 1;                      // candidates taken at once
  bool can_build = true;              // false: the server sends linked kernels
  bool emulated = false;              // runs under emulation: its records are marked so
  double peak_gflops = 0;             // the device's f32 peak, if known
  std::string token_file;             // the worker token ("" = none)
  bool allow_readable_token = false;  // accept a token file group or others may read
  std::string tls_ca_file;            // PEM of the CA of the server's certificate ("" = plaintext)
  double reconnect_initial_s = 0.5;   // first wait after losing the server; doubles per failure
  double reconnect_max_s = 10;        // longest wait between attempts (each is jittered, Backoff)
  uint32_t protocol_version = kProtocolVersion;  // what the hello claims (tests use another)
};

// The hello a worker with these options sends first on its stream.
rpc::WorkerMessage hello_message(const WorkerSessionOptions& options);

// Whether the server refused the worker for good, so that retrying cannot help: a wrong token,
// another protocol version, a target its compiler does not know.
bool is_refusal(const grpc::Status& status);

// Measures candidates of one measurement setting and returns one result per candidate, in
// order. `target` is this device's canonical target, as the server answered the hello. Called
// from one thread at a time; must not throw.
using MeasureBatchFn = std::function<std::vector<rpc::CandidateResult>(
    const std::vector<rpc::Candidate>& batch, const std::string& target)>;

// Serves in background threads from construction to stop(): dials out to the server (so it
// works behind NAT), says hello, then hands the candidates it receives to `measure` in batches
// of one setting (up to `slots`) and sends the results back; heartbeats go out meanwhile. When
// the server goes away it reconnects with jittered exponential backoff (Backoff); results of a
// connection that broke are dropped (the server has requeued those candidates). Thread-safe.
class WorkerSession {
 public:
  // Throws Error(kInvalidArgument) without a server or key, Error(kIo) when a security file
  // cannot be read.
  WorkerSession(const WorkerSessionOptions& options, MeasureBatchFn measure);
  // Stops (see stop()).
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // Closes the connection at once (the server requeues what this worker held), then waits for
  // the measurement in progress, if any, to end. Idempotent.
  void stop();

  // True while registered with the server.
  bool attached() const;
  // Results sent so far.
  size_t results_sent() const;
  // The canonical target the server answered with ("" before the first attach).
  std::string target() const;
  // The last reason the server gave for ending or refusing the connection ("" = none yet).
  std::string last_refusal() const;
  // The server's refusal (wrong token, another protocol version, a target it does not know), or
  // why TLS failed (a CA that does not verify the server's certificate, TLS on one side only),
  // when this worker was refused before it was ever attached: a configuration error its owner
  // should report and exit on. "" while not refused, and once it has been attached.
  std::string refused_at_start() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune::rpc_runner
