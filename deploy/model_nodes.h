// Defines GeneratedStep, the generated kernel that one node without a task (or one LayerNorm group)
// becomes in a model build, with the tensors it reads and writes, and the functions that describe
// it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "frontend/layer_norm.h"
#include "frontend/onnx_graph.h"
#include "frontend/scaled_softmax.h"
#include "te/ir.h"

namespace ktune::deploy {

// One input of a generated kernel, in its argument order.
struct StepOperand {
  std::string tensor;     // the ONNX tensor (an activation, in ONNX's layout), or a constant's name
  bool constant = false;  // packed into the weights: `data` in `shape`
  std::vector<int64_t> shape;  // a constant's shape as the kernel takes it
  std::vector<float> data;
};

// A generated kernel of a model build: inputs in argument order, then the output.
struct GeneratedStep {
  std::string layer;  // the nodes, '+'-joined
  std::string what;   // names the kernel's symbol: layer_norm, softmax, ...
  std::vector<StepOperand> inputs;
  std::string output;                                         // the ONNX tensor it defines
  std::function<te::LoweredFunc(const std::string&)> kernel;  // the kernel, given its symbol
  // A gather from a constant table: the rows its integer operand indexes (0 = none).
  int64_t index_rows = 0;
};

using Constants = std::map<std::string, frontend::ConstantValue>;

// The kernel of a LayerNorm group: x, gamma (ones when absent), beta (zeros when absent), out.
// Throws Error(kUnsupported) naming the group's first node when gamma or beta is no float32
// constant, or a shape is unknown.
GeneratedStep describe_layer_norm(const frontend::Graph& g, const frontend::LayerNormGroup& group,
                                  const Constants& constants);

// The softmax kernel of a Softmax or LogSoftmax that scales its scores as it reads them.
GeneratedStep describe_scaled_softmax(const frontend::Graph& g, const frontend::ScaledSoftmax& m);

// The kernels of node `n` when it is one a model build generates beyond the same-shape
// elementwise kernels (ElementwiseOp), in order (one per output of a Split, one step otherwise):
// Add, Sub, Mul, Div, Max, Min, PRelu with a constant or a broadcast operand (a one-element
// constant second operand of Add, Sub, Mul, Div becomes an immediate), Max, Min and Sum of more
// than two operands, Pow by a constant or a tensor, BatchNormalization (per-channel scale and
// shift), Softmax and LogSoftmax over any axis (the opset-13 axis, or the 2-D flattening before),
// ReduceSum, ReduceMean, ReduceMax, ReduceMin over any axes, Transpose, QuantizeLinear and
// DequantizeLinear of an activation with a scale and zero point per tensor or per axis
// (quantize_linear, dequantize_linear), Concat, Split, Slice, Pad (constant, reflect, edge),
// Gather of constant indices or from a constant table (an embedding's token ids), Resize and
// Upsample (nearest, linear) of the two last axes of 4-D data. Empty for any other node. Throws
// Error(kUnsupported) naming the node for a form of these it does not build (shapes that do not
// broadcast, a parameter that is no constant, a non-float constant).
std::vector<GeneratedStep> describe_node(const frontend::Graph& g, const frontend::Node& n,
                                         const Constants& constants);

// `constants` with the float32 value of every DequantizeLinear whose input is a constant (per
// tensor or per axis), computed as ONNX Runtime does: (int32(x) - int32(zero_point)) * scale in
// float32. Throws Error(kUnsupported) naming the node for a scale or zero point that is no
// constant or does not match the axis.
Constants with_folded_dequantize(const frontend::Graph& g, const Constants& constants);

}  // namespace ktune::deploy
