// Defines RunnerChannel (send a runner Request, get its Reply in time) and ProcessChannel (a local
// child).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "rpc_runner/runner/runner_protocol.h"

namespace ktune::rpc_runner {

class RunnerProcess;

// Where candidates run: a local child process, or a device leased from a tuning server.
// Not thread-safe: one caller at a time.
class RunnerChannel {
 public:
  virtual ~RunnerChannel() = default;

  // Throws Error(kUnsupported) when a task of this target cannot run at the other end.
  virtual void check_target(const std::string& target_key) const = 0;

  // Makes the channel ready for the next call (e.g. starts a fresh child after a crash) and
  // returns its epoch: the references sent under another epoch are gone and must be sent
  // again. Throws Error(kIo) when the channel cannot work any more.
  virtual uint64_t ready() = 0;

  // Sends the request and returns its reply; the other end allows the request timeout_s
  // seconds (< 0: no limit). A candidate that kills or hangs its runner throws Error(kRun) or
  // Error(kRunTimeout), or comes back as a Reply with that error. Throws Error(kIo) on a broken
  // channel; lost() then tells whether it can never work again.
  virtual Reply call(const Request& request, double timeout_s) = 0;

  // Returns true once the channel is gone for good (a device lost mid-session).
  virtual bool lost() const = 0;
};

// A ktune-runner child on this machine, replaced by a fresh one after a crash or timeout.
class ProcessChannel final : public RunnerChannel {
 public:
  // Throws Error(kIo) when runner_path is not an executable file.
  explicit ProcessChannel(std::string runner_path);
  ~ProcessChannel() override;

  // Throws Error(kUnsupported) unless the target's code runs on this host.
  void check_target(const std::string& target_key) const override;
  uint64_t ready() override;
  Reply call(const Request& request, double timeout_s) override;
  bool lost() const override { return false; }

  // Children started so far (1 + one per crash or timeout, once used). May be read from any thread.
  size_t started() const { return started_.load(); }

 private:
  std::string runner_path_;
  std::unique_ptr<RunnerProcess> child_;
  std::atomic<size_t> started_{0};
};

}  // namespace ktune::rpc_runner
