// The generated kernels of a model build. They move data or apply one scalar function per
// element, so one schedule fits all: the outer loops in parallel, the innermost vectorized where
// it is contiguous.
#include "deploy/model_ops.h"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include "deploy/generated_schedule.h"
#include "schedule_space/templates/epilogue.h"
#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

constexpr int64_t kChunk = 4096;  // elements per parallel iteration of a flat kernel

// log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|), the exp at most 1.
te::Expr softplus(const te::Expr& x) {
  return te::max(x, f(0)) + te::log(f(1) + te::exp(-te::abs(x)));
}

te::Expr apply(const ElementwiseOp& op, const te::Expr& x, const te::Expr& y) {
  if (op.op == "copy") return x;
  if (op.op == "relu") return te::max(x, f(0));
  if (op.op == "clip") return te::min(te::max(x, f(op.min)), f(op.max));
  if (op.op == "sigmoid") return f(1) / (f(1) + te::exp(-x));
  if (op.op == "silu") return x / (f(1) + te::exp(-x));
  if (op.op == "hardswish") return x * te::min(te::max(x + f(3), f(0)), f(6)) / f(6);
  // The expressions of the matmul epilogue's gelu_erf: a GELU computes the same fused or not.
  if (op.op == "erf") return schedule_space::templates::erf_expr(x, te::Float(32));
  if (op.op == "gelu_erf")
    return f(0.5) * x *
           (f(1) + schedule_space::templates::erf_expr(x * f(0.7071067811865476f), te::Float(32)));
  // GELU's tanh approximation (ONNX Gelu with approximate="tanh"): sqrt(2 / pi) = 0.7978845608.
  if (op.op == "gelu_tanh")
    return f(0.5) * x * (f(1) + te::tanh(f(0.7978845608f) * (x + f(0.044715f) * x * x * x)));
  if (op.op == "sqrt") return te::sqrt(x);
  if (op.op == "hardsigmoid") return te::min(te::max(f(op.alpha) * x + f(op.beta), f(0)), f(1));
  if (op.op == "leaky_relu") return te::select(x < f(0), x * f(op.alpha), x);
  if (op.op == "elu") return te::select(x < f(0), f(op.alpha) * (te::exp(x) - f(1)), x);
  // ONNX's Selu: gamma (alpha e^x - alpha) for x <= 0, gamma x above.
  if (op.op == "selu")
    return te::select(x <= f(0), f(op.beta) * (f(op.alpha) * te::exp(x) - f(op.alpha)),
                      f(op.beta) * x);
  if (op.op == "tanh") return te::tanh(x);
  if (op.op == "softplus") return softplus(x);
  if (op.op == "mish") return x * te::tanh(softplus(x));
  if (op.op == "exp") return te::exp(x);
  if (op.op == "log") return te::log(x);
  if (op.op == "abs") return te::abs(x);
  if (op.op == "neg") return -x;
  if (op.op == "reciprocal") return f(1) / x;
  if (op.op == "max") return te::max(x, y);
  if (op.op == "min") return te::min(x, y);
  if (op.op == "add") return x + y;
  if (op.op == "sub") return x - y;
  if (op.op == "mul") return x * y;
  if (op.op == "div") return x / y;
  if (op.op == "add_scalar") return x + f(op.value);
  if (op.op == "sub_scalar") return x - f(op.value);
  if (op.op == "mul_scalar") return x * f(op.value);
  // A division, not a multiplication by the reciprocal: the same rounding as the ONNX Div.
  if (op.op == "div_scalar") return x / f(op.value);
  if (op.op == "pow_scalar") return op.value == 2.0f ? x * x : te::pow(x, f(op.value));
  throw Error(ErrorKind::kUnsupported, "no generated kernel for elementwise '" + op.op + "'");
}

}  // namespace

bool is_elementwise(const std::string& op) {
  static const std::set<std::string> kOps = {
      "copy",       "relu",       "clip",      "sigmoid",    "silu",        "hardswish",
      "gelu_erf",   "gelu_tanh",  "erf",       "sqrt",       "hardsigmoid", "leaky_relu",
      "elu",        "selu",       "tanh",      "softplus",   "mish",        "exp",
      "log",        "abs",        "neg",       "reciprocal", "add",         "sub",
      "mul",        "div",        "max",       "min",        "add_scalar",  "sub_scalar",
      "mul_scalar", "div_scalar", "pow_scalar"};
  return kOps.count(op) > 0;
}

te::LoweredFunc to_blocked(const std::string& name, const std::vector<int64_t>& nchw, int64_t block,
                           te::DataType dtype) {
  const int64_t n = nchw.at(0), c = nchw.at(1), h = nchw.at(2), w = nchw.at(3);
  const int64_t blocks = (c + block - 1) / block;
  te::Tensor in = te::placeholder({n, c, h, w}, dtype, "in");
  te::Tensor out = te::compute(
      {n, blocks, h, w, block},
      [&](te::Var i, te::Var cb, te::Var y, te::Var x, te::Var l) {
        te::Expr ch = cb * block + l;
        if (c % block == 0) return in(i, ch, y, x);  // no padding lanes
        // The clamp keeps the read in bounds; the select writes the padding lanes as zeros.
        return te::select(ch < c, in(i, te::min(ch, te::Expr(c - 1)), y, x),
                          te::cast(dtype, te::Expr(0)));
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  parallel_leading(s[out], 3);
  return te::lower(s, {in, out}, name);
}

te::LoweredFunc from_blocked(const std::string& name, const std::vector<int64_t>& nchw,
                             int64_t block, te::DataType dtype) {
  const int64_t n = nchw.at(0), c = nchw.at(1), h = nchw.at(2), w = nchw.at(3);
  const int64_t blocks = (c + block - 1) / block;
  te::Tensor in = te::placeholder({n, blocks, h, w, block}, dtype, "in");
  te::Tensor out = te::compute(
      {n, c, h, w},
      [&](te::Var i, te::Var ch, te::Var y, te::Var x) {
        return in(i, ch / block, y, x, ch % block);
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  parallel_leading(s[out], 3);
  return te::lower(s, {in, out}, name);
}

namespace {

// `out` of `count` elements under the flat kernels' schedule: vectorized, in parallel chunks.
te::LoweredFunc flat(const std::string& name, const std::vector<te::Tensor>& inputs,
                     const te::Tensor& out, int64_t count) {
  te::Schedule s = te::create_schedule({out});
  auto [outer, lanes] = s[out].split(s[out].axis(0), kLanes);
  s[out].vectorize(lanes);
  if (count > kChunk) {
    auto [chunks, rest] = s[out].split(outer, kChunk / kLanes);
    (void)rest;
    s[out].parallel(chunks);
  }
  std::vector<te::Tensor> args = inputs;
  args.push_back(out);
  return te::lower(s, args, name);
}

}  // namespace

namespace {

// Element i's scale and zero point (float32): constants per tensor, read from the kernel's scale
// and zero_point arguments per axis.
struct QuantOperands {
  std::vector<te::Tensor> args;  // [scale, zero_point] per axis
  std::function<std::pair<te::Expr, te::Expr>(const te::Var&)> at;
};

QuantOperands quant_operands(const QuantParams& p) {
  QuantOperands q;
  if (!p.per_axis()) {
    const float scale = p.scale.at(0), zero = static_cast<float>(p.zero_point.at(0));
    q.at = [scale, zero](const te::Var&) { return std::pair{f(scale), f(zero)}; };
    return q;
  }
  const int64_t channels = static_cast<int64_t>(p.scale.size()), inner = p.inner;
  q.args = {te::placeholder({channels}, te::Float(32), "scale"),
            te::placeholder({channels}, te::Float(32), "zero_point")};
  q.at = [s = q.args[0], z = q.args[1], channels, inner](const te::Var& i) {
    const te::Expr c = i / te::Expr(inner) % te::Expr(channels);
    return std::pair{s(c), z(c)};
  };
  return q;
}

}  // namespace

te::LoweredFunc quantize_linear(const std::string& name, int64_t count, const QuantParams& p,
                                te::DataType type) {
  const bool u8 = type == te::UInt(8);
  if (!u8 && type != te::Int(8))
    throw Error(ErrorKind::kUnsupported, "QuantizeLinear to " + type.str() + " is not built");
  const QuantOperands q = quant_operands(p);
  te::Tensor x = te::placeholder({count}, te::Float(32), "x");
  te::Tensor out = te::compute(
      {count},
      [&](te::Var i) {
        const auto [scale, zero] = q.at(i);
        // Clamped in float, so that the conversion to int32 never overflows.
        const te::Expr y = te::round_even(x(i) / scale) + zero;
        const te::Expr c = te::min(te::max(y, f(u8 ? 0.0f : -128.0f)), f(u8 ? 255.0f : 127.0f));
        return te::cast(type, te::cast(te::Int(32), c));
      },
      "out");
  std::vector<te::Tensor> inputs = {x};
  inputs.insert(inputs.end(), q.args.begin(), q.args.end());
  return flat(name, inputs, out, count);
}

te::LoweredFunc quantize_linear_blocked(const std::string& name, const std::vector<int64_t>& nchw,
                                        int64_t block, float scale, int64_t zero_point,
                                        te::DataType type) {
  const bool u8 = type == te::UInt(8);
  if (!u8 && type != te::Int(8))
    throw Error(ErrorKind::kUnsupported, "QuantizeLinear to " + type.str() + " is not built");
  const int64_t n = nchw.at(0), c = nchw.at(1), h = nchw.at(2), w = nchw.at(3);
  const int64_t blocks = (c + block - 1) / block;
  te::Tensor x = te::placeholder({n, c, h, w}, te::Float(32), "x");
  te::Tensor out = te::compute(
      {n, blocks, h, w, block},
      [&](te::Var i, te::Var cb, te::Var y, te::Var col, te::Var l) {
        const te::Expr ch = cb * block + l;
        // quantize_linear's arithmetic on the element of channel ch (the clamp keeps the read in
        // bounds); the padding lanes are zeros, as to_blocked writes them.
        const te::Expr v = x(i, te::min(ch, te::Expr(c - 1)), y, col);
        const te::Expr q = te::round_even(v / f(scale)) + f(static_cast<float>(zero_point));
        const te::Expr clamped =
            te::min(te::max(q, f(u8 ? 0.0f : -128.0f)), f(u8 ? 255.0f : 127.0f));
        return te::select(ch < c, te::cast(type, te::cast(te::Int(32), clamped)),
                          te::cast(type, te::Expr(0)));
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  // Rows in parallel: a 3-channel input is one block, too few iterations for the threads.
  parallel_leading(s[out], 3);
  return te::lower(s, {x, out}, name);
}

te::LoweredFunc dequantize_linear(const std::string& name, int64_t count, const QuantParams& p,
                                  te::DataType type) {
  if (type != te::UInt(8) && type != te::Int(8))
    throw Error(ErrorKind::kUnsupported, "DequantizeLinear of " + type.str() + " is not built");
  const QuantOperands q = quant_operands(p);
  te::Tensor x = te::placeholder({count}, type, "x");
  te::Tensor out = te::compute(
      {count},
      [&](te::Var i) {
        const auto [scale, zero] = q.at(i);
        // The zero point in int32 as ONNX subtracts it (a float32 copy of an 8-bit value is exact).
        const te::Expr centered = te::cast(te::Int(32), x(i)) - te::cast(te::Int(32), zero);
        return te::cast(te::Float(32), centered) * scale;
      },
      "out");
  std::vector<te::Tensor> inputs = {x};
  inputs.insert(inputs.end(), q.args.begin(), q.args.end());
  return flat(name, inputs, out, count);
}

te::LoweredFunc quantized_add(const std::string& name, int64_t count, const QuantizedAddOp& op) {
  te::Tensor a = te::placeholder({count}, te::UInt(8), "a");
  te::Tensor b = te::placeholder({count}, te::UInt(8), "b");
  const auto real = [](const te::Tensor& t, const te::Var& i, int32_t zero, float scale) {
    return te::cast(te::Float(32), te::cast(te::Int(32), t(i)) - te::Expr(zero)) * f(scale);
  };
  const float lo = op.relu ? static_cast<float>(std::max(op.out_zero, 0)) : 0.0f;
  te::Tensor out = te::compute(
      {count},
      [&](te::Var i) {
        const te::Expr sum = real(a, i, op.a_zero, op.a_scale) + real(b, i, op.b_zero, op.b_scale);
        const te::Expr y =
            te::round_even(sum / f(op.out_scale)) + f(static_cast<float>(op.out_zero));
        const te::Expr c = te::min(te::max(y, f(lo)), f(255.0f));
        return te::cast(te::UInt(8), te::cast(te::Int(32), c));
      },
      "out");
  return flat(name, {a, b}, out, count);
}

te::LoweredFunc elementwise(const std::string& name, const ElementwiseOp& op, int64_t count) {
  if (!is_elementwise(op.op))
    throw Error(ErrorKind::kUnsupported, "no generated kernel for elementwise '" + op.op + "'");
  te::Tensor a = te::placeholder({count}, te::Float(32), "a");
  te::Tensor b = op.operands() == 2 ? te::placeholder({count}, te::Float(32), "b") : te::Tensor();
  te::Tensor out = te::compute(
      {count}, [&](te::Var i) { return apply(op, a(i), b.defined() ? b(i) : te::Expr()); }, "out");
  std::vector<te::Tensor> inputs = {a};
  if (b.defined()) inputs.push_back(b);
  return flat(name, inputs, out, count);
}

}  // namespace ktune::deploy
