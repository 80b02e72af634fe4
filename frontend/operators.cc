// The operator table: one row per ONNX operator ktune reads.
#include "frontend/operators.h"

#include <map>
#include <utility>

#include "frontend/onnx_graph.h"
#include "frontend/op_params.h"

namespace ktune::frontend {

const std::vector<OperatorInfo>& operator_table() {
  using F = OpFamily;
  static const std::vector<OperatorInfo> table = {
      // Tasks, mapped by their family's file (task_extractor.h); a ConvTranspose becomes a Conv
      // first (conv_transpose_as_conv).
      {"Conv", F::kAnchor, "", "conv"},
      {"Gemm", F::kAnchor, "", "matmul"},
      {"MatMul", F::kAnchor, "", "matmul"},
      {"FusedMatMul", F::kAnchor, "", "matmul", "com.microsoft"},
      {"HeadsMatMul", F::kAnchor, "", "matmul", "ktune"},
      {"MaxPool", F::kAnchor, "", "pool"},
      {"AveragePool", F::kAnchor, "", "pool"},
      {"GlobalAveragePool", F::kAnchor, "", "pool"},
      {"GlobalMaxPool", F::kAnchor, "", "pool"},
      // Views.
      {"Flatten", F::kView, ""},
      {"Reshape", F::kView, ""},
      {"Identity", F::kView, ""},
      {"Dropout", F::kView, ""},
      {"Squeeze", F::kView, ""},
      {"Unsqueeze", F::kView, ""},
      // Folded at build time (graph_simplify.cc).
      {"Constant", F::kConstant, ""},
      // Unary elementwise.
      {"Relu", F::kUnary, "relu"},
      {"Clip", F::kUnary, "clip"},
      {"Sigmoid", F::kUnary, "sigmoid"},
      {"HardSwish", F::kUnary, "hardswish"},
      {"HardSigmoid", F::kUnary, "hardsigmoid"},
      {"LeakyRelu", F::kUnary, "leaky_relu"},
      {"Elu", F::kUnary, "elu"},
      {"Selu", F::kUnary, "selu"},
      {"Tanh", F::kUnary, "tanh"},
      {"Softplus", F::kUnary, "softplus"},
      {"Mish", F::kUnary, "mish"},
      {"Exp", F::kUnary, "exp"},
      {"Log", F::kUnary, "log"},
      {"Abs", F::kUnary, "abs"},
      {"Neg", F::kUnary, "neg"},
      {"Reciprocal", F::kUnary, "reciprocal"},
      {"Gelu", F::kUnary, "gelu_erf"},
      {"Erf", F::kUnary, "erf"},
      {"Sqrt", F::kUnary, "sqrt"},
      // Binary elementwise with broadcasting.
      {"Add", F::kBinary, "add"},
      {"Sub", F::kBinary, "sub"},
      {"Mul", F::kBinary, "mul"},
      {"Div", F::kBinary, "div"},
      {"Pow", F::kBinary, "pow"},
      {"Max", F::kBinary, "max"},
      {"Min", F::kBinary, "min"},
      {"Sum", F::kBinary, "add"},
      {"PRelu", F::kBinary, "prelu"},
      // Data movement.
      {"Concat", F::kData, "concat"},
      {"Split", F::kData, "split"},
      {"Slice", F::kData, "slice"},
      {"Pad", F::kData, "pad"},
      {"Resize", F::kData, "resize"},
      {"Upsample", F::kData, "resize"},
      {"Transpose", F::kData, "transpose"},
      {"DepthToSpace", F::kData, "depth_to_space"},
      {"Gather", F::kData, "gather"},
      // Normalizations.
      {"BatchNormalization", F::kNormalize, "batch_norm"},
      {"Softmax", F::kNormalize, "softmax"},
      {"LogSoftmax", F::kNormalize, "log_softmax"},
      // Reductions.
      {"ReduceSum", F::kReduce, "sum"},
      {"ReduceMean", F::kReduce, "mean"},
      {"ReduceMax", F::kReduce, "max"},
      {"ReduceMin", F::kReduce, "min"},
      // Quantization.
      {"QuantizeLinear", F::kQuantize, "quantize"},
      {"DequantizeLinear", F::kQuantize, "dequantize"},
  };
  return table;
}

const OperatorInfo* operator_info(const std::string& op, const std::string& domain) {
  static const std::map<std::pair<std::string, std::string>, const OperatorInfo*> by_op = [] {
    std::map<std::pair<std::string, std::string>, const OperatorInfo*> m;
    for (const OperatorInfo& info : operator_table()) m[{info.domain, info.op}] = &info;
    return m;
  }();
  auto it = by_op.find({domain, op});
  return it == by_op.end() ? nullptr : it->second;
}

bool in_family(const std::string& op, OpFamily family) {
  const OperatorInfo* info = operator_info(op);
  return info && info->family == family;
}

// Why an operator without a template is listed: most need a kernel ktune cannot make; some need
// none.
std::string reason_without_template(const std::string& op) {
  if (in_family(op, OpFamily::kView)) return "layout only (no kernel)";
  if (in_family(op, OpFamily::kConstant)) return "constant (no kernel)";
  if (in_family(op, OpFamily::kQuantize)) return "no template (per-tensor kernel)";
  // conv_transpose_as_conv rewrote every other one into a Conv.
  if (op == "ConvTranspose")
    return "a transposed conv with dilations, output_shape or auto_pad (no phase conv)";
  return "no template";
}

// The generated kernel a model build computes a node with when no task covers it ("" = none), by
// the operator table.
std::string generated_kernel(const Node& n, const Graph& g) {
  const OperatorInfo* info = operator_info(n.op, n.domain);
  if (!info) return "";
  switch (info->family) {
    case OpFamily::kAnchor:
    case OpFamily::kConstant:
      return "";
    case OpFamily::kView:
      return "view";
    case OpFamily::kUnary:
    case OpFamily::kBinary:
      return "elementwise";
    case OpFamily::kQuantize:
      return n.op == "DequantizeLinear" && g.constants.count(n.inputs.at(0)) ? "folded"
                                                                             : info->kernel;
    default:
      break;
  }
  if (n.op == "Transpose") return transpose_is_view(g, n) ? "view" : info->kernel;
  // The kernels below compute float32: the int64 tensors of a shape subgraph (Gather of a Shape,
  // Concat of dimensions) need folding at build time instead.
  const std::string type = n.outputs.empty() ? "" : g.type(n.outputs[0]);
  if (!type.empty() && type != "float32") return "";
  if (info->family == OpFamily::kReduce) return "reduce";
  // Gather of an activation at constant indices, or of a float32 constant table (an embedding)
  // at indices the model computes or takes as an input.
  if (n.op == "Gather") {
    if (n.inputs.size() != 2) return "";
    const bool table = g.constants.count(n.inputs[0]) > 0, indices = g.constants.count(n.inputs[1]);
    if (!table && indices) return info->kernel;
    return table && !indices && g.type(n.inputs[0]) == "float32" ? info->kernel : "";
  }
  return info->kernel;
}

}  // namespace ktune::frontend
