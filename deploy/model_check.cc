// check_model_steps(): each step of a built model against te's reference on the buffers it read.
#include "deploy/model_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "deploy/model_ops.h"
#include "support/error.h"
#include "te/host_buffer.h"
#include "te/interpreter.h"
#include "te/lower.h"

namespace ktune::deploy {
namespace {

// The byte an integer output is filled with before its kernel runs (a float32 one is NaN-filled).
constexpr unsigned char kIntegerFill = 0xA5;

// Fills `count` elements of `dtype` at `p` so that an element a kernel does not write shows: NaN
// for float32; kIntegerFill bytes for integers (an unwritten element shows unless its reference
// value happens to be that pattern).
void poison(void* p, te::DataType dtype, int64_t count) {
  if (dtype == te::Float(32))
    std::fill(static_cast<float*>(p), static_cast<float*>(p) + count,
              std::numeric_limits<float>::quiet_NaN());
  else
    std::memset(p, kIntegerFill, static_cast<size_t>(count * dtype.bytes()));
}

// A poisoned buffer of `shape` (float32 unless said).
te::HostBuffer nan_buffer(const std::vector<int64_t>& shape, te::DataType dtype = te::Float(32)) {
  te::HostBuffer b(shape, dtype);
  poison(b.data(), dtype, b.num_elements());
  return b;
}

// Element i of a buffer of `dtype` (float32, uint8, int8, int32) as a double.
double element(const void* p, te::DataType dtype, int64_t i) {
  if (dtype == te::Float(32)) return static_cast<const float*>(p)[i];
  if (dtype == te::UInt(8)) return static_cast<const uint8_t*>(p)[i];
  if (dtype == te::Int(8)) return static_cast<const int8_t*>(p)[i];
  if (dtype == te::Int(32)) return static_cast<const int32_t*>(p)[i];
  throw Error(ErrorKind::kInternal, "no step check of " + dtype.str() + " outputs");
}

// The reference of one step on copies of its inputs: fills `out` (NaN-filled, the shape of the
// step's output) and names what it ran.
class StepReference {
 public:
  StepReference(const ModelPlan& plan, const PlanStep& step) : plan_(plan), step_(step) {}

  std::string run(std::vector<te::HostBuffer>& inputs, te::HostBuffer& out) const {
    if (step_.kind == "task" && step_.task) {
      interpret_checked(task_reference(), inputs, out);
      return "task reference";
    }
    if (step_.kind == "pool" && step_.task) {
      pool(inputs, out);
      return "pool reference";
    }
    interpret_checked(step_.func, inputs, out);
    return "interpreter";
  }

 private:
  te::LoweredFunc task_reference() const {
    const schedule_space::Instantiated inst = step_.task->reference();
    return te::lower(inst.schedule, inst.args, step_.symbol + "_reference");
  }

  // The kernel's NCHWc input converted to NCHW, the pool task's reference, its output converted
  // back to NCHWc: the blocked pool checked against a compute written independently of it.
  void pool(std::vector<te::HostBuffer>& inputs, te::HostBuffer& out) const {
    const PlanTensor& in_t = plan_.tensors[static_cast<size_t>(step_.args.front())];
    const PlanTensor& out_t = plan_.tensors[static_cast<size_t>(step_.args.back())];
    std::vector<te::HostBuffer> nchw_in(1);
    nchw_in[0] = nan_buffer(in_t.shape);
    interpret_checked(from_blocked(step_.symbol + "_in", in_t.shape, in_t.block), inputs,
                      nchw_in[0]);
    std::vector<te::HostBuffer> nchw_out(1);
    nchw_out[0] = nan_buffer(out_t.shape);
    interpret_checked(task_reference(), nchw_in, nchw_out[0]);
    interpret_checked(to_blocked(step_.symbol + "_out", out_t.shape, out_t.block), nchw_out, out);
  }

  // Runs `f` on `inputs` then `out`, after checking that they are its arguments' shapes: a
  // reference that takes other arguments than the step's kernel is a planner bug, not a result.
  void interpret_checked(const te::LoweredFunc& f, std::vector<te::HostBuffer>& inputs,
                         te::HostBuffer& out) const {
    std::vector<te::HostBuffer*> args;
    for (te::HostBuffer& b : inputs) args.push_back(&b);
    args.push_back(&out);
    bool same = f.args.size() == args.size();
    for (size_t k = 0; same && k < args.size(); ++k)
      same = f.args[k].shape == args[k]->shape() && f.args[k].dtype == args[k]->dtype();
    if (!same)
      throw Error(ErrorKind::kInternal, step_.symbol + ": the reference " + f.name +
                                            " takes other arguments than the step's kernel");
    te::interpret(f, args);
  }

  const ModelPlan& plan_;
  const PlanStep& step_;
};

// The step's output against the reference's (StepCheck's definitions).
void compare(const void* out, const te::HostBuffer& ref, StepCheck& c) {
  const te::DataType dt = ref.dtype();
  c.elements = ref.num_elements();
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < c.elements; ++i) {
    const double o = element(out, dt, i), r = element(ref.data(), dt, i);
    if (std::isnan(o) || std::isnan(r)) {
      if (std::isnan(o) && !std::isnan(r)) ++c.nan_left;
      if (std::isnan(o) != std::isnan(r)) max_diff = std::numeric_limits<double>::infinity();
      continue;
    }
    max_ref = std::max(max_ref, std::abs(r));
    if (o != r) max_diff = std::max(max_diff, std::abs(o - r));
  }
  c.max_error = max_ref > 0 ? max_diff / max_ref : max_diff;
}

}  // namespace

std::vector<StepCheck> check_model_steps(ModelRunner& runner, const BuiltModel& model,
                                         const std::vector<const void*>& inputs,
                                         const std::vector<float*>& outputs,
                                         const CheckOptions& options) {
  const ModelPlan& plan = model.plan;
  if (inputs.size() != plan.inputs.size() || outputs.size() != plan.outputs.size())
    throw Error(ErrorKind::kInvalidArgument,
                "the model takes " + std::to_string(plan.inputs.size()) + " inputs and " +
                    std::to_string(plan.outputs.size()) + " outputs");
  std::vector<StepCheck> checks;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    const std::vector<void*> args = runner.step_buffers(i, inputs, outputs);
    const std::vector<te::BufferArg>& sig = step.func.args;
    if (sig.size() != args.size())
      throw Error(ErrorKind::kInternal,
                  step.symbol + ": its kernel's signature does not match the plan's arguments");
    // Copies of what it reads, before it runs: a step writing over its own input shows.
    std::vector<te::HostBuffer> read;
    for (size_t k = 0; k + 1 < args.size(); ++k) {
      read.emplace_back(sig[k].shape, sig[k].dtype);
      std::memcpy(read.back().data(), args[k], read.back().bytes());
    }
    void* out = args.back();
    poison(out, sig.back().dtype, sig.back().num_elements());
    runner.run_step(i, args);
    if (options.after_step) options.after_step(i, args);

    te::HostBuffer ref = nan_buffer(sig.back().shape, sig.back().dtype);
    StepCheck c;
    c.step = i;
    c.layer = step.layer;
    c.kind = step.kind;
    c.reference = StepReference(plan, step).run(read, ref);
    compare(out, ref, c);
    checks.push_back(std::move(c));
  }
  return checks;
}

}  // namespace ktune::deploy
