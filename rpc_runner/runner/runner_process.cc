// Starting, talking to and reaping a ktune-runner child.
#include "rpc_runner/runner/runner_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

extern char** environ;

namespace ktune::rpc_runner {
namespace {

constexpr int kChildFd = 3;

}  // namespace

RunnerProcess::RunnerProcess(const std::string& runner_path,
                             const std::vector<std::string>& wrapper) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw Error(ErrorKind::kIo, std::string("socketpair: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears close-on-exec on the child's copy; every other descriptor of ours stays closed.
  posix_spawn_file_actions_adddup2(&actions, fds[1], kChildFd);
  std::string fd_arg = std::to_string(kChildFd);
  std::vector<char*> argv;
  for (const std::string& w : wrapper) argv.push_back(const_cast<char*>(w.c_str()));
  argv.insert(argv.end(), {const_cast<char*>(runner_path.c_str()), const_cast<char*>("--fd"),
                           fd_arg.data(), nullptr});
  pid_t pid = -1;
  // A wrapper is looked up on PATH; the runner itself is a path.
  int rc = wrapper.empty()
               ? ::posix_spawn(&pid, runner_path.c_str(), &actions, nullptr, argv.data(), environ)
               : ::posix_spawnp(&pid, wrapper[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw Error(ErrorKind::kIo, "cannot start runner '" + runner_path + "': " + std::strerror(rc));
  }
  pid_ = pid;
  fd_ = fds[0];
}

RunnerProcess::~RunnerProcess() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (pid_ > 0) {
    // The child exits on EOF; give it a moment before killing it.
    for (int i = 0; i < 50; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      ::usleep(2000);
    }
    reap(true);
  }
}

std::string RunnerProcess::reap(bool kill_first) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (pid_ <= 0) return "not running";
  if (kill_first) ::kill(pid_, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  pid_ = -1;
  if (r < 0) return std::string("waitpid: ") + std::strerror(errno);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "runner killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "runner exited with status " + std::to_string(WEXITSTATUS(status));
  return "runner ended";
}

Reply RunnerProcess::call(const Request& request, double timeout_s) {
  if (!alive()) throw Error(ErrorKind::kIo, "runner is not running");
  std::optional<std::vector<uint8_t>> frame;
  try {
    write_frame(fd_, encode(request));
    frame = read_frame(fd_, timeout_s < 0 ? -1 : timeout_s * 1e3);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kRunTimeout) {
      reap(true);
      throw Error(ErrorKind::kRunTimeout,
                  "run exceeded " + std::to_string(timeout_s) + " s; runner killed");
    }
    // A write or read failure means the child went away mid-request.
    throw Error(ErrorKind::kRun, reap(false) + " (" + e.what() + ")");
  }
  if (!frame) throw Error(ErrorKind::kRun, reap(false));
  try {
    return decode_reply(*frame);
  } catch (const Error& e) {
    reap(true);
    throw Error(ErrorKind::kIo, std::string("runner protocol: ") + e.what());
  }
}

}  // namespace ktune::rpc_runner
