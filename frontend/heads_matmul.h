// Defines HeadsMatMul (domain "ktune"), the matrix product read_heads_in_place writes: a MatMul
// or FusedMatMul whose operands may be groups of heads read in place from an attention's packed
// projection, and heads_operand, how its mapping reads each operand.
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// HeadsMatMul(A, B) -> [1, H, M, N]; attributes: transB (0: B is [1, H, K, N]; 1: [1, H, N, K]),
// and for each operand X of "a", "b" that is a group of heads: X_heads (the head slots of a row
// of its [1, S, G, H, D] input: G x H), X_head (the group's first slot) and X_shape (the
// [1, H, S, D] it stands for). An operand without them is the tensor it names. c_heads = H: the
// output is written [1, M, H, N], the heads side by side in each row.
inline constexpr const char* kHeadsMatMul = "HeadsMatMul";
inline constexpr const char* kHeadsMatMulDomain = "ktune";

struct HeadsOperand {
  std::vector<int64_t> shape;   // the operand as the product reads it
  int64_t heads = 0, head = 0;  // batch_matmul's X_heads and X_head (0, 0: stored as `shape`)
};

// Operand `input` (0: A, 1: B) of HeadsMatMul `n`; the shape empty when unknown.
HeadsOperand heads_operand(const Graph& g, const Node& n, size_t input);

}  // namespace ktune::frontend
