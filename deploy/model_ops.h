// Declares the generated kernels of a model build: layout conversions between NCHW and the
// channel-blocked NCHWc, copies, elementwise operators (with broadcasting), a per-channel affine
// (BatchNormalization), LayerNorm, Softmax and LogSoftmax, reductions, Transpose, and the data
// movement of Concat, Slice, Gather, Pad and Resize, each a te compute with a plain parallel
// schedule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/op_params.h"
#include "te/ir.h"

namespace ktune::deploy {

// An elementwise operation of one or two operands of the same shape and layout.
struct ElementwiseOp {
  // relu, clip, sigmoid, hardswish, silu, gelu_erf, gelu_tanh, erf, sqrt, copy; the ONNX
  // activations hardsigmoid (min(max(alpha x + beta, 0), 1)), leaky_relu (alpha), elu (alpha),
  // selu (alpha, and gamma in beta), tanh, softplus, mish, exp, log, abs, neg, reciprocal; add,
  // sub, mul, div, max, min (two operands); add_scalar, sub_scalar, mul_scalar, div_scalar,
  // pow_scalar (x op value).
  std::string op;
  float min = 0, max = 0;     // clip's bounds
  float value = 0;            // the *_scalar operations' constant
  float alpha = 0, beta = 0;  // the activations' attributes (ONNX's names; selu's gamma in beta)
  int operands() const {
    return op == "add" || op == "sub" || op == "mul" || op == "div" || op == "max" || op == "min"
               ? 2
               : 1;
  }
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
// `op` is add, sub, mul, div, max, min, pow, or prelu (a < 0 ? a * b : a, b the slope); arguments
// a, b, out (shape `out`). Throws Error(kInvalidArgument) for shapes that do not broadcast to
// `out`, Error(kUnsupported) for another op or rank > 6.
te::LoweredFunc broadcast_binary(const std::string& name, const std::string& op,
                                 const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                 const std::vector<int64_t>& out);
// The same over two or more operands, folded from the left ((a op b) op c ...): ONNX's variadic
// Max, Min and Sum. Arguments the operands in order, then out.
te::LoweredFunc broadcast_nary(const std::string& name, const std::string& op,
                               const std::vector<std::vector<int64_t>>& operands,
                               const std::vector<int64_t>& out);

// out = x * scale[c] + shift[c], c the index along axis 1 of `shape` (rank >= 2): a
// BatchNormalization in inference form with scale = gamma / sqrt(var + eps) and shift = beta -
// mean * scale folded at build time. Arguments x, scale[C], shift[C], out.
te::LoweredFunc channel_affine(const std::string& name, const std::vector<int64_t>& shape);

// Normalization over the last axis of `shape`: out = (x - mean) / sqrt(var + eps) * gamma + beta,
// with the biased variance (as LayerNormalization and its decomposed form compute it); arguments
// x, gamma[last], beta[last], out.
te::LoweredFunc layer_norm(const std::string& name, const std::vector<int64_t>& shape, float eps);

// Softmax of x * scale over axis `axis` of `shape` (negative counts from the end), max-subtracted
// (exp never overflows); with `log`, LogSoftmax: y - max - log(sum of exp(y - max)), y = x *
// scale. Arguments x, out.
te::LoweredFunc softmax(const std::string& name, const std::vector<int64_t>& shape,
                        int64_t axis = -1, bool log = false, float scale = 1);

// ONNX ReduceSum, ReduceMean, ReduceMax, ReduceMin ("sum", "mean", "max", "min") of `shape` over
// `axes` (each in [0, rank), any order); the output holds the kept axes in order (keepdims only
// adds extents of 1). Arguments x, out. Throws Error(kInvalidArgument) for a bad axis,
// Error(kUnsupported) for another op.
te::LoweredFunc reduce(const std::string& name, const std::string& op,
                       const std::vector<int64_t>& shape, const std::vector<int64_t>& axes);

// out[i_0 .. i_r-1] = in[j] with j[perm[k]] = i_k (ONNX Transpose): arguments in (shape `in`),
// out. Throws Error(kInvalidArgument) when perm is not a permutation of the axes,
// Error(kUnsupported) past 6 axes.
te::LoweredFunc transpose(const std::string& name, const std::vector<int64_t>& in,
                          const std::vector<int64_t>& perm);

// Concatenation along `axis` of operands of shapes `inputs` (equal but along `axis`): arguments the
// operands in order, then out.
te::LoweredFunc concat(const std::string& name, const std::vector<std::vector<int64_t>>& inputs,
                       int64_t axis);

// out[i] = in[start + i * step] per axis (ONNX Slice with its starts, ends and steps resolved; a
// Split's part): `out` the output's extents. Arguments in, out. Throws Error(kInvalidArgument)
// when a read would leave `in`.
te::LoweredFunc strided_slice(const std::string& name, const std::vector<int64_t>& in,
                              const std::vector<int64_t>& start, const std::vector<int64_t>& step,
                              const std::vector<int64_t>& out);

// ONNX Gather of constant `indices` (each in [0, in[axis])) along `axis`: the output has in's
// extents with in[axis] replaced by indices.size() (a scalar index: by 1, the same elements as
// the output without that axis). Arguments in, out.
te::LoweredFunc gather(const std::string& name, const std::vector<int64_t>& in, int64_t axis,
                       const std::vector<int64_t>& indices);

// ONNX Gather of a float32 `table` along `axis` at indices read from a tensor of `index_type`
// (int64 or int32) and extents `indices` (an embedding: token ids into a constant table). The
// output's extents: table's before axis, then indices' (a scalar index: none, stored as one), then
// table's after. A negative index counts from the end; one outside [-table[axis], table[axis])
// reads the nearest row (ONNX Runtime refuses such a run; a kernel has no error per element).
// Arguments table, indices, out.
te::LoweredFunc gather_rows(const std::string& name, const std::vector<int64_t>& table,
                            int64_t axis, const std::vector<int64_t>& indices,
                            te::DataType index_type);

// ONNX Pad: the output has in[d] + begin[d] + end[d] along each axis (negative pads crop);
// "constant" fills with `value`, "reflect" mirrors around the edge element (excluded), "edge"
// repeats it. Arguments in, out.
te::LoweredFunc pad(const std::string& name, const std::vector<int64_t>& in,
                    const std::vector<int64_t>& begin, const std::vector<int64_t>& end,
                    const std::string& mode, float value);

// Resize of NCHW `in` to [N, C, oh, ow]: nearest reads x(n, c, h0[y], w0[x]); linear weighs the
// four neighbours. Arguments x, h_table [4, oh], w_table [4, ow] (rows index0, index1, weight0,
// weight1 as float32, resize_table), out.
te::LoweredFunc resize(const std::string& name, const std::vector<int64_t>& in, int64_t oh,
                       int64_t ow, bool linear);
// A frontend::ResizeAxis as resize's table argument: [4, out] float32, rows index0, index1,
// weight0, weight1.
std::vector<float> resize_table(const frontend::ResizeAxis& axis);

// The shape a and b broadcast to (numpy rules), or nullopt when they do not.
std::optional<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b);

}  // namespace ktune::deploy
