// Defines ChannelRunner, the Measurer that builds in a thread pool and runs through one or more
// RunnerChannels.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/artifact.h"
#include "rpc_runner/runner/runner_channel.h"
#include "tuner/measure.h"

namespace ktune::rpc_runner {

// The runner child's timing options for measurement options and a thread count.

struct ChannelRunnerOptions {
  tuner::MeasureOptions measure;     // timing, timeouts, correctness check (AutoTVM defaults)
  size_t build_threads = 0;          // builds (child processes) at once; 0 = hardware threads
  double reference_timeout_s = 120;  // building + running the reference of a task (plain loops)
};

// Per batch: every candidate is instantiated here, then lowered and compiled for its task's target
// in a child process of its own (build_threads at once; see build_in_children), unless this runner
// built its config before (same workload, target and config index: the last kBuildsKept builds
// are kept), whose artifact is then run and checked as a new one would be; once the whole
// batch is built, the candidates are handed out in input order to whichever channel is free (one
// thread per channel while the batch runs), whose runner checks each against the task's reference
// and times it; results come back in input order. Runs never overlap builds, and a channel runs
// one candidate at a time, so candidates never compete for one device's cores (several channels
// are meant to be several devices). Build and run timeouts start when the candidate's own work
// starts: time waiting for a free build slot or for the runner is not counted. A build that
// exceeds its timeout is killed with its process and reported kBuildTimeout at once (no thread
// stays behind, nothing delays the next candidates or the process's exit); a run that exceeds it
// is kRunTimeout, a runner that dies gives kRun, and the channel brings a fresh runner for the
// next candidate.
//
// The reference of a task (its compute under a plain schedule) is built once and cached; each
// channel is sent it before its first candidate of the task, and again whenever that channel's
// epoch changes. A reference that fails to load or run (a runner that crashed) is tried again on a
// fresh runner, kReferenceAttempts times in all, before the task's candidates are reported
// kUnknown. A channel that is lost (lost() after a failed call) is dropped for good and its
// in-flight candidate goes to another live channel; only when every channel is lost does
// measure() throw. Not thread-safe: one measure() at a time.
class ChannelRunner : public tuner::Measurer {
 public:
  static constexpr int kReferenceAttempts = 3;

  ChannelRunner(const ChannelRunnerOptions& options, std::unique_ptr<RunnerChannel> channel);
  // Runs over every channel at once. Throws Error(kInternal) when channels is empty or holds null.
  ChannelRunner(const ChannelRunnerOptions& options,
                std::vector<std::unique_ptr<RunnerChannel>> channels);
  ~ChannelRunner() override;

  // Returns one result per input. Throws Error(kUnsupported) when a task's target cannot run
  // at the channels' end, Error(kIo) when the channels cannot work (a runner that cannot be
  // started; every device lost: the message then says "device lost").
  std::vector<tuner::MeasureResult> measure(
      const std::vector<tuner::MeasureInput>& inputs) override;

  // Builds kept for measuring a config again (a re-timing's rounds and passes), oldest dropped
  // past this many: a build is most of a small kernel's measurement.
  static constexpr size_t kBuildsKept = 256;
  // Candidates measured on a kept build instead of a new one, so far.
  uint64_t reused_builds() const { return reused_builds_; }

  // Wall time spent in measure() so far, by phase (for throughput benchmarks).
  struct PhaseTimes {
    double build_s = 0;  // instantiating + waiting for the batch's parallel builds
    double run_s = 0;    // references + candidates in the runners
  };
  const PhaseTimes& phase_times() const { return phase_times_; }

 protected:
  // The first channel, and channel i of channel_count() (in construction order).
  RunnerChannel& channel() { return *channels_.front().channel; }
  RunnerChannel& channel(size_t i) { return *channels_.at(i).channel; }
  size_t channel_count() const { return channels_.size(); }

 private:
  struct Reference;
  // One channel and what its runner holds.
  struct ChannelSlot {
    std::unique_ptr<RunnerChannel> channel;
    std::set<std::string> loaded_references;  // references the runner holds in loaded_epoch
    uint64_t loaded_epoch = 0;
  };
  // Returns the reference of the task, building it on first use. Thread-safe.
  Reference& reference_for(const schedule_space::Task& task);
  // Throws Error(kIo) when the slot's channel is lost (the candidate must go elsewhere).
  tuner::MeasureResult run_candidate(ChannelSlot& slot, const schedule_space::Task& task,
                                     const codegen::Artifact& artifact, double build_s);
  // Runs every built candidate (artifacts[i] set) into results[i], over the live channels.
  void run_batch(const std::vector<tuner::MeasureInput>& inputs,
                 const std::vector<std::optional<codegen::Artifact>>& artifacts,
                 const std::vector<double>& build_seconds,
                 std::vector<tuner::MeasureResult>& results);

  ChannelRunnerOptions base_options_;
  size_t build_parallelism_;  // build children at once
  std::vector<ChannelSlot> channels_;
  PhaseTimes phase_times_;
  // Successful builds by build_key (workload, target, config), with their build time; the order
  // they came in, to drop the oldest.
  struct KeptBuild {
    codegen::Artifact artifact;
    double seconds = 0;
  };
  std::map<std::string, KeptBuild> kept_builds_;
  std::deque<std::string> kept_order_;
  uint64_t reused_builds_ = 0;
  std::mutex references_mu_;  // guards references_ and each Reference's error
  std::map<std::string, std::unique_ptr<Reference>> references_;  // by reference key
};

}  // namespace ktune::rpc_runner
