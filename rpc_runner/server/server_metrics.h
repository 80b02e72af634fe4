// Defines ServerMetrics: the tuning server's Prometheus metrics, served over HTTP to scrapers (with
// the /healthz and /readyz probes) and carried by the Status RPC to `ktune server status`.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rpc_runner/protocol/job_types.h"
#include "tuner/measure.h"

namespace ktune::rpc_runner {

// What the gauges show, read anew at each collection (a scrape, a Status call).
struct FleetSnapshot {
  std::vector<WorkerInfo> workers;       // with their in-flight counts
  std::map<std::string, size_t> queued;  // candidates waiting for a worker, by device key
  std::vector<JobStatus> jobs;           // every job of the log
};

// What GET /readyz answers: whether the server can run jobs now.
struct Readiness {
  std::string log_problem;  // "" = the log takes writes; else why not (Database::check_writable)
  size_t workers = 0;       // device workers attached
  bool ready() const { return log_problem.empty() && workers > 0; }
  // "log: takes writes\nworkers: 2 attached\nready\n" (or the problem, and "not ready").
  std::string text() const;
};

// Every metric of one server, in one registry:
//   ktune_devices{key,state}            workers attached, state idle or busy (a candidate on it)
//   ktune_device_slots{key}             their slots;  ktune_candidates_in_flight{key}
//   ktune_queue_depth{key}              candidates waiting for a worker of the key
//   ktune_jobs{state}                   jobs of the log by state (queued ... cancelled)
//   ktune_trials_total{key}             trials written to the log by the server's jobs
//   ktune_trial_errors_total{key,kind}  those that failed, by ErrorKind name
//   ktune_candidates_requeued_total{key} candidates taken back from lost workers, queued again
//   ktune_queue_wait_seconds{key}       histogram: time a candidate waited for a worker
//   ktune_build_seconds{key}            histogram: a logged trial's build time (when it built)
//   ktune_run_seconds{key}              histogram: its run and check time (when it ran)
//   ktune_log_write_seconds             histogram: one batch's write to the log
// Trials are counted as they are logged, so the counters equal the records the jobs wrote (the
// fallback config a run logs for its speed-up included).
// Thread-safe.
class ServerMetrics {
 public:
  // snapshot: called at each collection, on the collecting thread.
  explicit ServerMetrics(std::function<FleetSnapshot()> snapshot);
  // Stops serving (see stop_serving()).
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // A candidate for workers of `key` was sent to one after waiting `seconds` in the queue.
  void queue_wait(const std::string& key, double seconds);
  // `candidates` held by a worker of `key` that was lost went back to the queue.
  void requeued(const std::string& key, size_t candidates);
  // A batch of a job on workers of `key` is in the log: its trials by outcome and their build
  // and run times; write_s is how long the write took.
  void logged(const std::string& key, const std::vector<tuner::MeasureResult>& results,
              double write_s);

  // Serves over plain HTTP on host:port (port 0 = any free port), from threads of its own:
  // GET /metrics, /healthz (200 while the process answers) and /readyz (200 when `readiness` says
  // ready, else 503; its text either way). Throws Error(kIo), one line with the reason, when the
  // address cannot be bound (a port in use).
  void serve(const std::string& host, int port, std::function<Readiness()> readiness);
  // The port served, or 0 when not serving.
  int port() const;
  // Ends the HTTP endpoint (before what the snapshot reads goes away). Idempotent.
  void stop_serving();

  // Every metric now, in Prometheus' text exposition format.
  std::string text();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune::rpc_runner
