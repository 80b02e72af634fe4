// Defines TuningServer, the gRPC service that leases attached device workers to clients, and list_devices.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ktune::rpc_runner {

struct TuningServerOptions {
  std::string host = "127.0.0.1";  // address to listen on ("0.0.0.0" = every interface)
  int port = 9190;                 // 0 = any free port (see TuningServer::port())
};

// One attached worker, as the registry sees it.
struct DeviceInfo {
  std::string worker_id;    // assigned by the server at attach time, e.g. "w3"
  std::string key;          // device key the worker registered with
  std::string target;       // the device's codegen::Target string
  int cores = 0;
  std::string description;
  bool leased = false;      // a session holds it
  std::string peer;         // the worker's network address as the server saw it
};

// The tuning server (TVM's RPC tracker semantics): workers attach with a device key and stay
// connected; a client session leases one free worker of a key (waiting up to its lease timeout)
// and its frames are forwarded to that worker and the replies back, until either side ends. A
// worker that goes away mid-session ends the session with an error and leaves the registry.
// Every stream is a reactor on gRPC's callback API (no thread per stream). Thread-safe.
class TuningServer {
 public:
  // Starts listening. Throws Error(kIo) when the address cannot be bound.
  explicit TuningServer(const TuningServerOptions& options);
  // Shuts down (see shutdown()).
  ~TuningServer();
  TuningServer(const TuningServer&) = delete;
  TuningServer& operator=(const TuningServer&) = delete;

  // Returns the port actually bound (the chosen one when options.port was 0).
  int port() const;
  // Returns "host:port" of the bound address.
  std::string address() const;
  // Returns every attached worker.
  std::vector<DeviceInfo> devices() const;
  // Ends every session and attachment and stops serving; idempotent. Returns within a few
  // seconds (open streams are cancelled).
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Asks the server at `address` ("host:port") for its attached workers. Throws Error(kIo) when
// the server cannot be reached within timeout_s seconds.
std::vector<DeviceInfo> list_devices(const std::string& address, double timeout_s = 10);

}  // namespace ktune::rpc_runner
