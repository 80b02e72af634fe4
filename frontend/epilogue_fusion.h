// Defines EpilogueFuser, which follows a conv's or matmul's output through the elementwise nodes a
// template epilogue computes (BN, bias, residual Add, one activation) and marks them fused.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// What follows an anchor node in one fused kernel.
struct FusedEpilogue {
  // "" or the steps joined by '_', as schedule_space's epilogue argument names them: bias, add or
  // max (a residual), then relu, relu6, clip, hardswish, silu, gelu_erf, sigmoid, leaky_relu or
  // hardsigmoid.
  std::string steps;
  // The activation's parameters that differ from ONNX's defaults: clip_min / clip_max (finite
  // bounds only), leaky_alpha, hardsigmoid_alpha, hardsigmoid_beta.
  std::map<std::string, std::string> args;
  std::vector<size_t> nodes;  // the fused nodes, in the order they follow the anchor
  // The residual's nearest upsampling factor (1: none). Above 1 the residual Add reads a Resize
  // that `nodes` lists just before the Add; the kernel reads that Resize's input in its place
  // (conv2d_nchwc's residual_upsample).
  int64_t residual_upsample = 1;
};

// The kind of anchor, which says where a per-channel bias lies in its output.
enum class AnchorKind {
  kConv,  // output [N, K, H, W]: the channel axis is 1
  kGemm,  // output [..., N]: the last axis
};

// Marks nodes fused into anchors; a fused node is never offered to a later anchor. Borrows the
// graph, which must outlive it. Not thread-safe.
class EpilogueFuser {
 public:
  explicit EpilogueFuser(const Graph& graph);

  // Follows node `anchor`'s output: an inference-mode BatchNormalization (its shift becomes the
  // bias, its scale folds into the weights), an Add of a per-channel constant (a bias, when the
  // anchor has none yet), an Add or Max of an independent tensor shaped like the output (the
  // residual, added or the larger kept), then one activation: Relu, Clip (bounds constant:
  // initializers or Constant nodes from opset 11, attributes before; [0, 6] is relu6), HardSwish,
  // Sigmoid, LeakyRelu, HardSigmoid,
  // x * HardSigmoid(x) with ONNX's HardSwish constants, x * Sigmoid(x) (silu), 0.5 x (1 + Erf(x /
  // sqrt(2))) in the five nodes exporters write (gelu_erf), 0.5 x (1 + tanh(sqrt(2 / pi) (x +
  // 0.044715 x^3))) in the nine or ten they write (gelu). Each matched node must be the only
  // reader of the tensor before it (x and Sigmoid(x) both read x in silu). With
  // `upsampled_residual` (the anchor's template reads a residual upsampled), an added residual
  // that a nearest Resize by an integer factor computes for this Add alone takes that Resize too
  // (an FPN's top-down map added to its lateral conv). Marks the matched nodes fused.
  FusedEpilogue fuse(size_t anchor, bool has_bias, AnchorKind kind, bool upsampled_residual);

  bool fused(size_t node) const { return fused_[node]; }
  // Keeps `node` out of every epilogue (it belongs to another group, e.g. a LayerNorm); fused()
  // then answers true for it.
  void exclude(size_t node) { fused_[node] = true; }

 private:
  struct Activation {
    std::string step;
    std::map<std::string, std::string> args;
    std::vector<size_t> nodes;
  };

  std::optional<size_t> single_consumer(const std::string& tensor) const;
  // The unfused readers of `tensor` when it is no graph output (nullopt when it is one).
  std::optional<std::vector<size_t>> consumers(const std::string& tensor) const;
  // True when `tensor` is computed from node `anchor`'s output (transitively).
  bool depends_on(const std::string& tensor, size_t anchor) const;
  bool constant(const std::string& tensor) const { return g_.constants.count(tensor) > 0; }
  // True when `tensor` is a constant that broadcasts along `axis` of `out` only, with out's
  // extent there (a per-channel bias).
  bool per_channel(const std::string& tensor, const std::vector<int64_t>& out, size_t axis) const;
  std::optional<Activation> activation(const std::string& tensor) const;
  // The factor f of a nearest Resize (or Upsample) computing `tensor` for node `join` alone: both
  // spatial axes f times longer, output index y reading input index y / f; else nullopt.
  std::optional<int64_t> nearest_upsample(const std::string& tensor, size_t join) const;
  std::optional<Activation> clip(size_t node) const;
  // x * f(x) where f is the node reading `tensor` besides the Mul (silu, hardswish).
  std::optional<Activation> gated(const std::string& tensor) const;
  // GELU in the Erf form exporters write: x / sqrt(2) -> Erf -> + 1, times x, times 0.5.
  std::optional<Activation> gelu_erf(const std::string& tensor) const;
  // GELU in its tanh form (torch's approximate="tanh", GPT-2's gelu_new, ONNX's Gelu of opset 20
  // as opset_adapter rewrites it): x^3 (Pow(x, 3) or x * x * x) -> * 0.044715 -> + x ->
  // * sqrt(2 / pi) -> Tanh -> + 1, times x, times 0.5.
  std::optional<Activation> gelu_tanh(const std::string& tensor) const;
  // The end both GELU forms share: `one_plus` (1 + erf or 1 + tanh) times x times 0.5, in either
  // order, by node `m` (a Mul reading x); the two nodes, or nullopt.
  std::optional<std::vector<size_t>> times_half_x(const std::string& tensor, size_t m,
                                                  size_t plus) const;
  // HardSwish as paddle2onnx writes it: x + 3 -> Clip(0, 6), times x, / 6 (or * 1/6).
  std::optional<Activation> hardswish_arithmetic(const std::string& tensor) const;
  // The value of a one-element constant.
  std::optional<double> scalar(const std::string& tensor) const;
  // True when `tensor` is a one-element constant within 1e-6 (relative) of `want`.
  bool is(const std::optional<std::string>& tensor, double want) const;
  // The node reading node `n`'s output when it is the only reader and `op` of the default domain.
  std::optional<size_t> sole_reader(size_t n, const char* op) const;
  // The operand of binary node `n` other than `x`, when `x` is one of its two.
  std::optional<std::string> other_operand(size_t n, const std::string& x) const;

  const Graph& g_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::map<std::string, size_t> producer_;
  std::set<std::string> graph_outputs_;
  std::vector<bool> fused_;
};

}  // namespace ktune::frontend
