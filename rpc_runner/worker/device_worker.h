// Defines DeviceWorker: dials a tuning server, builds and measures the candidates it is sent,
// heartbeats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "rpc_runner/protocol/service_protocol.h"

namespace ktune::rpc_runner {

struct DeviceWorkerOptions {
  std::string server;                 // "host:port" of the tuning server
  std::string key;                    // device key jobs name, e.g. "x86-avx512"
  std::string runner_path;            // "" = ktune-runner next to this executable
  std::string target;                 // "" = codegen::Target::host().str()
  std::string description;            // "" = cpu, triple, cores and host name
  std::string token_file;             // the worker token ("" = none)
  bool allow_readable_token = false;  // accept a token file group or others may read
  std::string tls_ca_file;  // PEM of the CA that signed the server's certificate ("" = plaintext)
  int slots = 0;            // candidates taken at once (built in parallel); 0 = cores
  double peak_gflops = 0;  // the device's f32 peak, if known (the server checks results against it)
  bool can_build = true;  // false: the server cross-builds every kernel (no LLVM here, or too slow)
  bool emulated = false;  // runs under emulation: the server marks its records so
  double reconnect_initial_s = 0.5;  // first wait after losing the server; doubles per failure
  double reconnect_max_s = 10;       // longest wait between attempts
  uint32_t protocol_version = kProtocolVersion;  // what the hello claims (tests use another)
};

// Serves in background threads from construction to stop() through a WorkerSession: dials out
// to the server (so it works behind NAT), says hello with its key, target, cores and slots, then
// receives candidates. Each candidate's kernel is built here from its task and config (so build
// throughput grows with the fleet) and checked and timed in a ktune-runner child (a
// LocalRunner per distinct measurement setting); a candidate that comes with its kernel (the
// server cross-built and linked it, e.g. for a worker with can_build false) runs on a
// PrebuiltRunner's child, after the task's reference kernel that comes with it. A kernel that
// crashes or hangs ends its child, never the worker, and comes back as a typed result. Heartbeats
// go out while it measures. When the server goes away the worker reconnects with exponential
// backoff; results of a connection that broke are dropped (the server has requeued those
// candidates). Thread-safe.
class DeviceWorker {
 public:
  // Throws Error(kInvalidArgument) without a server or key, Error(kIo) when the runner
  // executable does not exist or a security file cannot be read.
  explicit DeviceWorker(const DeviceWorkerOptions& options);
  // Stops (see stop()).
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  // Closes the connection at once (the server requeues what this worker held), then waits for
  // the measurement in progress, if any, to end. Idempotent.
  void stop();

  // True while registered with the server.
  bool attached() const;
  // Results sent so far.
  size_t results_sent() const;
  // Runner children started so far (1 + one per crash or timeout, per measurement setting).
  size_t runners_started() const;
  // Candidates built here, and candidates that came with their kernel.
  size_t built_here() const;
  size_t prebuilt() const;
  // As WorkerSession::last_refusal() and refused_at_start().
  std::string last_refusal() const;
  std::string refused_at_start() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune::rpc_runner
