// Defines Child (a process with its output in files), start_server and a process's CPU time and
// memory, for tests and benchmarks that run `ktune server` and `ktune worker` as real processes.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/error.h"

extern char** environ;

namespace ktune::testing_process {

namespace fs = std::filesystem;

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A child process with its stdout and stderr sent to files; killed (SIGKILL) when destroyed.
struct Child {
  pid_t pid = -1;

  Child(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw Error(ErrorKind::kIo, "cannot start " + args[0]);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { kill(SIGKILL); }

  // Sends the signal and reaps the child.
  void kill(int signal) {
    if (pid <= 0) return;
    ::kill(pid, signal);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }

  // Waits at most timeout_s for the exit; returns the exit status, or -1 when it did not exit
  // in time (it keeps running) or died of a signal.
  int wait(double timeout_s) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
};

// User + system CPU seconds of a process so far (/proc/PID/stat).
inline double cpu_seconds(pid_t pid) {
  const std::string text = read_file("/proc/" + std::to_string(pid) + "/stat");
  // Fields after the command name (which is in parentheses and may hold spaces).
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::vector<std::string> f;
  for (std::string w; rest >> w;) f.push_back(w);
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return (std::stod(f.at(11)) + std::stod(f.at(12))) / ticks;  // utime, stime: fields 14, 15
}

// Resident memory of a process, bytes (VmRSS of /proc/PID/status; 0 when it is gone).
inline double rss_bytes(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024;
  return 0;
}

// Waits for "listening on HOST:PORT" in the server's stdout file; returns "HOST:PORT" or "" after
// timeout_s. Only the last such line counts (the file is appended to across restarts).
inline std::string wait_for_address(const fs::path& out, double timeout_s = 20) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = read_file(out);
    const auto at = text.rfind("listening on ");
    const auto end = text.find('\n', at);
    if (at != std::string::npos && end != std::string::npos)
      return text.substr(at + 13, end - at - 13);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

}  // namespace ktune::testing_process
