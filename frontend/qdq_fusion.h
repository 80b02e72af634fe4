// Defines QuantizedOp, a Conv, Gemm or MatMul of a quantized model that runs as one int8 kernel
// (conv2d_nchwc_u8s8s32 or matmul_u8s8s32 with its requantize epilogue), and find_quantized_ops,
// which finds them in both forms ONNX Runtime's quantizer writes (QDQ and QOperator) and says why
// an operator with quantized inputs does not run in int8.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// The arithmetic ONNX Runtime runs in int8 (QLinearConv, QLinearMatMul, QGemm): per-tensor uint8
// data, int8 constant weights with zero point 0 and one scale or one per output channel, an
// optional int32 bias in the scale s_data * s_weight, output requantized to uint8 per tensor.
// Two forms describe it:
//   QDQ:       DQ(x uint8) + DQ(w int8) [+ DQ(bias int32)] -> Conv | Gemm | MatMul [-> Relu]
//              -> QuantizeLinear (uint8)
//   QOperator: QLinearConv (with its bias) or QLinearMatMul, the tensors as its inputs.
// Both become this one description; the model build and the task list read only it.
struct QuantizedOp {
  size_t node = 0;    // the anchor: Conv, Gemm, MatMul, QLinearConv or QLinearMatMul
  bool conv = false;  // a convolution (weights [K, C, R, S]); else a matrix product
  bool nt = false;    // a matrix product's weights stored as [N, K] (Gemm transB=1)
  // The DequantizeLinear nodes the int8 kernel absorbs (QDQ): the weights', the bias', and the
  // data's when the anchor is its only reader (another reader keeps it as a generated kernel).
  std::vector<size_t> prologue;
  std::vector<size_t> epilogue;  // [Relu,] QuantizeLinear, in order (QDQ)
  bool relu = false;
  std::string data, data_scale, data_zero_point;        // the uint8 activation; zero point "" = 0
  std::string weight, weight_scale, weight_zero_point;  // int8 constant
  std::string bias;  // int32 constant [channels] in the scale data_scale * weight_scale ("" = none)
  std::string out_scale, out_zero_point;  // the output's
  std::string output;                     // the uint8 output
};

struct QuantizedOps {
  std::vector<QuantizedOp> ops;
  // A Conv, Gemm or MatMul that reads a DequantizeLinear output but does not run in int8: why
  // (it runs in float32).
  std::map<size_t, std::string> not_fused;
  // A QLinearConv or QLinearMatMul that cannot run in int8 (no float path): why.
  std::map<size_t, std::string> refused;
};

// Finds the QuantizedOp patterns of `g`. A Conv, Gemm or MatMul whose data is no
// DequantizeLinear output is neither (a float operator).
QuantizedOps find_quantized_ops(const Graph& g);

}  // namespace ktune::frontend
