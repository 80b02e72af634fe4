// Defines Epilogue, the elementwise steps a template fuses after its reduction (bias, a residual
// added or maxed, one activation), with its workload arguments and input tensors.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "schedule_space/workload.h"
#include "te/tensor.h"

namespace ktune::schedule_space::templates {

// The activation that ends an epilogue.
enum class Activation {
  kNone,
  kRelu,         // max(x, 0)
  kRelu6,        // min(max(x, 0), 6)
  kClip,         // min(max(x, clip_min), clip_max)
  kHardSwish,    // x * relu6(x + 3) / 6
  kSilu,         // x * sigmoid(x)
  kGelu,         // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kGeluErf,      // 0.5 x (1 + erf(x / sqrt(2)))
  kSigmoid,      // 1 / (1 + exp(-x))
  kLeakyRelu,    // x >= 0 ? x : leaky_alpha x
  kHardSigmoid,  // min(max(hardsigmoid_alpha x + hardsigmoid_beta, 0), 1)
};

// An epilogue: v = reduction; v += bias (per output channel); v += residual, or v = max(v,
// residual) (a tensor shaped like the output: a residual connection, or ONNX's Max of two
// branches); v = activation(v). Its name lists the steps joined by '_' in that order ("none" when
// there is none): bias, add or max (the residual), then relu, relu6, clip, hardswish, silu, gelu,
// gelu_erf, sigmoid, leaky_relu or hardsigmoid, e.g. "bias_add_relu". Value type.
struct Epilogue {
  bool bias = false;
  bool residual = false;
  bool residual_max = false;  // with residual: the larger of v and it, not their sum
  Activation activation = Activation::kNone;
  // kClip's bounds; an infinite bound is no bound (ONNX Clip's missing min or max).
  double clip_min = -std::numeric_limits<double>::infinity();
  double clip_max = std::numeric_limits<double>::infinity();
  // kLeakyRelu's slope and kHardSigmoid's line, at ONNX's defaults.
  double leaky_alpha = 0.01;
  double hardsigmoid_alpha = 0.2;
  double hardsigmoid_beta = 0.5;

  bool empty() const { return !bias && !residual && activation == Activation::kNone; }
  // "none" or the steps joined by '_'.
  std::string name() const;
  // Floating-point operations per output element (a transcendental call counted as one).
  double flop() const;
  // `v` after the steps; `bias` and `residual` are the values at v's element (ignored when the
  // epilogue has no such step). Constants take type `dt`.
  te::Expr apply(te::Expr v, const te::Expr& bias, const te::Expr& residual, te::DataType dt) const;
};

// erf(x) in type `dt` by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7, below float32's rounding of
// erf near 1), from exp, abs and select: what gelu_erf computes.
te::Expr erf_expr(const te::Expr& x, te::DataType dt);

// Parses an epilogue name (see Epilogue); the activation's parameters keep their defaults. Throws
// Error(kInvalidArgument) for a name that is not steps in that order.
Epilogue parse_epilogue(const std::string& name);

// The epilogue `steps` names with its activation's parameters from `args` (clip_min, clip_max,
// leaky_alpha, hardsigmoid_alpha, hardsigmoid_beta; an absent one keeps its default, another
// activation's are ignored). Throws Error(kInvalidArgument) for a value that is not a number.
Epilogue epilogue_of(const std::string& steps, const std::map<std::string, std::string>& args);

// The parameters of `e`'s activation that differ from their defaults, as epilogue_args name them
// and resolve_epilogue writes them (the shortest text that reads back as the same double).
std::map<std::string, std::string> activation_args(const Epilogue& e);

// What a template's epilogue argument accepts.
struct EpilogueOffer {
  bool none = true;  // "none" is accepted (else every epilogue starts with bias)
  std::string default_value = "none";
  std::string bias_doc = {};      // where the bias lies, e.g. "bias[N]"
  std::string residual_doc = {};  // where the residual lies, e.g. "residual like C"
};

// Every epilogue name an offer accepts: none (when offered), then each combination of bias,
// add or max and an activation.
std::vector<std::string> epilogue_choices(const EpilogueOffer& offer);

// The arguments a template with an epilogue declares, in this order: epilogue, clip_min,
// clip_max, leaky_alpha, hardsigmoid_alpha, hardsigmoid_beta. All are left out of the workload
// key at their default (so keys of workloads without them, logged before they existed, stay the
// same). The parameters are numbers that only an epilogue ending in their activation may set
// (clip_min / clip_max "-inf" and "inf" by default: no bound).
std::vector<ArgSpec> epilogue_args(const EpilogueOffer& offer);

// The names of those parameters (every argument epilogue_args declares but "epilogue").
const std::vector<std::string>& activation_arg_names();

// The epilogue of a workload with epilogue_args, its activation's parameters included.
Epilogue epilogue_of(const WorkloadArgs& a);

// A template's resolve hook part: rewrites the activation parameters in their shortest
// round-trip form ("6.0" -> "6"), so one value has one key. Throws Error(kInvalidArgument) naming
// the argument when a value is not a number.
void resolve_epilogue(WorkloadArgs& a);

// A template's check hook part: throws Error(kInvalidArgument) when a parameter is set without
// its activation, or clip_min > clip_max, or a value is NaN.
void check_epilogue(const std::string& template_name, const WorkloadArgs& a);

// The input tensors of an epilogue: bias (placeholder "bias" of `bias_shape`) and residual
// (placeholder "residual" of `residual_shape`: the output's, or smaller when the template reads it
// upsampled), each undefined when the epilogue has no such step.
struct EpilogueInputs {
  te::Tensor bias, residual;
  // Appends the defined ones to `args` in kernel-argument order (bias, residual).
  void append_to(std::vector<te::Tensor>& args) const;
};
EpilogueInputs epilogue_inputs(const Epilogue& e, const std::vector<int64_t>& bias_shape,
                               const std::vector<int64_t>& residual_shape, te::DataType dt);

}  // namespace ktune::schedule_space::templates
