// Defines ModelBuffers (a model's inputs and outputs, 64-byte aligned) and time_model(): a built
// model timed end to end and per layer, as `ktune run` and `ktune tune-model` report it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deploy/model_build.h"

namespace ktune::deploy {

// One aligned float32 buffer per graph input and output of a plan. Move-only.
class ModelBuffers {
 public:
  // Inputs uniform in [-1, 1) from `seed`; outputs filled with NaN (a kernel that skips an
  // element shows).
  ModelBuffers(const ModelPlan& plan, uint64_t seed);
  // Replaces the inputs with raw float32 bytes, concatenated in graph order. Throws
  // Error(kInvalidArgument) when the size is not the inputs' total.
  void set_inputs(const std::string& bytes);
  // The outputs' bytes, concatenated in graph order.
  std::string output_bytes() const;
  // The inputs' bytes, concatenated in graph order.
  std::string input_bytes() const;
  const std::vector<const float*>& inputs() const { return in_ptrs_; }
  const std::vector<float*>& outputs() const { return out_ptrs_; }
  // Element counts of each output.
  const std::vector<int64_t>& output_counts() const { return out_counts_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::vector<std::unique_ptr<float, Free>> storage_;
  std::vector<const float*> in_ptrs_;
  std::vector<float*> out_ptrs_;
  std::vector<int64_t> in_counts_, out_counts_;
};

struct ModelTiming {
  int runs = 0;
  double median_s = 0, min_s = 0, max_s = 0;  // end to end (<name>_run), after the warm-up
  std::vector<double> step_s;  // per plan step: the median of `runs` one-at-a-time runs
  // Sum of step_s over the steps of kind "task", and over the others (layout, elementwise).
  double task_s() const;
  double other_s() const;
  const ModelPlan* plan = nullptr;
};

// Runs the model `warmup` times, then `runs` times end to end, then `runs` times one layer at a
// time. Throws what ModelRunner throws; Error(kInvalidArgument) for runs < 1 or warmup < 0.
ModelTiming time_model(ModelRunner& runner, const ModelPlan& plan, const ModelBuffers& buffers,
                       int warmup, int runs);

}  // namespace ktune::deploy
