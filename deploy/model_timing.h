// Defines ModelBuffers (a model's inputs and outputs, each starting on a page), time_model(): a
// built model timed end to end and per layer, as `ktune run` and `ktune tune-model` report it,
// measure_step_threads(): each step's thread count chosen from timings in the model's order, and
// step_threads_summary(): that choice in one line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deploy/model_build.h"

namespace ktune::deploy {

// One aligned buffer per graph input (of its element type: float32, or int64 / int32 indices)
// and float32 output of a plan. Move-only.
class ModelBuffers {
 public:
  // Float inputs uniform in [-1, 1) from `seed`, integer inputs uniform in [0, the rows of the
  // tables they index) (PlanTensor::values_below, else [0, 2)); outputs filled with NaN (a kernel
  // that skips an element shows).
  ModelBuffers(const ModelPlan& plan, uint64_t seed);
  // Replaces the inputs with raw bytes (each input's element type, little-endian), concatenated in
  // graph order. Throws Error(kInvalidArgument) when the size is not the inputs' total.
  void set_inputs(const std::string& bytes);
  // The outputs' bytes, concatenated in graph order.
  std::string output_bytes() const;
  // The inputs' bytes, concatenated in graph order.
  std::string input_bytes() const;
  const std::vector<const void*>& inputs() const { return in_ptrs_; }
  const std::vector<float*>& outputs() const { return out_ptrs_; }
  // Element counts of each output.
  const std::vector<int64_t>& output_counts() const { return out_counts_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::vector<std::unique_ptr<void, Free>> storage_;
  std::vector<const void*> in_ptrs_;
  std::vector<float*> out_ptrs_;
  std::vector<int64_t> in_bytes_, out_counts_;
};

struct ModelTiming {
  int runs = 0;
  double median_s = 0, min_s = 0, max_s = 0;  // end to end (<name>_run), after the warm-up
  // The end-to-end runs' quartiles: a busy machine widens the middle half (one slow run, a
  // preempted one, only moves max_s).
  double q1_s = 0, q3_s = 0;
  // The middle half spreads more than tuning_db::kNoisySpread of the median: not a usable figure.
  bool noisy() const;
  // The end-to-end median and the sum of step_s more than kApartRatio apart either way: the
  // machine changed between the two measurements, or the steps slow each other down end to end;
  // neither figure stands alone.
  bool apart() const;
  static constexpr double kApartRatio = 1.5;
  std::vector<double> step_s;  // per plan step: the median of `runs` one-at-a-time runs
  // Sum of step_s over the steps of kind "task", and over the others (layout, elementwise).
  double task_s() const;
  double other_s() const;
  const ModelPlan* plan = nullptr;
};

// Runs the model `warmup` times, then `runs` times end to end, then once and `runs` times one
// layer at a time. Throws what ModelRunner throws; Error(kInvalidArgument) for runs < 1 or warmup <
// 0.
ModelTiming time_model(ModelRunner& runner, const ModelPlan& plan, const ModelBuffers& buffers,
                       int warmup, int runs);

// How measure_step_threads times a model.
struct StepThreadsOptions {
  int threads = 2;  // the run's thread count (> 1)
  int rounds = 15;  // rounds of the per-step passes, and of the end to end runs
  int runs = 4;     // end to end runs per model and round
  // A step runs on one thread when its median there is below (1 - margin) x its median at
  // `threads`: clearly faster, not a difference within the timings' spread.
  double margin = 0.1;
};

// Chooses how many threads each step of `model` runs on at options.threads threads. In each round
// the model runs one step at a time (time_model's per-step timing) at options.threads threads and
// at one, in turns (which goes first alternates); a step whose median at one thread is clearly
// below its median at options.threads is capped at one. Then the capped model and the uncapped
// one run end to end in turns, options.runs runs each per round; the caps are kept only when the
// capped model's median is not above the uncapped one's (else every max_threads is 0). Returns
// the choice with every step's medians and the two end to end medians (0 when no step was
// capped), keyed by the model's model_key and target. The runtime's thread count is options.threads
// afterwards. Throws Error(kInvalidArgument) for threads < 2, rounds or runs < 1, or a margin
// outside [0, 1), and what ModelRunner and with_step_threads throw.
tuning_db::StepThreadsRow measure_step_threads(const BuiltModel& model, const ModelBuffers& buffers,
                                               const StepThreadsOptions& options);

// What a measure_step_threads choice says, in one line, the same for every command that shows
// one (each says where it was measured): the thread count it was measured at, and either how
// many steps run on one thread with the two end to end medians that kept them, or why every step
// stays on every thread (none clearly faster on one, or the capped model slower end to end).
std::string step_threads_summary(const tuning_db::StepThreadsRow& row);

// A model whose steps' thread counts were measured where it was built, and what was measured.
struct StepThreadsMeasured {
  BuiltModel model;  // with the choice applied (with_step_threads)
  tuning_db::StepThreadsRow choice;
};

// measure_step_threads on inputs of `seed`, in this process, and the model with the choice
// applied: how a model tuned elsewhere (a server's devices) gets its step thread counts on a
// machine of its target at build time. Throws Error(kUnsupported) when the model's target cannot
// run in this process, and what measure_step_threads throws.
StepThreadsMeasured measure_step_threads_here(const BuiltModel& model,
                                              const StepThreadsOptions& options, uint64_t seed);

}  // namespace ktune::deploy
