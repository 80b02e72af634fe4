// Defines PostgresServer, a throwaway PostgreSQL cluster for the tests (initdb + pg_ctl in a
// temporary directory, unix socket only), and LogLocations, fresh tuning logs on either backend.
#pragma once

#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/tuning_db/test_util.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db::testing {

// A PostgreSQL server of its own: started by the constructor, stopped (and its files removed) by
// the destructor. PostgreSQL refuses to run as root, so a root process runs it as `postgres` (or
// `nobody`). Databases are made with create_database(); the superuser is "ktune", trust auth.
class PostgresServer {
 public:
  // The folder of initdb and pg_ctl, or why there is none.
  static std::optional<std::filesystem::path> bin_dir(std::string* why) {
    std::optional<std::filesystem::path> best;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      const auto bin = entry.path() / "bin";
      if (std::filesystem::exists(bin / "initdb") && std::filesystem::exists(bin / "pg_ctl") &&
          (!best || bin > *best))
        best = bin;
    }
    if (!best && why)
      *why = "no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql";
    return best;
  }

  // Starts a cluster; throws std::runtime_error with the server's log when it cannot.
  // wal_segment_mb: the size of its WAL files (initdb --wal-segsize; 0 = PostgreSQL's 16 MB).
  explicit PostgresServer(const std::filesystem::path& bin, int wal_segment_mb = 0) : bin_(bin) {
    char tmpl[] = "/tmp/ktune-pg-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      if (!pw) pw = ::getpwnam("nobody");
      if (!pw) throw std::runtime_error("running as root and no 'postgres' or 'nobody' user");
      uid_ = pw->pw_uid;
      gid_ = pw->pw_gid;
      if (::chown(dir_.c_str(), uid_, gid_) != 0) throw std::runtime_error("chown failed");
    }
    std::vector<std::string> initdb = {(bin_ / "initdb").string(),
                                       "-D",
                                       (dir_ / "data").string(),
                                       "-U",
                                       "ktune",
                                       "-A",
                                       "trust",
                                       "-E",
                                       "UTF8",
                                       "--locale=C",
                                       "--no-sync"};
    if (wal_segment_mb > 0) initdb.push_back("--wal-segsize=" + std::to_string(wal_segment_mb));
    run(initdb);
    start();
  }

  // Starts the cluster again after stop(). Throws as the constructor.
  void start() {
    // Unix socket in the temporary folder only; fsync off: a test cluster never outlives a crash.
    run({(bin_ / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-l",
         (dir_ / "server.log").string(), "-w", "-o",
         "-k " + dir_.string() + " -c listen_addresses= -F", "start"});
    started_ = true;
  }
  // Stops the cluster, closing every connection (a server that goes away mid-use): at once
  // ("immediate", as a crash), or "fast" (an administrator's stop: transactions rolled back).
  void stop(const std::string& mode = "immediate") {
    run({(bin_ / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-m", mode, "-w", "stop"});
    started_ = false;
  }
  // Sets the file-size limit (RLIMIT_FSIZE) of the running cluster: its postmaster and every
  // process it started (backends of open connections included). PostgreSQL ignores SIGXFSZ, so a
  // write past the limit fails as on a full disk ("could not extend file"). RLIM_INFINITY lifts
  // it. Throws std::runtime_error when a process cannot take it.
  void limit_file_size(rlim_t bytes) const {
    std::ifstream pid_file(dir_ / "data" / "postmaster.pid");
    pid_t postmaster = 0;
    if (!(pid_file >> postmaster)) throw std::runtime_error("no postmaster.pid: not running");
    std::vector<pid_t> pids = {postmaster};
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      // /proc/PID/stat: "PID (COMM) STATE PPID ...", COMM possibly with spaces and parentheses.
      std::ifstream stat(entry.path() / "stat");
      std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      const size_t close = text.rfind(')');
      if (close == std::string::npos) continue;
      char state = 0;
      pid_t parent = 0;
      if (std::sscanf(text.c_str() + close + 1, " %c %d", &state, &parent) == 2 &&
          parent == postmaster)
        pids.push_back(static_cast<pid_t>(std::stol(name)));
    }
    // As the cluster's user: root without CAP_SYS_RESOURCE may not change another user's limits.
    const pid_t child = ::fork();
    if (child == 0) {
      if (uid_ != 0 && (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0 || ::setuid(uid_) != 0))
        ::_exit(126);
      const rlimit limit{bytes, RLIM_INFINITY};
      for (pid_t pid : pids)
        if (::prlimit(pid, RLIMIT_FSIZE, &limit, nullptr) != 0 && errno != ESRCH) ::_exit(1);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw std::runtime_error("cannot set the file-size limit of the PostgreSQL processes");
  }
  // The cluster's own log (what its server processes said).
  std::string server_log() const {
    std::ifstream in(dir_ / "server.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  ~PostgresServer() {
    // A forked child that exits normally must not stop its parent's server.
    if (::getpid() != owner_) return;
    if (started_) {
      try {
        run({(bin_ / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-m", "immediate", "-w",
             "stop"});
      } catch (...) {
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // The URL of database `name` on this server.
  std::string url(const std::string& name) const {
    return "postgresql://ktune@/" + name + "?host=" + dir_.string();
  }
  // Creates an empty database and returns its URL.
  std::string create_database() {
    static std::atomic<int> counter{0};
    const std::string name = "log" + std::to_string(counter++);
    sql::Connection::open(url("postgres"), false).exec("CREATE DATABASE " + name);
    return url(name);
  }

 private:
  // Runs a server program as the cluster's user; throws with its output when it fails.
  void run(const std::vector<std::string>& argv) const {
    const std::string out = (dir_ / "command.out").string();
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (uid_ != 0 && (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0 || ::setuid(uid_) != 0))
        ::_exit(126);
      if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(out.c_str(), "a", stderr))
        ::_exit(126);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::string text = argv[0] + " failed (status " + std::to_string(status) + ")";
      if (FILE* f = std::fopen(out.c_str(), "r")) {
        char buf[4096];
        size_t n = std::fread(buf, 1, sizeof buf, f);
        std::fclose(f);
        text += ": " + std::string(buf, n);
      }
      throw std::runtime_error(text);
    }
  }

  std::filesystem::path bin_;
  std::filesystem::path dir_;
  pid_t owner_ = ::getpid();
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool started_ = false;
};

// The server this test process shares (started on first use, stopped at exit), or null with
// `why` set when this machine has no PostgreSQL server binaries.
inline PostgresServer* shared_postgres(std::string* why) {
  static std::string reason;
  static std::unique_ptr<PostgresServer> server = [] {
    auto bin = PostgresServer::bin_dir(&reason);
    return bin ? std::make_unique<PostgresServer>(*bin) : nullptr;
  }();
  if (!server && why) *why = reason;
  return server.get();
}

inline std::string backend_name(sql::Backend backend) {
  return backend == sql::Backend::kSqlite ? "SQLite" : "PostgreSQL";
}

// Fresh, empty tuning log locations on one backend: files in a temporary folder, or new databases
// of the shared server.
class LogLocations {
 public:
  explicit LogLocations(sql::Backend backend) : backend_(backend) {
    if (backend_ == sql::Backend::kPostgres) server_ = shared_postgres(&why_);
  }
  // Why this backend cannot be tested here ("" when it can): then the test skips.
  const std::string& unavailable() const { return why_; }
  // A new log location; `name` is the file name on SQLite.
  std::string fresh(const std::string& name = "log.db") {
    return server_ ? server_->create_database() : dir_.file(name);
  }

 private:
  sql::Backend backend_;
  TempDir dir_;
  PostgresServer* server_ = nullptr;
  std::string why_;
};

// A test that runs on each backend (instantiate with kBothBackends and backend_test_name):
// fresh() gives a new, empty log location; PostgreSQL is skipped, saying why, on a machine
// without its server binaries.
class OnBothBackends : public ::testing::TestWithParam<sql::Backend> {
 protected:
  void SetUp() override {
    if (!logs_.unavailable().empty())
      GTEST_SKIP() << "PostgreSQL not tested: " << logs_.unavailable();
  }
  std::string fresh(const std::string& name = "log.db") { return logs_.fresh(name); }

 private:
  LogLocations logs_{GetParam()};
};

inline const auto kBothBackends = ::testing::Values(sql::Backend::kSqlite, sql::Backend::kPostgres);

inline std::string backend_test_name(const ::testing::TestParamInfo<sql::Backend>& info) {
  return backend_name(info.param);
}

}  // namespace ktune::tuning_db::testing
