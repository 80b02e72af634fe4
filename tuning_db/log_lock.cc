// LogLock: flock on "<log>.lock", with the holder's pid inside for the refusal message (none for a
// PostgreSQL log).
#include "tuning_db/log_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "support/error.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {

std::string LogLock::path_of(const std::string& log_path) { return log_path + ".lock"; }

LogLock::LogLock(const std::string& log_path) {
  // Servers may share a PostgreSQL log: each job is held by the one that runs it (JobStore::
  // try_hold) and claims keep their measurements apart, so there is nothing to lock here.
  if (sql::is_postgres_url(log_path)) return;
  const std::string path = path_of(log_path);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error(ErrorKind::kIo, "cannot create the lock file " + path +
                                    " of the tuning log: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK)
      throw Error(ErrorKind::kIo, "cannot lock " + path + ": " + std::strerror(err));
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    throw Error(ErrorKind::kInvalidArgument, "tuning log '" + log_path +
                                                 "' is already served by another ktune server" +
                                                 (holder.empty() ? "" : " (pid " + holder + ")") +
                                                 "; one server per log (its lock is " + path + ")");
  }
  // Who holds it, for the message of the next one that tries.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid; only the message of a refused server is poorer.
  }
}

LogLock::LogLock(LogLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

LogLock::~LogLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ktune::tuning_db
