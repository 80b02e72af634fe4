// Defines JobStore, the tuning server's job queue in the log, JobRow and the JobState enum.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tuning_db/database.h"

namespace ktune::tuning_db {

// Where a job stands. The log stores it as its to_string form, so logs of earlier versions open
// unchanged.
enum class JobState { kQueued, kRunning, kDone, kFailed, kCancelled };

// "queued", "running", "done", "failed", "cancelled".
std::string_view to_string(JobState state);
// Inverse of to_string. Throws Error(kInvalidArgument) for another word.
JobState job_state_from_string(std::string_view word);
// Whether the job ended (done, failed, cancelled): it never changes state again.
bool is_terminal(JobState state);
// Writes to_string(state) (for test failure messages and logs).
std::ostream& operator<<(std::ostream& out, JobState state);

// A tuning job of the server (rpc_runner's JobManager): what was submitted and where it stands.
struct JobRow {
  int64_t id = 0;                                  // assigned by add
  nlohmann::json spec = nlohmann::json::object();  // as submitted
  std::string device_key;
  int priority = 1;
  std::string owner;   // free text the client gave, e.g. user@host
  std::string client;  // the client it belongs to: its name in the server's token file
  JobState state = JobState::kQueued;
  int64_t run_id = 0;                     // the run its records carry; 0 = none yet
  std::string target;                     // resolved from its devices; "" = not yet
  std::string message;                    // why it waits, or why it failed
  std::string summary;                    // the run's summary (JSON text) once it ended; "" before
  double created_at = 0, updated_at = 0;  // unix seconds, set by the database
  std::optional<double> finished_at;      // set when the state becomes terminal
};

// The jobs table of a log, on the Database's connection.
// Thread-safety: that of its Database (one thread). The Database must outlive the store.
class JobStore {
 public:
  explicit JobStore(Database& db);

  // Stores a new job (state as given, usually kQueued). Returns its id. With `hold`, this
  // connection holds the job (try_hold) from before any other connection can see its row. Throws
  // Error(kInvalidArgument) for an empty device key, Error(kDatabase).
  int64_t add(const JobRow& job, bool hold = false);
  // Takes job `id` for this connection without waiting, so that of the servers sharing a log
  // (PostgreSQL) one runs it: held until release() or until the connection closes (its server
  // stops or dies), when another server may take it. Returns whether this connection holds it.
  // On SQLite always true: one server has the whole file (LogLock). Throws Error(kDatabase).
  bool try_hold(int64_t id);
  void release(int64_t id);
  // The jobs whose holds this connection lost since the last call (PostgreSQL: the connection
  // broke, and another server took them before it came back), each with who holds it now as
  // PostgreSQL describes that connection ("" when unknown). This server must stop running them.
  std::vector<std::pair<int64_t, std::string>> lost_holds();
  // Sets a job's state and message (and its run when run_id is not 0); a terminal state sets
  // finished_at. Throws Error(kNotFound) for an unknown id.
  void update(int64_t id, JobState state, std::string_view message, int64_t run_id = 0);
  // Sets the target a job resolved from its devices. Throws Error(kNotFound).
  void set_target(int64_t id, std::string_view target);
  // Stores a job's final summary (JSON text). Throws Error(kNotFound).
  void set_summary(int64_t id, std::string_view summary);
  // The job, or nullopt. Throws Error(kDatabase), Error(kInvalidArgument) for a state this
  // version does not know.
  std::optional<JobRow> get(int64_t id);
  // Every job (or only the queued and running ones), by id. Throws as get().
  std::vector<JobRow> all(bool unfinished_only = false);
  // The jobs of id above `after`, by id: those stored since a reader saw job `after` (ids grow in
  // the order jobs are stored, since add() holds the log's write lock). One look-up of the primary
  // key, whatever the jobs table holds. Throws as get().
  std::vector<JobRow> since(int64_t after);

 private:
  Database::Impl& impl_;
};

}  // namespace ktune::tuning_db
