// Built-in convolution and pooling templates, NCHW: conv2d (stride, padding, dilation), depthwise
// conv2d, max_pool2d and avg_pool2d. They share one schedule: an outer tile of (batch, channel
// block, row block) in parallel, a register tile of channels x rows x vectorized columns
// accumulated in a local buffer, reduction loops outside the tile.
#include <algorithm>

#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr int64_t kMaxRegisterChannels = 16;
constexpr int64_t kMaxRegisterRows = 8;
constexpr int64_t kMaxUnrolledTile = 32;

struct ConvShape : Window {
  int64_t k;
};

ConvShape conv_shape(const std::string& tmpl, const WorkloadArgs& a, bool depthwise, bool pool) {
  if (pool && (a.get_int("pad") >= a.get_int("R") || a.get_int("pad") >= a.get_int("S")))
    throw Error(ErrorKind::kInvalidArgument, tmpl + ": pad must be smaller than the window");
  ConvShape s{};
  static_cast<Window&>(s) = window_of(tmpl, a, /*has_dilation=*/!pool);
  s.k = depthwise || pool ? s.c : a.get_int("K");
  return s;
}

// The input padded with `value` (a compute stage), or the input itself when pad == 0.
te::Tensor pad_input(const te::Tensor& in, const ConvShape& sh, te::Expr value) {
  if (sh.pad == 0) return in;
  const int64_t p = sh.pad;
  return te::compute(
      {sh.n, sh.c, sh.h + 2 * p, sh.w + 2 * p},
      [&](te::Var n, te::Var c, te::Var y, te::Var x) {
        te::Expr inside = y >= te::Expr(p) && y < te::Expr(sh.h + p) && x >= te::Expr(p) &&
                          x < te::Expr(sh.w + p);
        return te::select(inside, in(n, c, y - te::Expr(p), x - te::Expr(p)), value);
      },
      "pad");
}

// Tensors of one instance; `padded` is the internal padding stage (undefined without padding),
// `acc` the reduction stage when it differs from the output (avg pool's sum).
struct ConvTensors {
  std::vector<te::Tensor> args;
  te::Tensor padded, acc, out;
};

enum class Op { kConv, kDepthwise, kMaxPool, kAvgPool };

ConvTensors conv_tensors(Op op, const std::string& tmpl, const WorkloadArgs& a) {
  const bool pool = op == Op::kMaxPool || op == Op::kAvgPool;
  const ConvShape sh = conv_shape(tmpl, a, op == Op::kDepthwise, pool);
  const te::DataType dt = dtype_of(a.get("dtype"));
  ConvTensors t;
  const te::Tensor in = te::placeholder({sh.n, sh.c, sh.h, sh.w}, dt, "I");
  const te::Expr zero = te::cast(dt, te::Expr(0.0));
  const te::Expr lowest = te::cast(dt, te::Expr(-3.0e38));
  const te::Tensor padded = pad_input(in, sh, op == Op::kMaxPool ? lowest : zero);
  if (sh.pad > 0) t.padded = padded;
  const te::IterVar r = te::reduce_axis({0, sh.r}, "r"), s = te::reduce_axis({0, sh.s}, "s");
  const int64_t st = sh.stride, d = sh.dilation;
  auto window = [&](te::Var n, te::Var c, te::Var y, te::Var x) {
    return padded(n, c, y * te::Expr(st) + r.var * te::Expr(d),
                  x * te::Expr(st) + s.var * te::Expr(d));
  };
  switch (op) {
    case Op::kConv: {
      const te::Tensor w = te::placeholder({sh.k, sh.c, sh.r, sh.s}, dt, "W");
      const te::IterVar c = te::reduce_axis({0, sh.c}, "c");
      t.out = te::compute(
          {sh.n, sh.k, sh.oh, sh.ow},
          [&](te::Var n, te::Var k, te::Var y, te::Var x) {
            return te::sum(window(n, c.var, y, x) * w(k, c, r, s), {c, r, s});
          },
          "conv");
      t.args = {in, w, t.out};
      break;
    }
    case Op::kDepthwise: {
      const te::Tensor w = te::placeholder({sh.c, sh.r, sh.s}, dt, "W");
      t.out = te::compute(
          {sh.n, sh.c, sh.oh, sh.ow},
          [&](te::Var n, te::Var c, te::Var y, te::Var x) {
            return te::sum(window(n, c, y, x) * w(c, r, s), {r, s});
          },
          "dwconv");
      t.args = {in, w, t.out};
      break;
    }
    case Op::kMaxPool:
      t.out = te::compute(
          {sh.n, sh.c, sh.oh, sh.ow},
          [&](te::Var n, te::Var c, te::Var y, te::Var x) {
            return te::max(window(n, c, y, x), {r, s});
          },
          "pool");
      t.args = {in, t.out};
      break;
    case Op::kAvgPool: {
      // Padding counts in the divisor (count_include_pad), like a fixed-size window mean.
      t.acc = te::compute(
          {sh.n, sh.c, sh.oh, sh.ow},
          [&](te::Var n, te::Var c, te::Var y, te::Var x) {
            return te::sum(window(n, c, y, x), {r, s});
          },
          "pool_sum");
      const te::Tensor acc = t.acc;
      const te::Expr scale = te::cast(dt, te::Expr(1.0 / static_cast<double>(sh.r * sh.s)));
      t.out = te::compute(
          {sh.n, sh.c, sh.oh, sh.ow},
          [&](te::Var n, te::Var c, te::Var y, te::Var x) { return acc(n, c, y, x) * scale; },
          "pool");
      t.args = {in, t.out};
      break;
    }
  }
  return t;
}

// Knobs (stable names):
//   tile_k   split of output channels in 2 [outer, register channels <= 16]
//   tile_oh  split of output rows in 2 [outer, register rows <= 8]
//   tile_ow  split of output columns in 2 [outer, vectorized columns <= 4 vectors]
//   tile_c   (conv2d only) split of input channels in 2 [outer, inner]
//   reduce_order (conv2d only) 0: c_outer, c_inner, r, s; 1: c_outer, r, s, c_inner
//   unroll_rs 0/1: unroll the window loops
//   pad_inline 0/1 (with padding only): inline the padding into the reduction, or pad once
//   skip_taps 0/1 (with pad_inline 1): te skips the padding taps and runs interior tiles
//            unguarded (skip_padding_taps)
//   parallel 0/1 (only 0 on one core): the fused (batch, channel block, row block) loop
// Constraint: the accumulators fit TargetTraits::accumulator_budget of the step's operand
// vectors (x86: two registers free; AArch64: 15 accumulators at most for depthwise and pooling).
void define_conv_space(Op op, const ConvShape& sh, int dtype_bits, const TargetTraits& target,
                       ConfigSpace& space) {
  const int64_t lanes = target.vector_lanes(dtype_bits);
  space.define_split("tile_k",
                     {.extent = sh.k, .num_outputs = 2, .max_innermost = kMaxRegisterChannels});
  space.define_split("tile_oh",
                     {.extent = sh.oh, .num_outputs = 2, .max_innermost = kMaxRegisterRows});
  space.define_split("tile_ow", {.extent = sh.ow, .num_outputs = 2, .max_innermost = 4 * lanes});
  if (op == Op::kConv) {
    space.define_split("tile_c", {.extent = sh.c, .num_outputs = 2});
    space.define_knob("reduce_order", std::vector<int64_t>{0, 1});
  }
  space.define_knob("unroll_rs", std::vector<int64_t>{0, 1});
  space.define_knob("pad_inline",
                    sh.pad > 0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{1});
  define_parallel(space);
  define_skip_taps(space, sh.pad > 0);
  space.add_constraint(
      "register tile fits the vector registers", [op, lanes, target](const EntityView& v) {
        const int64_t pixels =
            v["tile_oh"].values.back() * ((v["tile_ow"].values.back() + lanes - 1) / lanes);
        const int64_t accumulators = v["tile_k"].values.back() * pixels;
        // Live operands of a step: conv2d's input vectors, shared by the tile's channels; depthwise
        // and pooling reuse nothing across the tile, every accumulator reads its own input vector.
        return accumulators <= target.accumulator_budget(op == Op::kConv ? pixels : accumulators);
      });
  space.add_constraint("unrolled tile stays small", [](const EntityView& v) {
    return v["tile_k"].values.back() * v["tile_oh"].values.back() <= kMaxUnrolledTile;
  });
}

Config conv_fallback(Op op, const ConvShape& sh, int dtype_bits, const TargetTraits& target,
                     const ConfigSpace& space) {
  // One vector of columns, two rows and up to 8 channels: 16 accumulators that reuse each
  // input vector across channels and each weight across rows; input channels innermost so
  // the window loops stay outside the tile.
  const int64_t lanes = target.vector_lanes(dtype_bits);
  // At most one vector: a 7-column tile is a <7 x float> that LLVM widens through the stack on
  // AArch64 (86 vector spills in the innermost loop of a 14-wide conv2d), so a 14-wide output
  // keeps 2 columns.
  const int64_t owi = largest_divisor_at_most(sh.ow, lanes);
  // AArch64 depthwise and pooling (Cortex-A72 objects, counted in their innermost loops): one
  // row of 8 channels x 1 vector, 8 accumulators, spills nothing for 3 x 3 depthwise (stride 1
  // and 2) and 2 x 2 / 3 x 3 pooling, where x86's 8 channels x 2 rows reload 23 to 50 vectors
  // from the stack per loop (each accumulator there needs its own input vector, and LLVM
  // unrolls the window).
  const bool reuse_free = target.is_aarch64() && op != Op::kConv;
  const int64_t ohi = largest_divisor_at_most(sh.oh, reuse_free ? 1 : 2);
  const int64_t vectors = (owi + lanes - 1) / lanes;
  // conv2d on AArch64: channels within the budget of the tile's input vectors (x86: two spare).
  const int64_t pixels = vectors * ohi;
  const int64_t channels = reuse_free ? 8
                           : target.is_aarch64()
                               ? std::min<int64_t>(8, target.accumulator_budget(pixels) / pixels)
                               : std::min<int64_t>(8, (target.vector_registers() - 4) / pixels);
  const int64_t ki = largest_divisor_at_most(sh.k, std::max<int64_t>(1, channels));
  std::vector<uint64_t> d(space.num_knobs(), 0);
  size_t i = 0;
  d[i] = closest_split(space.knob(i), {ki}), ++i;
  d[i] = closest_split(space.knob(i), {ohi}), ++i;
  d[i] = closest_split(space.knob(i), {owi}), ++i;
  if (op == Op::kConv) {
    d[i] = closest_split(space.knob(i), {largest_divisor_at_most(sh.c, 16)}), ++i;
    d[i] = closest_int(space.knob(i), 1), ++i;
  }
  d[i] = closest_int(space.knob(i), 0), ++i;
  d[i] = closest_int(space.knob(i), 0), ++i;
  d[i] = closest_int(space.knob(i), target.cores > 1 ? 1 : 0), ++i;
  return pick_fallback(space, d);
}

Instantiated conv_apply(Op op, const std::string& tmpl, const WorkloadArgs& a, const Config& cfg) {
  const bool pool = op == Op::kMaxPool || op == Op::kAvgPool;
  const ConvShape sh = conv_shape(tmpl, a, op == Op::kDepthwise, pool);
  ConvTensors t = conv_tensors(op, tmpl, a);
  te::Schedule s = te::create_schedule({t.out});
  const te::Tensor acc_t = t.acc.defined() ? t.acc : s.cache_write(t.out, "local");
  te::Stage out = s[t.out];
  const auto ks = apply_split(out, out.axis(1), cfg["tile_k"], sh.k);
  const auto ys = apply_split(out, out.axis(2), cfg["tile_oh"], sh.oh);
  const auto xs = apply_split(out, out.axis(3), cfg["tile_ow"], sh.ow);
  if (ks.size() != 2 || ys.size() != 2 || xs.size() != 2)
    throw Error(ErrorKind::kInstantiation, tmpl + ": tile_k, tile_oh and tile_ow split in 2");
  out.reorder({out.axis(0), ks[0], ys[0], xs[0], ks[1], ys[1], xs[1]});
  te::IterVar outer = out.fuse(out.fuse(out.axis(0), ks[0]), ys[0]);
  if (cfg["parallel"].as_int() != 0) out.parallel(outer);
  out.vectorize(xs[1]);

  te::Stage acc = s[acc_t];
  acc.compute_at(out, xs[0]);
  const int n_reduce = op == Op::kConv ? 3 : 2;
  std::vector<te::IterVar> order = {acc.axis(0)};
  if (op == Op::kConv) {
    const auto cs = apply_split(acc, acc.reduce_axis(0), cfg["tile_c"], sh.c);
    if (cs.size() != 2) throw Error(ErrorKind::kInstantiation, tmpl + ": tile_c splits in 2");
    if (cfg["reduce_order"].as_int() == 0) {
      order.insert(order.end(), {cs[0], cs[1], acc.reduce_axis(1), acc.reduce_axis(2)});
    } else {
      order.insert(order.end(), {cs[0], acc.reduce_axis(1), acc.reduce_axis(2), cs[1]});
    }
  } else {
    order.insert(order.end(), {acc.reduce_axis(0), acc.reduce_axis(1)});
  }
  order.insert(order.end(), {acc.axis(1), acc.axis(2), acc.axis(3)});
  acc.reorder(order);
  acc.unroll(acc.axis(1));
  acc.unroll(acc.axis(2));
  acc.vectorize(acc.axis(3));
  if (cfg["unroll_rs"].as_int() != 0) {
    acc.unroll(acc.reduce_axis(n_reduce - 2));
    acc.unroll(acc.reduce_axis(n_reduce - 1));
  }
  if (t.padded.defined() && cfg["pad_inline"].as_int() != 0) s[t.padded].compute_inline();
  apply_skip_taps(s, cfg);
  return Instantiated{s, t.args};
}

double conv_flop(Op op, const std::string& tmpl, const WorkloadArgs& a) {
  const bool pool = op == Op::kMaxPool || op == Op::kAvgPool;
  const ConvShape sh = conv_shape(tmpl, a, op == Op::kDepthwise, pool);
  const double outputs = static_cast<double>(sh.n) * static_cast<double>(sh.k) *
                         static_cast<double>(sh.oh) * static_cast<double>(sh.ow);
  const double window = static_cast<double>(sh.r * sh.s);
  switch (op) {
    case Op::kConv:
      return 2.0 * outputs * static_cast<double>(sh.c) * window;
    case Op::kDepthwise:
      return 2.0 * outputs * window;
    case Op::kMaxPool:
      return outputs * window;
    case Op::kAvgPool:
      return outputs * (window + 1);
  }
  return 0;
}

void register_op(TemplateRegistry& r, Op op, const std::string& name, const std::string& doc,
                 std::vector<ArgSpec> args) {
  TemplateDef d;
  d.name = name;
  d.doc = doc;
  d.args = std::move(args);
  d.check = [op, name](const WorkloadArgs& a) {
    conv_shape(name, a, op == Op::kDepthwise, op == Op::kMaxPool || op == Op::kAvgPool);
  };
  d.compute = [op, name](const WorkloadArgs& a) {
    ConvTensors t = conv_tensors(op, name, a);
    return ComputeDef{t.args, {t.out}};
  };
  d.flop = [op, name](const WorkloadArgs& a) { return conv_flop(op, name, a); };
  d.define = [op, name](const WorkloadArgs& a, const TargetTraits& target, ConfigSpace& space) {
    const bool pool = op == Op::kMaxPool || op == Op::kAvgPool;
    define_conv_space(op, conv_shape(name, a, op == Op::kDepthwise, pool),
                      dtype_of(a.get("dtype")).bits, target, space);
  };
  d.fallback = [op, name](const WorkloadArgs& a, const TargetTraits& target,
                          const ConfigSpace& space) {
    const bool pool = op == Op::kMaxPool || op == Op::kAvgPool;
    return conv_fallback(op, conv_shape(name, a, op == Op::kDepthwise, pool),
                         dtype_of(a.get("dtype")).bits, target, space);
  };
  d.apply = [op, name](const WorkloadArgs& a, const TargetTraits&, const Config& cfg) {
    return conv_apply(op, name, a, cfg);
  };
  r.add(std::move(d));
}

}  // namespace

void register_conv_templates(TemplateRegistry& r) {
  register_op(
      r, Op::kConv, "conv2d",
      "NCHW conv2d: O[N,K,OH,OW] = sum_{c,r,s} I[N,C,H,W] * W[K,C,R,S] (stride, pad, dilation)",
      {int_arg("N", "1", "batch"), int_arg("C", "", "input channels"),
       int_arg("H", "", "input height"), int_arg("W", "", "input width"),
       int_arg("K", "", "output channels"), int_arg("R", "3", "kernel height"),
       int_arg("S", "3", "kernel width"), int_arg("stride", "1", "stride (both axes)"),
       int_arg("pad", "0", "zero padding (both sides, both axes)", 0),
       int_arg("dilation", "1", "dilation (both axes)"), dtype_arg()});
  register_op(
      r, Op::kDepthwise, "depthwise_conv2d",
      "NCHW depthwise conv2d: O[N,C,OH,OW] = sum_{r,s} I[N,C,H,W] * W[C,R,S] (stride, pad, "
      "dilation)",
      {int_arg("N", "1", "batch"), int_arg("C", "", "channels"), int_arg("H", "", "input height"),
       int_arg("W", "", "input width"), int_arg("R", "3", "kernel height"),
       int_arg("S", "3", "kernel width"), int_arg("stride", "1", "stride (both axes)"),
       int_arg("pad", "0", "zero padding (both sides)", 0),
       int_arg("dilation", "1", "dilation (both axes)"), dtype_arg()});
  const std::vector<ArgSpec> pool_args = {int_arg("N", "1", "batch"),
                                          int_arg("C", "", "channels"),
                                          int_arg("H", "", "input height"),
                                          int_arg("W", "", "input width"),
                                          int_arg("R", "2", "window height"),
                                          int_arg("S", "2", "window width"),
                                          int_arg("stride", "2", "stride (both axes)"),
                                          int_arg("pad", "0", "padding (both sides)", 0),
                                          dtype_arg()};
  register_op(r, Op::kMaxPool, "max_pool2d",
              "NCHW max pooling over an R x S window (padding never wins)", pool_args);
  register_op(r, Op::kAvgPool, "avg_pool2d",
              "NCHW average pooling over an R x S window (padding counts as zeros)", pool_args);
}

}  // namespace ktune::schedule_space::templates
