// Defines ServiceClient: what a client (ktune tune/jobs/best/build/db export, tests) asks the
// tuning server.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "rpc_runner/protocol/job_types.h"
#include "tuning_db/record.h"

namespace ktune::rpc_runner {

struct ServiceClientOptions {
  std::string server;                 // "host:port"
  std::string token_file;             // a client's or the admin's token ("" = none)
  bool allow_readable_token = false;  // accept a token file group or others may read
  std::string tls_ca_file;            // PEM of the CA of the server's certificate ("" = plaintext)
  double timeout_s = 10;              // each unary call
  // watch(): how long to keep reconnecting (with backoff) after the server went away.
  double reconnect_for_s = 120;
};

// Every call throws one clear Error when the server refuses or cannot be reached: kIo
// ("cannot reach the tuning server at ..."), kInvalidArgument (bad request, wrong token),
// kNotFound (unknown job). Thread-compatible: one call at a time per client.
class ServiceClient {
 public:
  // Throws Error(kIo)/Error(kInvalidArgument) when a security file cannot be read.
  explicit ServiceClient(const ServiceClientOptions& options);
  ~ServiceClient();

  // Submits a job; returns its status (state kQueued).
  JobStatus submit(const JobSpec& spec);
  // Queued and running jobs, or every job of the log (all).
  std::vector<JobStatus> jobs(bool all = false);
  // Asks the server to cancel the job; returns its status then (cancellation ends it shortly).
  JobStatus cancel(uint64_t id);
  // The job's status now. Throws Error(kNotFound) for an unknown id or another client's job (the
  // server logs that refusal).
  JobStatus job(uint64_t id);
  // Streams the job's events to on_event until it ends, and returns the last event. When the
  // stream breaks (server restart), reconnects with backoff for up to reconnect_for_s and goes
  // on. Throws Error(kNotFound) for an unknown job, Error(kIo) when the server stays away (at
  // once when the first attempt already finds no server: there is no watch to resume).
  JobEvent watch(uint64_t id, const std::function<void(const JobEvent&)>& on_event = {});
  // The k best successful records of a workload on a target (those of the server's LLVM version
  // when it has any, else of any version), optionally of one device key, fastest first; records
  // timed on emulated devices only with include_emulated.
  std::vector<tuning_db::Record> best(const std::string& workload_key, const std::string& target,
                                      const std::string& device_key = "", int64_t k = 1,
                                      bool include_emulated = false);
  // Writes the server's log (or one workload's records) as JSON lines. Returns the lines.
  int64_t export_log(std::ostream& out, const std::string& workload_key = "");
  // The attached device workers.
  std::vector<DeviceInfo> devices();
  // The server's metrics and devices and, for a non-empty device_key, the target that key's newest
  // record in the server's log was measured for (ServerStatus::recorded_target). Throws
  // Error(kUnsupported) when the server predates the Status call.
  ServerStatus status(const std::string& device_key = "");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune::rpc_runner
