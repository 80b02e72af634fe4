// Defines RunnerProcess, the parent's handle on one ktune-runner child process.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "rpc_runner/runner/runner_protocol.h"

namespace ktune::rpc_runner {

// A ktune-runner child started with posix_spawn (never fork: the tuner is multithreaded),
// connected through a socketpair. Not thread-safe: one caller at a time.
// Destruction closes the socket (the child exits on EOF) and reaps it, killing it if needed.
class RunnerProcess {
 public:
  // Starts `runner_path --fd 3`, or `wrapper... runner_path --fd 3` when a wrapper command is
  // given (a device program under user-mode emulation starts its children through the
  // emulator: qemu-aarch64-static). Throws Error(kIo) when it cannot be started.
  explicit RunnerProcess(const std::string& runner_path,
                         const std::vector<std::string>& wrapper = {});
  ~RunnerProcess();
  RunnerProcess(const RunnerProcess&) = delete;
  RunnerProcess& operator=(const RunnerProcess&) = delete;

  // Sends the request and waits for its reply at most timeout_s seconds (< 0: no limit).
  // Returns the reply. When the child dies, hangs past the timeout (it is then killed) or
  // breaks the protocol, the process is dead afterwards and this throws Error with kind
  // kRun (died: the message names the signal or exit status), kRunTimeout or kIo.
  Reply call(const Request& request, double timeout_s);

  bool alive() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  // Kills (if still running) and reaps the child; returns a description of how it ended.
  std::string reap(bool kill_first);

  pid_t pid_ = -1;
  int fd_ = -1;
};

}  // namespace ktune::rpc_runner
