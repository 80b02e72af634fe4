// Defines DeviceWorker: attaches to a tuning server and runs leased sessions' frames on a ktune-runner child.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace ktune::rpc_runner {

struct DeviceWorkerOptions {
  std::string server;               // "host:port" of the tuning server
  std::string key;                  // device key clients lease by, e.g. "x86-avx512"
  std::string runner_path;          // "" = ktune-runner next to this executable
  std::string target;               // "" = codegen::Target::host().str()
  std::string description;          // "" = cpu, triple, cores and host name
  double reconnect_initial_s = 0.5; // first wait after losing the server; doubles per failure
  double reconnect_max_s = 10;      // longest wait between attempts
};

// Serves in a background thread from construction to stop(). Each frame runs on a
// ktune-runner child with the frame's timeout; a child that crashes or times out is replaced,
// and the reference requests seen so far (by key) are re-sent to the fresh child before a
// candidate that needs one. Every failure becomes a Reply with its ErrorKind (kRun,
// kRunTimeout, ...), never the end of the worker. When the server goes away the worker
// reconnects with exponential backoff. Thread-safe.
class DeviceWorker {
 public:
  // Throws Error(kInvalidArgument) without a server or key, Error(kIo) when the runner
  // executable does not exist.
  explicit DeviceWorker(const DeviceWorkerOptions& options);
  // Stops (see stop()).
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  // Closes the connection at once (the server drops the worker and fails its session), then
  // waits for the frame in progress, if any, to end. Idempotent.
  void stop();

  // True while registered with the server.
  bool attached() const;
  // Frames answered so far.
  size_t frames_served() const;
  // Runner children started so far (1 + one per crash or timeout, once used).
  size_t runners_started() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune::rpc_runner
