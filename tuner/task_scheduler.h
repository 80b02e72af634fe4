// Defines TaskScheduler: one trial budget over many tasks, spent where the estimated end-to-end
// latency (sum of weight x best latency) falls most (Ansor's gradient scheduler) or in equal
// round-robin shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace ktune::tuner {

// The tuning state of one task, driven by the scheduler. Implementations: a TuningSession per
// allocation over the tuning log (tuner/model_tuning.h), a replayed landscape (bench/).
class TaskTuner {
 public:
  virtual ~TaskTuner() = default;
  // Measures up to `n` new configs; returns how many were measured. 0 means the task can give no
  // more (space exhausted): the scheduler stops allocating to it.
  virtual size_t tune(size_t n) = 0;
  // The task's best latency so far in seconds (resumed measurements included); +inf when no
  // config has succeeded.
  virtual double best_latency() const = 0;
};

// One task of the model: `weight` is how many times it runs per inference (its count).
struct ScheduledTask {
  std::string name;
  double weight = 1;
  double flop = 0;  // of one run
  std::string
      group;  // tasks of one group are alike (same templates): the forward estimate compares them
  TaskTuner* tuner = nullptr;  // not owned; outlives the scheduler
  // Allocations of its warm-up: one, or one per algorithm for a task tuned with its alternatives.
  size_t warmup = 1;
};

struct TaskSchedulerOptions {
  std::string strategy = "gradient";  // gradient (Ansor) or round_robin (an equal split)
  size_t trials = 1000;               // the whole budget, all tasks together
  size_t batch_size = 16;             // trials per allocation
  // Wall-clock budget in seconds (0: none): no allocation starts once this much time has passed
  // since run() began, so the run ends within about one allocation of it.
  double time_budget_s = 0;
  // Gradient strategy (Ansor's defaults): the weight of the backward (observed) gradient against
  // the forward (optimistic) one, the number of past allocations it looks back over, and how much
  // slower than its group's best throughput a task is expected to be able to get (beta).
  double alpha = 0.2;
  size_t backward_window = 3;
  double beta = 2.0;
  uint64_t seed = 0;  // breaks ties among equal gradients
};

// Throws Error(kInvalidArgument) for an unknown strategy, 0 trials or batch size, alpha outside
// [0, 1], beta <= 0, backward_window 0.
void validate(const TaskSchedulerOptions& options);

// After each allocation.
struct SchedulerStep {
  size_t task = 0;           // index of the task that was tuned
  size_t measured = 0;       // trials it measured in this allocation
  size_t total = 0;          // trials spent so far, all tasks
  double model_latency = 0;  // sum of weight x best latency (+inf while a task has none)
};

// Not thread-safe; one run per object.
class TaskScheduler {
 public:
  // Throws as validate(), and Error(kInvalidArgument) for no tasks, a null tuner or a weight <= 0.
  TaskScheduler(std::vector<ScheduledTask> tasks, TaskSchedulerOptions options);

  // Warm-up (each task's `warmup` allocations, in order), then allocations by the strategy until
  // the trial or time budget is spent or no task can give more. on_step (may be empty) sees every
  // allocation. Returns the steps. Throws what a TaskTuner throws.
  std::vector<SchedulerStep> run(const std::function<void(const SchedulerStep&)>& on_step = {});
  // Whether the last run() ended on the time budget (with trials of the trial budget left).
  bool out_of_time() const { return out_of_time_; }

  // The task the next allocation goes to (the warm-up's next task first), or nullopt-like
  // tasks().size() when every task is exhausted.
  size_t pick_next();
  // Ansor's gradient of task i: the estimated change of the model latency per allocation
  // (negative = a decrease). Exposed for tests.
  double gradient(size_t i) const;

  // Sum over tasks of weight x best latency; +inf while a task has no successful config.
  double model_latency() const;
  const std::vector<ScheduledTask>& tasks() const { return tasks_; }
  // Trials given to task i so far, and its best latency after each of its allocations.
  size_t trials_of(size_t i) const { return trials_[i]; }
  const std::vector<double>& history(size_t i) const { return history_[i]; }

 private:
  std::vector<ScheduledTask> tasks_;
  TaskSchedulerOptions options_;
  std::vector<size_t> trials_, allocations_;
  std::vector<std::vector<double>> history_;
  std::vector<bool> exhausted_;
  size_t next_round_robin_ = 0;
  bool out_of_time_ = false;
  std::mt19937_64 rng_;
};

}  // namespace ktune::tuner
