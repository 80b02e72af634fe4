// Defines JobManager::Job, one job as the manager keeps it (its spec, status, listeners, thread
// and hold), and the message of a job that another server of the log runs.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "rpc_runner/server/job_manager.h"

namespace ktune::rpc_runner {

// The message of a job that another server of the log runs.
inline constexpr const char* kRunElsewhere = "run by another server of this log";

struct JobManager::Job {
  JobSpec spec;
  JobStatus status;
  int64_t run_id = 0;
  std::atomic<bool> cancel{false};
  // Who cancelled it, for its message ("its client", "the admin"); guarded by mu_.
  std::string cancelled_by = "its client";
  std::map<uint64_t, Listener> listeners;  // guarded by mu_
  std::string summary_json;                // guarded by mu_: set when done
  // Model jobs: the latest tuner::model_summary_json (guarded by mu_), kept in the log's summary
  // column while the job runs so that a restarted server knows the trials done.
  std::string model_report;
  // Whether this server's connection holds the job (tuning_db::JobStore::try_hold). Set by submit
  // before the thread starts, then by the thread only.
  bool held = false;
  // Whether another server of the log runs it (guarded by mu_): this one then waits to take it.
  bool elsewhere = false;
  // Whether another server took it while this one's connection to the log was lost: this one
  // stops its session, and waits to take it over again.
  std::atomic<bool> taken_away{false};
  std::thread thread;
};

}  // namespace ktune::rpc_runner
