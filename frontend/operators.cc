// The operator table: one row per ONNX operator ktune reads.
#include "frontend/operators.h"

#include <map>

namespace ktune::frontend {

const std::vector<OperatorInfo>& operator_table() {
  using F = OpFamily;
  static const std::vector<OperatorInfo> table = {
      // Tasks (model_tasks.cc); a ConvTranspose becomes a Conv first (conv_transpose_as_conv).
      {"Conv", F::kAnchor, ""},
      {"Gemm", F::kAnchor, ""},
      {"MatMul", F::kAnchor, ""},
      {"MaxPool", F::kAnchor, ""},
      {"AveragePool", F::kAnchor, ""},
      {"GlobalAveragePool", F::kAnchor, ""},
      {"GlobalMaxPool", F::kAnchor, ""},
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

const OperatorInfo* operator_info(const std::string& op) {
  static const std::map<std::string, const OperatorInfo*> by_op = [] {
    std::map<std::string, const OperatorInfo*> m;
    for (const OperatorInfo& info : operator_table()) m[info.op] = &info;
    return m;
  }();
  auto it = by_op.find(op);
  return it == by_op.end() ? nullptr : it->second;
}

bool in_family(const std::string& op, OpFamily family) {
  const OperatorInfo* info = operator_info(op);
  return info && info->family == family;
}

}  // namespace ktune::frontend
