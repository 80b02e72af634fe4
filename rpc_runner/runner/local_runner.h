// Defines LocalRunner, the Measurer that runs candidates in an isolated ktune-runner child on this
// machine.
#pragma once

#include <string>

#include "rpc_runner/runner/channel_runner.h"

namespace ktune::rpc_runner {

struct LocalRunnerOptions : ChannelRunnerOptions {
  std::string runner_path;  // "" = ktune-runner next to this executable (/proc/self/exe)
};

// Returns the default path of the runner executable: "ktune-runner" in the directory of
// /proc/self/exe. Throws Error(kIo) when /proc/self/exe cannot be read.
std::string default_runner_path();

// A ChannelRunner whose channel is one ktune-runner child on this machine (a ProcessChannel):
// a kernel that crashes or hangs ends that child (kRun / kRunTimeout; a hang is killed after
// the run timeout) and a fresh child takes the next candidate. Only targets whose code runs on
// this host are accepted. Not thread-safe: one measure() at a time.
class LocalRunner : public ChannelRunner {
 public:
  // Throws Error(kIo) when the runner executable does not exist.
  explicit LocalRunner(const LocalRunnerOptions& options = {});
  ~LocalRunner() override;

  const LocalRunnerOptions& options() const { return options_; }
  // Runner children started so far (1 + one per crash or timeout); for tests.
  size_t runners_started() const { return process_->started(); }

 private:
  LocalRunnerOptions options_;
  ProcessChannel* process_;  // owned by the base class
};

}  // namespace ktune::rpc_runner
