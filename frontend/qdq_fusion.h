// Defines QuantizedConv, a DequantizeLinear -> Conv [-> Relu] -> QuantizeLinear pattern of a QDQ
// model that runs as one int8 conv (conv2d_nchwc_u8s8s32 with its requantize epilogue), and
// find_quantized_convs, which finds them and says why a Conv with dequantized inputs does not fuse.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// The pattern ONNX Runtime's quantizer writes around a Conv (per-tensor uint8 activations,
// per-channel int8 weights), as ONNX Runtime itself runs it (QLinearConv):
//   DQ(x uint8) + DQ(w int8, zero point 0, scale per output channel or one) [+ DQ(bias int32)]
//   -> Conv (group 1) [-> Relu] -> Q (uint8, per tensor).
struct QuantizedConv {
  size_t conv = 0;
  // The DequantizeLinear nodes the int8 kernel absorbs: the weights', the bias', and the data's
  // when the conv is its only reader (another reader keeps it as a generated kernel).
  std::vector<size_t> prologue;
  std::vector<size_t> epilogue;  // [Relu,] QuantizeLinear, in order
  bool relu = false;
  std::string data, data_scale, data_zero_point;        // the uint8 activation; zero point "" = 0
  std::string weight, weight_scale, weight_zero_point;  // int8 constant [K, C, R, S]
  std::string bias;  // int32 constant [K] in the scale data_scale * weight_scale ("" = none)
  std::string out_scale, out_zero_point;  // the QuantizeLinear's
  std::string output;                     // its uint8 output
};

struct QuantizedConvs {
  std::vector<QuantizedConv> convs;
  // A Conv that reads a DequantizeLinear output but does not fuse: why (it runs in float32).
  std::map<size_t, std::string> not_fused;
};

// Finds the QuantizedConv patterns of `g`. A Conv whose data is no DequantizeLinear output is
// neither (a float conv).
QuantizedConvs find_quantized_convs(const Graph& g);

}  // namespace ktune::frontend
