// build_in_children: one forked child per candidate build, killed at the build timeout.
#include "rpc_runner/runner/forked_build.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "support/seconds_since.h"
#include "te/lower.h"

namespace ktune::rpc_runner {
namespace {

using Clock = std::chrono::steady_clock;

// The child's message: one tag byte, then the serialized artifact ('A') or an error ('I':
// instantiation, 'B': build) followed by its message.
constexpr char kArtifact = 'A', kInstantiation = 'I', kBuildError = 'B';

void write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent went away: nothing to tell
    p += n;
    size -= static_cast<size_t>(n);
  }
}

// Runs in the child: never returns.
[[noreturn]] void build_and_exit(const BuildJob& job, int fd) {
  std::string out;
  try {
    te::LoweredFunc func = te::lower(job.inst.schedule, job.inst.args, job.name);
    const std::vector<uint8_t> bytes =
        codegen::build(func, codegen::Target::parse(job.target_key)).serialize();
    out.reserve(bytes.size() + 1);
    out.push_back(kArtifact);
    out.append(bytes.begin(), bytes.end());
  } catch (const Error& e) {
    out = std::string(1, e.kind() == ErrorKind::kInstantiation ? kInstantiation : kBuildError) +
          e.what();
  } catch (const std::exception& e) {
    out = std::string(1, kBuildError) + e.what();
  }
  write_all(fd, out.data(), out.size());
  ::_exit(0);  // no destructors, no atexit handlers of the parent's state
}

struct Child {
  size_t job = 0;
  pid_t pid = -1;
  int fd = -1;
  Clock::time_point start;
  std::string bytes;
};

Child start(const BuildJob& job, size_t index) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(ErrorKind::kIo,
                std::string("cannot make a pipe for a build: ") + std::strerror(errno));
  Child c;
  c.job = index;
  c.start = Clock::now();
  const pid_t parent = ::getpid();
  c.pid = ::fork();
  if (c.pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(ErrorKind::kIo, std::string("cannot start a build process: ") + std::strerror(err));
  }
  if (c.pid == 0) {
    // A build outlives no parent (a ktune killed mid-batch leaves no compiler behind).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    // Keep only stdio and this pipe: the child must not hold the write end of a sibling's pipe
    // (its end would be late) nor the log's or a runner's descriptors.
    const unsigned keep = static_cast<unsigned>(fds[1]);
    if (keep > 3) ::close_range(3, keep - 1, 0);
    ::close_range(keep + 1, ~0U, 0);
    build_and_exit(job, fds[1]);
  }
  ::close(fds[1]);
  c.fd = fds[0];
  ::fcntl(c.fd, F_SETFL, ::fcntl(c.fd, F_GETFL) | O_NONBLOCK);
  return c;
}

// Reaps the child; returns its wait status.
int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

BuildOutcome finish(Child& c) {
  ::close(c.fd);
  const int status = reap(c.pid);
  BuildOutcome out;
  out.seconds = seconds_since(c.start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || c.bytes.empty()) {
    out.error = ErrorKind::kBuild;
    out.message = WIFSIGNALED(status)
                      ? "the build process died with signal " + std::to_string(WTERMSIG(status))
                      : "the build process ended without a result";
    return out;
  }
  const char tag = c.bytes[0];
  if (tag == kArtifact) {
    try {
      out.artifact =
          codegen::Artifact::deserialize(std::vector<uint8_t>(c.bytes.begin() + 1, c.bytes.end()));
    } catch (const Error& e) {
      out.message = std::string("the build process sent a bad artifact: ") + e.what();
    }
    return out;
  }
  out.error = tag == kInstantiation ? ErrorKind::kInstantiation : ErrorKind::kBuild;
  out.message = c.bytes.substr(1);
  return out;
}

}  // namespace

std::vector<BuildOutcome> build_in_children(const std::vector<const BuildJob*>& jobs,
                                            size_t parallel, double timeout_s) {
  std::vector<BuildOutcome> outcomes(jobs.size());
  std::deque<size_t> waiting;
  for (size_t i = 0; i < jobs.size(); ++i) waiting.push_back(i);
  std::vector<Child> running;
  parallel = std::max<size_t>(parallel, 1);
  auto kill_all = [&] {
    for (Child& c : running) {
      ::kill(c.pid, SIGKILL);
      ::close(c.fd);
      reap(c.pid);
    }
    running.clear();
  };
  try {
    while (!waiting.empty() || !running.empty()) {
      while (running.size() < parallel && !waiting.empty()) {
        running.push_back(start(*jobs[waiting.front()], waiting.front()));
        waiting.pop_front();
      }
      // Wait for output, an end, or the earliest deadline.
      double wait_s = timeout_s;
      for (const Child& c : running) wait_s = std::min(wait_s, timeout_s - seconds_since(c.start));
      std::vector<pollfd> fds;
      for (const Child& c : running) fds.push_back({c.fd, POLLIN, 0});
      const int ms = static_cast<int>(std::clamp(wait_s * 1000.0 + 1.0, 0.0, 1000.0));
      if (::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR)
        throw Error(ErrorKind::kIo,
                    std::string("poll on build processes failed: ") + std::strerror(errno));
      std::vector<Child> still;
      for (size_t i = 0; i < running.size(); ++i) {
        Child& c = running[i];
        bool ended = false;
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          char buf[65536];
          for (;;) {
            ssize_t n = ::read(c.fd, buf, sizeof buf);
            if (n > 0) {
              c.bytes.append(buf, static_cast<size_t>(n));
              continue;
            }
            if (n == 0) ended = true;
            break;  // EAGAIN: more later; EINTR: next round
          }
        }
        if (ended) {
          outcomes[c.job] = finish(c);
        } else if (seconds_since(c.start) > timeout_s) {
          ::kill(c.pid, SIGKILL);
          ::close(c.fd);
          reap(c.pid);
          BuildOutcome& out = outcomes[c.job];
          out.error = ErrorKind::kBuildTimeout;
          out.seconds = seconds_since(c.start);
          out.message =
              "build exceeded " + std::to_string(timeout_s) + " s; its process was killed";
        } else {
          still.push_back(std::move(c));
        }
      }
      running = std::move(still);
    }
  } catch (...) {
    kill_all();
    throw;
  }
  return outcomes;
}

}  // namespace ktune::rpc_runner
