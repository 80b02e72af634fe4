// Defines QuantizedOp, a Conv, Gemm or MatMul of a quantized model that runs as one int8 kernel
// (conv2d_nchwc_u8s8s32, depthwise_conv2d_nchwc_u8s8s32 or matmul_u8s8s32 with its requantize
// epilogue), QuantizedAdd and QuantizedMaxPool, the uint8 operators around them, and
// find_quantized_ops, which finds them in both forms ONNX Runtime's quantizer writes (QDQ and
// QOperator) and says why an operator with quantized inputs does not run in int8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// The arithmetic ONNX Runtime runs in int8 (QLinearConv, QLinearMatMul, QGemm): per-tensor uint8
// data, int8 or uint8 constant weights with a zero point and a scale per tensor or per output
// channel (weights minus zero point within int8: the model build subtracts it; else shifted into
// int8 with the input sums correction, or for a depthwise conv taken as int16), an
// optional int32 bias in the scale s_data * s_weight, output requantized to uint8 or int8 per
// tensor.
// Two forms describe it:
//   QDQ:       DQ(x uint8) + DQ(w int8) [+ DQ(bias int32)] -> Conv | Gemm | MatMul [-> Relu]
//              -> QuantizeLinear (uint8)
//   QOperator: QLinearConv (with its bias) or QLinearMatMul, the tensors as its inputs.
// Both become this one description; the model build and the task list read only it.
struct QuantizedOp {
  size_t node = 0;         // the anchor: Conv, Gemm, MatMul, QLinearConv or QLinearMatMul
  bool conv = false;       // a convolution (weights [K, C, R, S]); else a matrix product
  bool depthwise = false;  // a conv of one channel per group (group == C == K)
  bool nt = false;         // a matrix product's weights stored as [N, K] (Gemm transB=1)
  // The DequantizeLinear nodes the int8 kernel absorbs (QDQ): the weights', the bias', and the
  // data's when the anchor is its only reader (another reader keeps it as a generated kernel).
  std::vector<size_t> prologue;
  std::vector<size_t> epilogue;  // [Relu,] QuantizeLinear, in order (QDQ)
  bool relu = false;
  std::string data, data_scale, data_zero_point;        // the uint8 activation; zero point "" = 0
  std::string weight, weight_scale, weight_zero_point;  // int8 or uint8 constant; "" = 0
  // Whether some weight minus its zero point is past int8: the kernel then runs on the weights
  // less weight_shift (128 for uint8 weights, 0 for int8) and adds (weight_shift - z_w[k]) times
  // the data's sums less its zero point per output position (a conv's input windows, a matrix
  // product's rows): InputSums of schedule_space/templates/requant.h.
  bool input_sums = false;
  int64_t weight_shift = 0;
  // A depthwise conv whose weights minus their zero point are past int8: its kernel takes w - z_w
  // as int16 (depthwise_conv2d_nchwc_u8s8s32 weights=s16; at most 255 in magnitude), exact, no
  // input sums.
  bool s16_weights = false;
  // int32 constant [channels] in the scale data_scale * weight_scale ("" = none), or with
  // float_bias a float32 constant (a QDQ Conv or Gemm whose bias is no DequantizeLinear output),
  // which the int8 kernel takes rounded to that scale.
  std::string bias;
  bool float_bias = false;
  std::string out_scale, out_zero_point;  // the output's
  std::string output;                     // the uint8 or int8 output
};

// An Add of two uint8 tensors of one shape as ONNX Runtime runs it (QLinearAdd): out = Q(DQ(a) +
// DQ(b)), every scale and zero point per tensor, a Relu before the QuantizeLinear a clamp at the
// output's zero point. Two forms:
//   QDQ:       DQ(a uint8) + DQ(b uint8) -> Add [-> Relu] -> QuantizeLinear (uint8)
//   QOperator: com.microsoft QLinearAdd(a, a_scale, a_zero_point, b, ..., out_zero_point)
struct QuantizedAdd {
  size_t node = 0;               // the Add or QLinearAdd
  std::vector<size_t> prologue;  // the DequantizeLinear nodes that only the Add reads (QDQ)
  std::vector<size_t> epilogue;  // [Relu,] QuantizeLinear, in order (QDQ)
  bool relu = false;
  std::string a, a_scale, a_zero_point;  // zero point "" = 0
  std::string b, b_scale, b_zero_point;
  std::string out_scale, out_zero_point;
  std::string output;  // the uint8 output
};

// DQ(x uint8) -> MaxPool -> QuantizeLinear of the same scale and zero point: a max commutes with
// the monotonic (de)quantization, so the pool runs on the uint8 data (ONNX Runtime drops the pair).
struct QuantizedMaxPool {
  size_t node = 0;  // the MaxPool
  size_t dequantize = 0, quantize = 0;
  std::string data;    // uint8
  std::string output;  // uint8
};

// The spatial mean of dequantized uint8 NCHW data, quantized to uint8, per tensor. Two forms:
//   QDQ:       DQ(x uint8) -> GlobalAveragePool [-> Flatten | Reshape] -> QuantizeLinear (uint8)
//   QOperator: com.microsoft QLinearGlobalAveragePool (channels_last = 0)
// A Flatten or Reshape between the pool and the QuantizeLinear (to [N, C] or [N, C, 1, 1], each
// node the only reader of what precedes it) only renames the pooled values: the output is the
// uint8 pool's, in the view's shape.
struct QuantizedGlobalAveragePool {
  size_t node = 0;               // the GlobalAveragePool or QLinearGlobalAveragePool
  std::vector<size_t> prologue;  // the DequantizeLinear when only the pool reads it (QDQ)
  std::vector<size_t> epilogue;  // [the Flatten or Reshape,] the QuantizeLinear (QDQ)
  std::string data, data_scale, data_zero_point;  // zero point "" = 0
  std::string out_scale, out_zero_point;
  std::string output;  // uint8 [N, C, 1, 1], or [N, C] after a Flatten or Reshape
};

struct QuantizedOps {
  std::vector<QuantizedOp> ops;
  std::vector<QuantizedAdd> adds;
  std::vector<QuantizedMaxPool> max_pools;
  std::vector<QuantizedGlobalAveragePool> global_pools;
  // A Conv, Gemm or MatMul that reads a DequantizeLinear output but does not run in int8: why
  // (it runs in float32).
  std::map<size_t, std::string> not_fused;
  // A QLinearConv, QLinearMatMul, QLinearAdd or QLinearGlobalAveragePool that cannot run in int8
  // (no float path): why.
  std::map<size_t, std::string> refused;
};

// The input channels conv2d_nchwc_u8s8s32 computes a conv of `c` channels with: `c` rounded up to
// its 4-channel groups (the added channels read zero weights).
inline int64_t int8_conv_channels(int64_t c) { return (c + 3) / 4 * 4; }

// Finds the QuantizedOp patterns of `g`. A Conv, Gemm or MatMul whose data is no
// DequantizeLinear output is neither (a float operator).
QuantizedOps find_quantized_ops(const Graph& g);

}  // namespace ktune::frontend
