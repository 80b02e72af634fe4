// Declares the generated kernels of a model build: layout conversions between NCHW and the
// channel-blocked NCHWc, copies, elementwise operators (with broadcasting), LayerNorm, Softmax and
// Transpose, each a te compute with a plain parallel schedule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "te/ir.h"

namespace ktune::deploy {

// An elementwise operation of one or two operands of the same shape and layout.
struct ElementwiseOp {
  // relu, clip, sigmoid, hardswish, silu, gelu_erf, erf, sqrt, copy; add, sub, mul, div (two
  // operands); add_scalar, sub_scalar, mul_scalar, div_scalar, pow_scalar (x op value).
  std::string op;
  float min = 0, max = 0;  // clip's bounds
  float value = 0;         // the *_scalar operations' constant
  int operands() const { return op == "add" || op == "sub" || op == "mul" || op == "div" ? 2 : 1; }
};

// True when elementwise() implements `op`.
bool is_elementwise(const std::string& op);

// NCHW [n, c, h, w] -> NCHWc [n, ceil(c/block), h, w, block], the lanes past c zero; elements of
// `dtype`.
te::LoweredFunc to_blocked(const std::string& name, const std::vector<int64_t>& nchw, int64_t block,
                           te::DataType dtype = te::Float(32));
// NCHWc [n, ceil(c/block), h, w, block] -> NCHW [n, c, h, w]; elements of `dtype`.
te::LoweredFunc from_blocked(const std::string& name, const std::vector<int64_t>& nchw,
                             int64_t block, te::DataType dtype = te::Float(32));
// `count` elements of each operand -> `count` elements. Throws Error(kUnsupported) for an
// operation is_elementwise does not know.
te::LoweredFunc elementwise(const std::string& name, const ElementwiseOp& op, int64_t count);

// The scale and zero point of a QuantizeLinear or DequantizeLinear: one each (per tensor), or one
// per channel (ONNX's per-axis form), element i's channel being i / inner % channels.
struct QuantParams {
  std::vector<float> scale;
  std::vector<int64_t> zero_point;  // as many as scale
  int64_t inner = 1;                // elements per step along the axis (the extents after it)
  bool per_axis() const { return scale.size() > 1; }
};

// ONNX QuantizeLinear of `count` float32 elements: out = saturate(round_half_even(x / scale) +
// zero_point) of `type` (uint8 or int8), as ONNX Runtime computes it (a float32 division).
// Arguments x, out; per axis x, scale (float32 [channels]), zero_point (its values as float32
// [channels]), out.
te::LoweredFunc quantize_linear(const std::string& name, int64_t count, const QuantParams& p,
                                te::DataType type);

// QuantizeLinear per tensor of NCHW float32 data [n, c, h, w] straight into NCHWc [n,
// ceil(c/block), h, w, block] of `type` (the padding lanes zero): quantize_linear's arithmetic and
// to_blocked's layout in one pass. Arguments x, out.
te::LoweredFunc quantize_linear_blocked(const std::string& name, const std::vector<int64_t>& nchw,
                                        int64_t block, float scale, int64_t zero_point,
                                        te::DataType type);
// ONNX DequantizeLinear of `count` elements of `type` (uint8 or int8): out = float32(x -
// zero_point) * scale. Arguments as quantize_linear's.
te::LoweredFunc dequantize_linear(const std::string& name, int64_t count, const QuantParams& p,
                                  te::DataType type);

// The residual Add of two uint8 tensors as ONNX Runtime computes QLinearAdd (the float32 form of
// DQ + DQ -> Add -> Q): out = saturate(round_half_even(((a - a_zero) * a_scale + (b - b_zero) *
// b_scale) / out_scale) + out_zero), clamped below at out_zero with relu (a Relu before the
// QuantizeLinear).
struct QuantizedAddOp {
  float a_scale = 1, b_scale = 1, out_scale = 1;
  int32_t a_zero = 0, b_zero = 0, out_zero = 0;
  bool relu = false;
};
// `count` uint8 elements of a and b -> `count` uint8 elements; arguments a, b, out.
te::LoweredFunc quantized_add(const std::string& name, int64_t count, const QuantizedAddOp& op);

// out = a op b with numpy broadcasting (shapes aligned at their last axes, an extent 1 repeats):
// `op` is add, sub, mul or div; arguments a, b, out (shape `out`). Throws Error(kInvalidArgument)
// for shapes that do not broadcast to `out`, Error(kUnsupported) for another op or rank > 6.
te::LoweredFunc broadcast_binary(const std::string& name, const std::string& op,
                                 const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                 const std::vector<int64_t>& out);

// Normalization over the last axis of `shape`: out = (x - mean) / sqrt(var + eps) * gamma + beta,
// with the biased variance (as LayerNormalization and its decomposed form compute it); arguments
// x, gamma[last], beta[last], out.
te::LoweredFunc layer_norm(const std::string& name, const std::vector<int64_t>& shape, float eps);

// Softmax over the last axis of `shape`, max-subtracted (exp never overflows): arguments x, out.
te::LoweredFunc softmax(const std::string& name, const std::vector<int64_t>& shape);

// out[i_0 .. i_r-1] = in[j] with j[perm[k]] = i_k (ONNX Transpose): arguments in (shape `in`),
// out. Throws Error(kInvalidArgument) when perm is not a permutation of the axes,
// Error(kUnsupported) past 6 axes.
te::LoweredFunc transpose(const std::string& name, const std::vector<int64_t>& in,
                          const std::vector<int64_t>& perm);

// The shape a and b broadcast to (numpy rules), or nullopt when they do not.
std::optional<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b);

}  // namespace ktune::deploy
