// Defines ChannelRunner, the Measurer that builds in a thread pool and runs through a RunnerChannel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "codegen/artifact.h"
#include "rpc_runner/runner_channel.h"
#include "support/thread_pool.h"
#include "tuner/measure.h"

namespace ktune::rpc_runner {

struct ChannelRunnerOptions {
  tuner::MeasureOptions measure;     // timing, timeouts, correctness check (AutoTVM defaults)
  size_t build_threads = 0;          // threads that lower + compile; 0 = hardware threads
  int run_threads = 0;               // threads of the kernels' parallel loops; 0 = runtime default
  uint64_t data_seed = 0;            // seeds the generated inputs of every kernel
  double reference_timeout_s = 120;  // building + running the reference of a task (plain loops)
};

// Per batch: every candidate is instantiated, lowered and compiled for its task's target in the
// thread pool (codegen's builds are thread-safe; each build owns its LLVM context); once the
// whole batch is built, the candidates are sent one by one, in input order, through the
// channel, whose runner checks each against the task's reference and times it. Runs never
// overlap builds or each other, so candidates never compete for the cores. Build and run
// timeouts start when the candidate's own work starts: time waiting for a pool thread or for
// the runner is not counted. A build that exceeds its timeout is reported kBuildTimeout at once
// and its thread's result is discarded (LLVM cannot be interrupted); a run that exceeds it is
// kRunTimeout, a runner that dies gives kRun, and the channel brings a fresh runner for the
// next candidate.
//
// The reference of a task (its compute under a plain schedule) is built once and cached; it is
// re-sent whenever the channel's epoch changes. Not thread-safe: one measure() at a time.
class ChannelRunner : public tuner::Measurer {
 public:
  ChannelRunner(const ChannelRunnerOptions& options, std::unique_ptr<RunnerChannel> channel);
  ~ChannelRunner() override;

  // Returns one result per input. Throws Error(kUnsupported) when a task's target cannot run
  // at the channel's end, Error(kIo) when the channel cannot work (a runner that cannot be
  // started, a device lost: the message then says "device lost").
  std::vector<tuner::MeasureResult> measure(const std::vector<tuner::MeasureInput>& inputs) override;

  // Wall time spent in measure() so far, by phase (for throughput benchmarks).
  struct PhaseTimes {
    double build_s = 0;  // instantiating + waiting for the batch's parallel builds
    double run_s = 0;    // references + candidates in the runner
  };
  const PhaseTimes& phase_times() const { return phase_times_; }

 protected:
  RunnerChannel& channel() { return *channel_; }

 private:
  struct Reference;
  // Returns the reference of the task, building it on first use.
  Reference& reference_for(const schedule_space::Task& task);
  tuner::MeasureResult run_candidate(const schedule_space::Task& task,
                                     const codegen::Artifact& artifact, double build_s);

  ChannelRunnerOptions base_options_;
  ThreadPool pool_;
  std::unique_ptr<RunnerChannel> channel_;
  PhaseTimes phase_times_;
  std::map<std::string, std::unique_ptr<Reference>> references_;  // by reference key
  std::set<std::string> loaded_references_;  // references the runner holds in loaded_epoch_
  uint64_t loaded_epoch_ = 0;
};

}  // namespace ktune::rpc_runner
