// Defines ModelTuning: every tunable task of a model tuned under one trial budget (TaskScheduler
// over one TuningSession per allocation), with the estimated model latency against the untuned
// fallbacks.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/model_tasks.h"
#include "tuner/measure.h"
#include "tuner/task_scheduler.h"
#include "tuner/tuning_session.h"
#include "tuning_db/database.h"

namespace ktune::tuner {

struct ModelTuningOptions {
  // Per allocation: tuner, seed, batch size (= scheduler.batch_size), device key, transfer
  // (used in a task's first allocation only). `trials` and `measure_fallback` are set per call
  // (the fallbacks are measured once, all together, when the run starts).
  SessionOptions session;
  TaskSchedulerOptions scheduler;  // trials = the whole budget; strategy
};

// One task of the model as tuned.
struct TaskProgress {
  std::string key;       // the workload it should use (ModelTask::key())
  std::string tuned_as;  // the workload tuned today (ModelTask::tunable)
  int64_t count = 0;
  double flop = 0;
  size_t trials =
      0;  // new trials in this run (of its tuned workload, shared by tasks tuned as the same one)
  double best_s = 0;  // best latency (resumed records and the fallback included); +inf when none
  std::optional<double>
      fallback_s;  // the untuned fallback config, measured at the start of this run
  // Its layers in graph order, as a model build labels them (ModelTasks::layers_of): one per
  // occurrence.
  std::vector<std::string> layers;
  // The key of the task this one is another algorithm for (ModelTask::alternative_of), or "".
  std::string alternative_of;
  // Failed new trials of its tuned workload in this run, per error kind (to_string(ErrorKind)).
  std::map<std::string, int64_t> errors;
  // The timings behind best_s (the log's best record) or fallback_s (the fallback's re-timing)
  // spread more than tuning_db::kNoisySpread: no speed-up over the fallbacks rests on them.
  bool best_noisy = false, fallback_noisy = false;
};

struct ModelTuningReport {
  std::vector<TaskProgress> tasks;  // the tunable tasks, in the model's order
  size_t trials = 0;                // spent in this run
  // Sum of count x best latency over the tasks, a task's best being the fastest of it and its
  // alternatives (the one a model build runs).
  double tuned_s = 0;
  double fallback_s = 0;  // sum of count x fallback latency (tasks whose fallback ran)
  size_t not_tuned = 0;   // tasks no template takes today (not in either sum)
  std::vector<SchedulerStep> steps;
  // The scheduler's tasks (SchedulerStep::task indexes this): one per distinct tuned workload,
  // its alternatives' workloads tuned under it (best: the fastest of them).
  std::vector<std::string> workloads;
  std::vector<double> workload_best_s;
  // The workload the last step measured: its task's, or an alternative's (its Winograd form)
  // that the step's allocation went to.
  std::string step_tuned;
  bool cancelled = false;  // the sessions' should_stop ended the run early
  // The scheduler's time budget ended the search with trials of the budget left.
  bool out_of_time = false;
  // Wall seconds of the search (the fallbacks' measurement included: the time budget counts it)
  // and of the best configs' re-timing after it.
  double search_s = 0, retime_s = 0;
};

// The trials of a model's warm-up: one allocation of `batch_size` per distinct tuned workload
// (another algorithm of a task, e.g. its Winograd form, is a workload of its own). A budget below
// it leaves tasks on their fallback config.
size_t warmup_trials(const frontend::ModelTasks& tasks, size_t batch_size);

// `--trials auto`: kAutoAllocations allocations of `batch_size` per distinct tuned workload, its
// warm-up and three more on average (64 trials each at the default batch of 16).
inline constexpr size_t kAutoAllocations = 4;
size_t auto_trials(const frontend::ModelTasks& tasks, size_t batch_size);

// One thread. The tasks, db and measurer must outlive it.
class ModelTuning {
 public:
  // Throws as validate(SessionOptions) / validate(TaskSchedulerOptions), and
  // Error(kInvalidArgument) when no task of the model can be tuned today.
  ModelTuning(const frontend::ModelTasks& tasks, tuning_db::Database& db, Measurer& measurer,
              tuning_db::TargetKey target, ModelTuningOptions options);
  ~ModelTuning();

  // Runs the scheduler; on_step (may be empty) sees the report after every allocation. Every
  // batch is in the log when its allocation returns; a second run resumes from it. Returns the
  // final report. Throws what the sessions throw.
  ModelTuningReport run(const std::function<void(const ModelTuningReport&)>& on_step = {});

 private:
  class SessionTuner;
  class ChoiceTuner;
  ModelTuningReport report() const;

  const frontend::ModelTasks& tasks_;
  Measurer& measurer_;
  ModelTuningOptions options_;
  std::vector<std::unique_ptr<SessionTuner>> tuners_;
  std::vector<const frontend::ModelTask*> tunable_;
  std::vector<size_t>
      tuner_of_;  // per tunable task: its tuner (tasks tuned as one workload share one)
  std::vector<double> weights_;  // per tuner: the summed counts of its tasks
  // The scheduler's tasks: per tuner of a task that is no alternative, that tuner and the tuners
  // of its alternatives (alternatives share their task's allocations).
  std::vector<std::unique_ptr<ChoiceTuner>> choices_;
  size_t not_tuned_ = 0;
  bool out_of_time_ = false;
  double search_s_ = 0, retime_s_ = 0;
  std::vector<SchedulerStep> steps_;
};

// A task's layers as tables name them: the first, and "+k more" ("-" for none).
std::string layers_label(const std::vector<std::string>& layers);

// Whether report.tasks[i] is what a model build runs for its layers: the fastest of a task and its
// alternatives (the task itself on a tie or when none has a time yet). Its rows alone have a
// share of the model, so the shares add up to the estimate.
bool runs_in_model(const ModelTuningReport& report, size_t i);

// Whether report.tasks[i]'s best is in tuned_s (it runs in the model) and whether its fallback is
// in fallback_s (it is no alternative), each of them noisy: what the summary's speed-up rests on.
bool best_noisy_in_sums(const ModelTuningReport& report, size_t i);
bool fallback_noisy_in_sums(const ModelTuningReport& report, size_t i);
// The tasks with noisy timings behind tuned_s or fallback_s (either of the two above). With any,
// no speed-up over the fallbacks is quoted.
size_t noisy_in_sums(const ModelTuningReport& report);

// Sets tuned_s and fallback_s from the tasks: a task counts with the fastest of it and its
// alternatives (fallback_s: the tasks that are no alternative, with their own fallback).
void sum_latencies(ModelTuningReport& report);

// Sets each task's layers from `tasks` (found by key): what a client does with a report its
// server made from tasks without occurrences. Tasks not in `tasks` keep theirs.
void label_layers(ModelTuningReport& report, const frontend::ModelTasks& tasks);

// The report as JSON: {trials, tuned_s, fallback_s, speedup_over_fallback, not_tuned, cancelled,
// out_of_time,
// tasks: [{key, tuned_as, count, gflop, trials, best_s, fallback_s, runs_in_model, share (null
// unless runs_in_model), layers, alternative_of (when not ""), errors ({kind: failed trials},
// when any)}],
// workloads: [{key, best_s}], step: the last SchedulerStep {task, measured, total, tuned (the
// workload it measured: step_tuned)}}. A latency that is not finite (no config succeeded yet) is
// null.
nlohmann::json to_json(const ModelTuningReport& report);

// The inverse of to_json (steps holds the last step only): what a client of a tuning server
// redraws its table from. Throws Error(kInvalidArgument) for JSON of another shape.
ModelTuningReport model_report_from_json(const nlohmann::json& j);

// A finished run's summary: to_json(report) plus the model's name and "untuned": [{task, count,
// reason}] (tasks no template takes and operators without a template, which are in neither sum).
nlohmann::json model_summary_json(const frontend::ModelTasks& tasks,
                                  const ModelTuningReport& report);

}  // namespace ktune::tuner
