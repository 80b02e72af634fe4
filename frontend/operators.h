// Defines the operator table: each ONNX operator ktune reads (default domain, and the one
// com.microsoft operator a graph pass writes), its family, and the generated kernel a model build
// computes a node of it with when no task covers it.
#pragma once

#include <string>
#include <vector>

namespace ktune::frontend {

// What an operator is to ktune. `ktune tasks` (model_tasks.cc), the graph passes and a model
// build (deploy's planner) all read it here.
enum class OpFamily {
  kAnchor,     // a task's operator (Conv, Gemm, MatMul, pooling): model_tasks.cc maps it
  kView,       // reinterprets its input's bytes: no kernel
  kConstant,   // Constant: folded at build time
  kUnary,      // maps each element on its own (parameters constant): an elementwise kernel
  kBinary,     // elementwise with numpy broadcasting (Max, Min, Sum: any operand count)
  kData,       // moves elements: concat, split, slice, pad, resize, transpose, gather, ...
  kNormalize,  // per-channel or per-row arithmetic: batch_norm, softmax, log_softmax
  kReduce,     // ReduceSum, ReduceMean, ReduceMax, ReduceMin on any axes
  kQuantize,   // QuantizeLinear, DequantizeLinear
};

struct OperatorInfo {
  std::string op;  // the ONNX operator
  OpFamily family;
  // The generated kernel's operator: the elementwise kernels' ("relu", "leaky_relu", "add"), a
  // reduction's ("sum", "max"), or for the data, normalize and quantize families the kernel's
  // name ("concat", "softmax", "quantize"); "" for anchors, views and constants.
  std::string kernel;
  // An anchor's task family, whose file maps its nodes onto templates: "conv" (tasks_conv.cc),
  // "matmul" (tasks_matmul.cc), "pool" (tasks_pool.cc); "" for the other families.
  std::string tasks = "";
  // The operator's domain: "" (ai.onnx), "com.microsoft" for ONNX Runtime's FusedMatMul, which
  // fold_transpose_into_matmul writes, or "ktune" for HeadsMatMul, which read_heads_in_place
  // writes (read_onnx refuses both in a model file).
  std::string domain = "";
};

// The entry of `op` of `domain` ("" = the default domain), or nullptr for one ktune does not read.
const OperatorInfo* operator_info(const std::string& op, const std::string& domain = "");

// True when `op` is in `family`.
bool in_family(const std::string& op, OpFamily family);

// Every entry, in the table's order (families together).
const std::vector<OperatorInfo>& operator_table();

struct Graph;
struct Node;

// Why `ktune tasks` lists an operator no task covers ("layout only (no kernel)", "no template").
std::string reason_without_template(const std::string& op);

// The generated kernel a model build computes node `n` of `g` with when no task covers it:
// "view", "elementwise", "reduce", "folded" (a constant DequantizeLinear) or the table's kernel;
// "" when none (an anchor, a constant, an operator ktune does not read, an int64 shape tensor, a
// Gather of a constant table).
std::string generated_kernel(const Node& n, const Graph& g);

}  // namespace ktune::frontend
