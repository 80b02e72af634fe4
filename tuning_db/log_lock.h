// Defines LogLock, the exclusive lock a tuning server holds on its log for as long as it runs.
#pragma once

#include <string>

namespace ktune::tuning_db {

// An exclusive advisory lock (flock) on the sidecar file "<log>.lock", held from construction to
// destruction. Two servers on one SQLite log would both run every unfinished job of it; the
// second one refuses to start instead. A PostgreSQL log takes no lock: servers may share it, each
// job being held by the one server that runs it (JobStore::try_hold). Commands that only read or
// add records (best, db stats, build, tune) do not take it: SQLite's own locking lets them work
// beside the server. The lock goes with the process, so a server that was killed leaves nothing to
// clean up. Movable, not copyable.
class LogLock {
 public:
  // Takes the lock without waiting and writes this process's id into the sidecar. Throws
  // Error(kInvalidArgument) naming the log (and the holder's pid when known) when another process
  // holds it, Error(kIo) when the sidecar cannot be created. A PostgreSQL URL: holds nothing.
  explicit LogLock(const std::string& log_path);
  LogLock(LogLock&& other) noexcept;
  LogLock& operator=(LogLock&&) = delete;
  LogLock(const LogLock&) = delete;
  LogLock& operator=(const LogLock&) = delete;
  ~LogLock();

  // The sidecar file's path: "<log>.lock".
  static std::string path_of(const std::string& log_path);

 private:
  int fd_ = -1;
};

}  // namespace ktune::tuning_db
