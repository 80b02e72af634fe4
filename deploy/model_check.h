// Defines check_model_steps(): a built model run one step at a time, each step's output compared
// with te's reference of that step on the very inputs the step read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deploy/model_build.h"

namespace ktune::deploy {

// One step's output against its reference.
struct StepCheck {
  size_t step = 0;
  std::string layer;  // the ONNX nodes it runs, '+'-joined (PlanStep::layer)
  std::string kind;   // PlanStep::kind
  std::string
      reference;  // what it was compared with: "task reference", "pool reference", "interpreter"
  int64_t elements = 0;  // elements of its output compared
  // max |output - reference| / max |reference| over the elements where both are numbers (the
  // absolute difference when the reference is all zeros); infinite where exactly one of the two is
  // NaN.
  double max_error = 0;
  // float32 outputs: elements still NaN (the output is NaN-filled before the step runs). An
  // integer output is filled with 0xA5 bytes instead: an element left unwritten shows in max_error.
  int64_t nan_left = 0;
  bool passed(double tolerance) const { return nan_left == 0 && max_error <= tolerance; }
};

struct CheckOptions {
  // Called after step `step`'s kernel ran, before its output is compared, with the buffers it read
  // and wrote (ModelRunner::step_buffers order, the output last). Tests corrupt an output here to
  // prove that the check reports that step; unset otherwise.
  std::function<void(size_t step, const std::vector<void*>& args)> after_step;
};

// Runs `model` once on `inputs`, one step at a time (ModelRunner::run_step; the graph outputs land
// in `outputs` as with run()), and compares every step's output with a reference computed on a
// copy of the buffers it read, taken before it ran (the arena reuses them later):
//   task  the task's compute under its plain schedule (Task::reference, the oracle that tuning
//         checks every candidate against), fused epilogues included, run by te's interpreter;
//   pool  the pool task's reference in NCHW on the input converted from NCHWc, converted back;
//   other generated kernels (layout conversions, elementwise, LayerNorm, Softmax, Transpose, ...)
//         their loop IR run by te's interpreter (these have a plain schedule: the interpreter
//         checks the compiled code and the buffers it was given).
// `runner` must be a ModelRunner of `model`. Returns one StepCheck per plan step, in order. Throws
// what ModelRunner throws, and Error(kInternal) when a reference's arguments do not match the
// step's kernel.
std::vector<StepCheck> check_model_steps(ModelRunner& runner, const BuiltModel& model,
                                         const std::vector<const void*>& inputs,
                                         const std::vector<float*>& outputs,
                                         const CheckOptions& options = {});

}  // namespace ktune::deploy
