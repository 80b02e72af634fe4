// Defines TuningServer, ktune's gRPC tuning service: it owns the tuning log, the device fleet and
// the tuning jobs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rpc_runner/protocol/job_types.h"
#include "rpc_runner/protocol/service_protocol.h"

namespace ktune::rpc_runner {

struct TuningServerOptions {
  std::string host = "127.0.0.1";           // address to listen on ("0.0.0.0" = every interface)
  int port = 9190;                          // 0 = any free port (see TuningServer::port())
  std::string db_path = "ktune-server.db";  // the tuning log the server owns
  // A PostgreSQL log that goes away (stopped, restarted) is waited for this long, its jobs paused,
  // before they fail (and resume when the server restarts); 0 = a lost connection fails them.
  double db_retry_s = 60;
  // "worker: T", "admin: T", "client NAME: T" lines (load_server_security); "" = no tokens
  std::string token_file;
  bool allow_readable_token = false;  // accept a token file group or others may read
  std::string tls_cert_file;          // PEM; with tls_key_file: serve TLS only
  std::string tls_key_file;
  double heartbeat_s = 2;        // workers send a heartbeat at least this often
  double worker_timeout_s = 10;  // a worker silent this long is lost; its candidates requeued
  // A candidate sent to a worker must be answered within its build and run timeouts (and those
  // of the candidates the worker holds ahead of it) plus this margin, which covers transport,
  // the worker's runner start and a task's reference (built and run on a worker's first
  // candidate of the task, within 120 s). Past it the worker is lost and the candidate requeued.
  double deadline_margin_s = 150;
  int max_message_mib = 64;  // gRPC message limit, both ways
  int metrics_port = -1;  // Prometheus' GET /metrics on host:metrics_port; -1 = none, 0 = any free
  // Job submissions a client may make a minute (a burst of that many, then one every 60/N s);
  // 0 = no limit. Without client tokens, callers are told apart by their address.
  int max_jobs_per_minute = 60;
  // Each attaching worker's calibration is proved: its two runs again, this many seconds of work
  // at the speeds it timed, outputs checked and timed by the server (device_calibration.h). 0 =
  // no proof, only for simulated devices (a fleet whose timings are scripted).
  double calibration_proof_s = 1;
};

// The tuning service. Device workers dial in (Attach, with the worker token) and are sent
// candidates of the jobs of their key; clients (with a client's or the admin's token) submit,
// watch, list and cancel jobs, and query the log (best / top-k records, export). A job belongs
// to the client that submitted it: a client sees, watches and cancels its own jobs only (another
// client's job id is "not found"), the admin every job; its records name that client and the
// worker that measured them. Submissions are rate-limited per client (RESOURCE_EXHAUSTED). Every
// refused call, and the admin's cancel of another client's job, is one line of the log naming
// the caller. The server owns the log: every
// measurement of every job is recorded there once. Unfinished jobs of the log are resumed at
// start. Every stream is a reactor on gRPC's callback API (no thread per stream). Besides the
// Tuning service it serves gRPC's standard health checking (grpc.health.v1.Health: SERVING until
// shutdown) and server reflection, neither behind a token; with metrics_port, the metrics of
// ServerMetrics over plain HTTP (no token: counts and device keys only). Thread-safe.
class TuningServer {
 public:
  // Locks the log (one server per log, see tuning_db::LogLock), opens it and starts listening.
  // Throws Error(kIo) when the address (or the metrics port) cannot be bound,
  // Error(kInvalidArgument) for bad options or security files or a log another server holds,
  // Error(kDatabase) for the log.
  explicit TuningServer(const TuningServerOptions& options);
  // Shuts down (see shutdown()).
  ~TuningServer();
  TuningServer(const TuningServer&) = delete;
  TuningServer& operator=(const TuningServer&) = delete;

  // Returns the port actually bound (the chosen one when options.port was 0).
  int port() const;
  // Returns "host:port" of the bound address.
  std::string address() const;
  // Returns the metrics port actually bound, or 0 without metrics_port.
  int metrics_port() const;
  // Returns every attached worker.
  std::vector<DeviceInfo> devices() const;
  // Stops the jobs (their states stay in the log, to resume), ends every stream and stops
  // serving; idempotent. Returns within a few seconds.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune::rpc_runner
