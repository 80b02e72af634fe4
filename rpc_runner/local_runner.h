// Defines LocalRunner, the Measurer that builds candidates in a thread pool and runs them in an
// isolated ktune-runner child process on this machine.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "codegen/artifact.h"
#include "support/thread_pool.h"
#include "tuner/measure.h"

namespace ktune::rpc_runner {

class RunnerProcess;

struct LocalRunnerOptions {
  tuner::MeasureOptions measure;     // timing, timeouts, correctness check (AutoTVM defaults)
  size_t build_threads = 0;          // threads that lower + compile; 0 = hardware threads
  int run_threads = 0;               // threads of the kernels' parallel loops; 0 = runtime default
  std::string runner_path;           // "" = ktune-runner next to this executable (/proc/self/exe)
  uint64_t data_seed = 0;            // seeds the generated inputs of every kernel
  double reference_timeout_s = 120;  // building + running the reference of a task (plain loops)
};

// Returns the default path of the runner executable: "ktune-runner" in the directory of
// /proc/self/exe. Throws Error(kIo) when /proc/self/exe cannot be read.
std::string default_runner_path();

// Measures on this machine. Per batch: every candidate is instantiated, lowered and compiled in
// the thread pool (codegen's builds are thread-safe; each build owns its LLVM context); once
// the whole batch is built, the candidates are sent one by one, in input order, to the single
// runner child, which checks each against the task's reference and times it. Runs never
// overlap builds or each other, so candidates never compete for the cores. Build and run timeouts start when the candidate's own work starts:
// time waiting for a pool thread or for the runner is not counted. A build that exceeds its
// timeout is reported kBuildTimeout at once and its thread's result is discarded (LLVM cannot be
// interrupted); a run that exceeds it gets the child killed (kRunTimeout), a child that dies
// gives kRun, and a fresh child is started for the next candidate.
//
// The reference of a task (its compute under a plain schedule) is built once and cached; it
// is re-sent to every new child. Not thread-safe: one measure() at a time.
class LocalRunner : public tuner::Measurer {
 public:
  // Throws Error(kIo) when the runner executable does not exist.
  explicit LocalRunner(const LocalRunnerOptions& options = {});
  ~LocalRunner() override;

  std::vector<tuner::MeasureResult> measure(const std::vector<tuner::MeasureInput>& inputs) override;

  const LocalRunnerOptions& options() const { return options_; }
  // Runner children started so far (1 + one per crash or timeout); for tests.
  size_t runners_started() const { return runners_started_; }

  // Wall time spent in measure() so far, by phase (for throughput benchmarks).
  struct PhaseTimes {
    double build_s = 0;  // instantiating + waiting for the batch's parallel builds
    double run_s = 0;    // references + candidates in the runner child
  };
  const PhaseTimes& phase_times() const { return phase_times_; }

 private:
  struct Reference;
  // Returns the reference of the task, building it on first use. Throws Error.
  Reference& reference_for(const schedule_space::Task& task);
  // Returns the live runner child, starting one (and sending nothing) if needed.
  RunnerProcess& runner();
  tuner::MeasureResult run_candidate(const schedule_space::Task& task,
                                     const codegen::Artifact& artifact, double build_s);

  LocalRunnerOptions options_;
  ThreadPool pool_;
  std::unique_ptr<RunnerProcess> runner_;
  size_t runners_started_ = 0;
  PhaseTimes phase_times_;
  std::map<std::string, std::unique_ptr<Reference>> references_;  // by reference key
  std::set<std::string> loaded_references_;  // references the current child holds
};

}  // namespace ktune::rpc_runner
