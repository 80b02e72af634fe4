// Defines JobManager: the tuning server's jobs, persisted in its log and each run as a
// TuningSession over the fleet.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rpc_runner/protocol/job_types.h"
#include "rpc_runner/server/device_pool.h"
#include "schedule_space/task.h"
#include "tuner/tuning_session.h"
#include "tuning_db/database.h"
#include "tuning_db/job_store.h"

namespace ktune::rpc_runner {

class ServerMetrics;

// The error for a job id the caller does not know: Error(kNotFound) "no job ID". Also what a
// client gets for another client's job, so that an id tells nothing of others' jobs.
Error unknown_job(uint64_t id);

// Every job is a row of the log's jobs table (its spec, state, run id) and, while it is queued
// or running, a thread here: it waits for a device of its key, resolves the target from the
// device, and runs a tuner::TuningSession whose measurer is the fleet (FleetMeasurer), so the
// search, the cost model and transfer from the log run in the server, and every result is in
// the log before the model sees it. All records of a job carry its run id; after a server
// restart the job continues that run with the trials left (configs already in the log are not
// measured again). A model job (JobSpec::model) runs tuner::ModelTuning instead (run_model).
// Cancel stops a job between candidates; shutdown() stops every thread but
// leaves the jobs' states as they were, so the next server resumes them. A job stopped by its
// log (Error(kDatabase): a full disk, an I/O error) fails for its clients with the reason, and
// its row stays queued or running, with that reason when the log takes it: the next server
// resumes it. Servers may share a PostgreSQL log: a job is run by the server that holds it (the
// one it was submitted to), and the others, which learn of it from the log, take it over when that
// one stops; claims keep their measurements apart. A server whose connection to the log was lost
// long enough for another to take its job over stops running it when it comes back (nothing more
// is measured or written for it there) and shows it as run elsewhere. Thread-safe.
class JobManager {
 public:
  using Listener = std::function<void(const JobEvent&)>;

  // db_path: the server's log (each job thread opens its own connection). metrics (may be null;
  // must outlive the manager) gets every batch the jobs write to the log. db_retry_s: how long
  // every connection to a PostgreSQL log waits for the server when it goes away
  // (tuning_db::OpenOptions::reconnect_for_s): the jobs pause meanwhile, and fail past it. Throws
  // Error(kDatabase) when the log cannot be opened.
  JobManager(std::string db_path, DevicePool& pool, ServerMetrics* metrics = nullptr,
             double db_retry_s = 0);
  // Stops (see shutdown()).
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Starts a thread for every queued or running job of the log. Returns how many. On a
  // PostgreSQL log it also starts watching the log for jobs that other servers take later, so
  // that this one can take them over too (watch_log).
  size_t resume_unfinished();
  // Validates and stores the job as the client's (its name in the token file; "" = none; its
  // records carry it), and starts it. Returns its status. Throws Error(kInvalidArgument) for a
  // bad spec (one line), Error(kDatabase).
  JobStatus submit(const JobSpec& spec, const std::string& client = "");
  // Returns the job's status, or nullopt for an unknown id.
  std::optional<JobStatus> status(uint64_t id);
  // Every job (all) or only the queued and running ones, by id.
  std::vector<JobStatus> list(bool all);
  // Cancels a queued or running job (a finished one is left as it is) on behalf of `by` (its
  // message says "cancelled by BY"). Returns its status. Throws Error(kNotFound) for an unknown
  // id, Error(kUnsupported) for a job that another server of the log runs.
  JobStatus cancel(uint64_t id, const std::string& by = "its client");

  // Calls `listener` with the job's status now, then after every batch and state change, last
  // with the finished state. Returns a token for unsubscribe. Listeners run on job threads
  // under the manager's lock: they must not block or call back into the manager. Throws
  // Error(kNotFound) for an unknown id.
  uint64_t subscribe(uint64_t id, Listener listener);
  // After this returns, the listener is never called again.
  void unsubscribe(uint64_t id, uint64_t token);

  // Stops every job thread and waits for them; their states stay as they are. Idempotent.
  void shutdown();

 private:
  struct Job;
  // The job's thread body.
  void run(Job& job);
  // Ends the job for a failure of its run (the log's, a cancel's, the job's own). Returns whether
  // its row took a terminal state: a failed log leaves it as it was, for the next server.
  bool fail(Job& job, const std::exception& e);
  // Marks every job whose hold the manager's connection lost (another server took it while the
  // connection was lost) as taken away, and says so. Needs db_mu_.
  void note_lost_holds();
  // Called after the job's own connection to the log came back: throws Error(kDatabase) when
  // another server took the job meanwhile, so that nothing more is written for it here.
  void confirm_held(Job& job);
  // Waits until this server holds the job: of the servers sharing a log (PostgreSQL), the one
  // that holds a job runs it, and the others wait to take it over should that one stop. Then
  // takes the row as the other left it. Returns false when this server stops first or the job
  // ended meanwhile.
  bool hold(Job& job);
  // A job of the log's row as this server knows it (not yet shared). Needs db_mu_.
  std::unique_ptr<Job> job_of_row(const tuning_db::JobRow& row);
  // Every second until shutdown: adopts each job stored in the log since the last look that this
  // server does not know (one submitted to another server sharing the log; an unfinished one's
  // thread then waits in hold()), and refreshes the jobs that other servers run from their rows
  // (refresh_elsewhere). It reads only those rows: the new ones, by id, and the ones run elsewhere.
  void watch_log();
  // Sets the status of every job that another server runs from its row and records (its state,
  // trials done, best, target), as that server left them a moment ago, and tells its listeners.
  // Needs db_mu_.
  void refresh_elsewhere();
  // Sets the job's run, summaries and status (state, target, done, best, message) from its row
  // and the count of its run's records (run_records). Needs mu_ when the job is shared with other
  // threads.
  void take_row(Job& job, const tuning_db::JobRow& row, uint64_t records);
  // How many records the run of the job's row has (0 before it has a run). Needs db_mu_.
  uint64_t run_records(const tuning_db::JobRow& row);
  void run_session(Job& job);
  void run_model(Job& job, const schedule_space::TargetTraits& traits, tuning_db::Database& db,
                 const tuning_db::TargetKey& target, const std::function<bool()>& stop);
  // Marks the job running and opens it in the pool; false (the job is then done) when every
  // trial was measured before a restart.
  bool begin_measuring(Job& job, uint64_t done_before);
  // What every TuningSession of the job shares (not trials, run id).
  tuner::SessionOptions session_options(const Job& job, const std::function<bool()>& stop) const;
  // Stores state + message, updates the status and tells the listeners. Takes mu_. Throws
  // Error(kDatabase) when the log cannot take it (the status is then unchanged).
  // "cancelled by its client" (or by whoever cancel() named): a cancelled job's message. Locks mu_.
  std::string cancelled_message(const Job& job);
  void set_state(Job& job, tuning_db::JobState state, const std::string& message);
  // Ends the job: its status becomes `shown` with the message and its listeners hear it,
  // whatever the log does; the log's row takes `stored` when it can (a failed write is logged).
  // Takes mu_. Does not throw for the log: a watching client always sees the end.
  void end(Job& job, tuning_db::JobState shown, tuning_db::JobState stored,
           const std::string& message);
  // Tells the job's listeners. Needs mu_.
  void publish(Job& job, const std::optional<tuner::ProgressSnapshot>& progress);
  // The status with the fleet's live counts. Needs mu_.
  JobStatus live_status(const Job& job) const;
  Job& start(JobStatus status, JobSpec spec, int64_t run_id);

  const std::string db_path_;
  const tuning_db::OpenOptions db_options_;
  DevicePool& pool_;
  ServerMetrics* const metrics_;
  std::mutex db_mu_;  // guards db_ and job_rows_ (sessions use their own connections)
  tuning_db::Database db_;
  tuning_db::JobStore job_rows_{db_};
  mutable std::mutex mu_;  // guards jobs_ and every Job's status, listeners, summary
  std::map<uint64_t, std::unique_ptr<Job>> jobs_;
  std::atomic<bool> stopping_{false};
  // Held by submit from its row to its entry in jobs_, and by watch_log's scan: a job submitted
  // here is never taken for another server's.
  std::mutex adopt_mu_;
  // The highest job id this server has seen in the log (guarded by adopt_mu_): watch_log reads
  // the rows above it.
  int64_t last_seen_ = 0;
  std::thread watcher_;
  uint64_t next_token_ = 1;
};

}  // namespace ktune::rpc_runner
