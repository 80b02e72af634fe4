// Built-in channel-blocked depthwise conv2d (NCHWc, the layout of conv2d_nchwc's input and output,
// and of oneDNN's blocked depthwise): the channel block is the vector lane dimension, so every
// load is a whole vector of channels at one pixel, whatever the stride. The micro-kernel keeps
// (rows) x (columns) accumulator vectors in registers; per window tap it loads one weight vector
// and one input vector per output pixel.
#include <algorithm>

#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/epilogue.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "depthwise_conv2d_nchwc";
constexpr int64_t kMaxTileOh = 4;
constexpr int64_t kMaxTileOw = 16;

struct Shape {
  int64_t n, c, h, w, r, s, stride, pad, dilation, block, oh, ow;
  Epilogue epilogue;  // what follows the convolution in the same tile loop
  int64_t blocks() const { return ceil_div(c, block); }
};

Shape shape_of(const WorkloadArgs& a) {
  Shape s{};
  s.n = a.get_int("N");
  s.c = a.get_int("C");
  s.h = a.get_int("H");
  s.w = a.get_int("W");
  s.r = a.get_int("R");
  s.s = a.get_int("S");
  s.stride = a.get_int("stride");
  s.pad = a.get_int("pad");
  s.dilation = a.get_int("dilation");
  s.block = a.get_int("block");
  if (s.block == 0) s.block = auto_channel_block(s.c);  // as conv2d_nchwc's output block
  s.epilogue = epilogue_of(a);
  s.oh = window_out_extent(kName, s.h, s.r, s.stride, s.pad, s.dilation);
  s.ow = window_out_extent(kName, s.w, s.s, s.stride, s.pad, s.dilation);
  return s;
}

struct Tensors {
  te::Tensor in, weight, padded, conv, out;  // padded: undefined without padding
  EpilogueInputs epilogue;
  // conv: the reduction when an epilogue stage follows it; undefined when the output is the
  // reduction itself.
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> v = {in, weight};
    epilogue.append_to(v);
    v.push_back(out);
    return v;
  }
};

// I[N][ceil(C/b)][H][W][b], W[ceil(C/b)][R][S][b], O[N][ceil(C/b)][OH][OW][b], bias[ceil(C/b)][b],
// residual like O. Channel c sits in block c / b, lane c % b. Without an epilogue, lanes past C
// (the last block's padding) are computed like the others from the padding lanes of I and W:
// zero when either is zero (conv2d_nchwc's output is). With one, they are written as zeros, as
// conv2d_nchwc writes them: a bias or a clip would make them non-zero, and a next depthwise layer
// reads them.
Tensors make_tensors(const WorkloadArgs& a) {
  const Shape sh = shape_of(a);
  const te::DataType dt = dtype_of(a.get("dtype"));
  Tensors t;
  t.in = te::placeholder({sh.n, sh.blocks(), sh.h, sh.w, sh.block}, dt, "I");
  t.weight = te::placeholder({sh.blocks(), sh.r, sh.s, sh.block}, dt, "W");
  const std::vector<int64_t> out_shape = {sh.n, sh.blocks(), sh.oh, sh.ow, sh.block};
  t.epilogue = epilogue_inputs(sh.epilogue, {sh.blocks(), sh.block}, out_shape, dt);
  te::Tensor padded = t.in;
  if (sh.pad > 0) {
    padded = pad_blocked_input(t.in, sh.n, sh.blocks(), sh.h, sh.w, sh.block, sh.pad, dt);
    t.padded = padded;
  }
  const te::IterVar r = te::reduce_axis({0, sh.r}, "r"), s = te::reduce_axis({0, sh.s}, "s");
  const te::Expr st(sh.stride), d(sh.dilation);
  const te::Tensor w = t.weight;
  const te::Tensor conv = te::compute(
      out_shape,
      [&](te::Var n, te::Var c, te::Var y, te::Var x, te::Var l) {
        return te::sum(
            padded(n, c, y * st + r.var * d, x * st + s.var * d, l) * w(c, r.var, s.var, l),
            {r, s});
      },
      sh.epilogue.empty() ? "dwconv" : "dwconv_acc");
  if (sh.epilogue.empty()) {
    t.out = conv;
    return t;
  }
  t.conv = conv;
  const te::Tensor bias = t.epilogue.bias, res = t.epilogue.residual;
  const bool masked = sh.c % sh.block != 0;
  t.out = te::compute(
      out_shape,
      [&](te::Var n, te::Var c, te::Var y, te::Var x, te::Var l) {
        te::Expr v =
            sh.epilogue.apply(conv(n, c, y, x, l), bias.defined() ? bias(c, l) : te::Expr(),
                              res.defined() ? res(n, c, y, x, l) : te::Expr(), dt);
        if (masked)
          v = te::select(c * te::Expr(sh.block) + l < te::Expr(sh.c), v,
                         te::cast(dt, te::Expr(0.0)));
        return v;
      },
      "dwconv");
  return t;
}

// Knobs (stable names):
//   tile_oh  split of output rows in 2 [outer, register rows <= 4]
//   tile_ow  split of output columns in 2 [outer, register columns <= 16]
//   unroll_s 0/1: unroll the window column loop
//   unroll_r 0/1: unroll the window row loop. With both unrolled, a tap's input vector that
//            another tap of the tile reads too (stride 2: column 2x+2 is the next column's 2x;
//            row 2y+2 the next row's 2y) is loaded once: fewer loads per FMA, which is what bounds
//            the strided shapes
//   pad_inline 0/1 (with padding only): inline the padding into the reduction, or pad once
//   skip_taps 0/1 (with pad_inline 1): te skips the padding taps and runs interior tiles
//            unguarded (skip_padding_taps)
//   parallel 0/1 (only 0 on one core): the fused (batch, channel block, oh outer) loop
// Constraint: the accumulators (rows x columns x vectors per block) fit
// TargetTraits::accumulator_budget of the step's operands, a weight and an input per vector.
void define_space(const Shape& sh, int dtype_bits, const TargetTraits& target, ConfigSpace& space) {
  const int64_t vectors = ceil_div(sh.block, target.vector_lanes(dtype_bits));
  space.define_split("tile_oh", {.extent = sh.oh, .num_outputs = 2, .max_innermost = kMaxTileOh});
  space.define_split("tile_ow", {.extent = sh.ow, .num_outputs = 2, .max_innermost = kMaxTileOw});
  space.define_knob("unroll_s", std::vector<int64_t>{0, 1});
  space.define_knob("pad_inline",
                    sh.pad > 0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  space.define_knob("parallel",
                    target.cores > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  space.define_knob("unroll_r", std::vector<int64_t>{0, 1});
  space.set_legacy_value("unroll_r", 0);  // logged before the knob
  define_skip_taps(space, sh.pad > 0);
  space.add_constraint(
      "register tile fits the vector registers", [vectors, target](const EntityView& v) {
        const int64_t acc = v["tile_oh"].values.back() * v["tile_ow"].values.back() * vectors;
        return acc <= target.accumulator_budget(2 * vectors);
      });
}

// One row of up to 8 columns (each weight vector of a tap feeds 8 FMAs), padding inlined: te skips
// its taps and runs interior tiles unguarded, measured 1.9-2.7x the padded copy's speed on
// MobileNetV2's 3x3 layers (stride 1 and 2, one core), where the copy costs as much as the FMAs.
Config fallback(const Shape& sh, const ConfigSpace& space, const TargetTraits& target) {
  std::vector<uint64_t> d(space.num_knobs(), 0);
  d[0] = closest_split(space.knob(0), {1});
  d[1] = closest_split(space.knob(1), {largest_divisor_at_most(sh.ow, 8)});
  d[2] = closest_int(space.knob(2), 1);
  d[3] = closest_int(space.knob(3), 1);
  d[4] = closest_int(space.knob(4), target.cores > 1 ? 1 : 0);
  const auto skip = static_cast<size_t>(space.knob_position("skip_taps"));
  d[skip] = closest_int(space.knob(skip), 1);  // only with pad_inline 1 and padding
  return pick_fallback(space, d);
}

Instantiated apply(const WorkloadArgs& a, const Config& cfg) {
  const Shape sh = shape_of(a);
  Tensors t = make_tensors(a);
  te::Schedule s = te::create_schedule({t.out});
  const te::Tensor acc_t = t.conv.defined() ? t.conv : s.cache_write(t.out, "local");
  const bool par = cfg["parallel"].as_int() != 0;

  te::Stage out = s[t.out];
  const auto ys = apply_split(out, out.axis(2), cfg["tile_oh"], sh.oh);
  const auto xs = apply_split(out, out.axis(3), cfg["tile_ow"], sh.ow);
  if (ys.size() != 2 || xs.size() != 2)
    throw Error(ErrorKind::kInstantiation, std::string(kName) + ": tile_oh and tile_ow split in 2");
  const te::IterVar lane = out.axis(4);
  out.reorder({out.axis(0), out.axis(1), ys[0], xs[0], ys[1], xs[1], lane});
  const te::IterVar outer = out.fuse(out.fuse(out.axis(0), out.axis(1)), ys[0]);
  if (par) out.parallel(outer);
  out.vectorize(lane);

  // The register tile: the window loops outside, the (y, x) accumulators unrolled and the block
  // vectorized innermost, so every accumulator stays a register for the whole window.
  te::Stage acc = s[acc_t];
  acc.compute_at(out, xs[0]);
  const te::IterVar r = acc.reduce_axis(0), sx = acc.reduce_axis(1);
  acc.reorder({acc.axis(0), acc.axis(1), r, sx, acc.axis(2), acc.axis(3), acc.axis(4)});
  acc.unroll(acc.axis(2));
  acc.unroll(acc.axis(3));
  acc.vectorize(acc.axis(4));
  unroll_if(acc, sx, cfg["unroll_s"].as_int() != 0);
  if (const Entity* e = cfg.find("unroll_r")) unroll_if(acc, r, e->as_int() != 0);

  if (t.padded.defined()) schedule_blocked_pad(s[t.padded], cfg["pad_inline"].as_int() != 0, par);
  apply_skip_taps(s, cfg);
  return Instantiated{s, t.args()};
}

}  // namespace

void register_depthwise_nchwc_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = kName;
  d.doc =
      "channel-blocked depthwise conv2d: O[N,C/b,OH,OW,b] = sum_{r,s} I[N,C/b,H,W,b] * "
      "W[C/b,R,S,b] (stride, pad, "
      "dilation; blocks rounded up, padding lanes computed from the padding lanes of I and W, or "
      "zero with an "
      "epilogue: bias[C/b,b], residual like O, an activation)";
  d.args = {
      int_arg("N", "1", "batch"),
      int_arg("C", "", "channels"),
      int_arg("H", "", "input height"),
      int_arg("W", "", "input width"),
      int_arg("R", "3", "kernel height"),
      int_arg("S", "3", "kernel width"),
      int_arg("stride", "1", "stride (both axes)"),
      int_arg("pad", "0", "zero padding (both sides, both axes)", 0),
      int_arg("dilation", "1", "dilation (both axes)"),
      int_arg(
          "block", "0",
          "channels per block (innermost of I, W, O); 0: C up to 16, else 16 or 8 (less padding)",
          0)};
  for (ArgSpec& e : epilogue_args({.bias_doc = "bias[C/b,b]", .residual_doc = "residual like O"}))
    d.args.push_back(std::move(e));
  d.args.push_back(dtype_arg());
  d.resolve = [](WorkloadArgs& a) {
    if (a.get_int("block") == 0) a.set_int("block", auto_channel_block(a.get_int("C")));
    resolve_epilogue(a);
  };
  d.check = [](const WorkloadArgs& a) {
    check_epilogue(kName, a);
    shape_of(a);
  };
  d.compute = [](const WorkloadArgs& a) {
    Tensors t = make_tensors(a);
    return ComputeDef{t.args(), {t.out}};
  };
  d.flop = [](const WorkloadArgs& a) {
    const Shape sh = shape_of(a);
    return static_cast<double>(sh.n) * static_cast<double>(sh.c) * static_cast<double>(sh.oh) *
           static_cast<double>(sh.ow) *
           (2.0 * static_cast<double>(sh.r * sh.s) + sh.epilogue.flop());
  };
  d.define = [](const WorkloadArgs& a, const TargetTraits& target, ConfigSpace& space) {
    define_space(shape_of(a), dtype_of(a.get("dtype")).bits, target, space);
  };
  d.fallback = [](const WorkloadArgs& a, const TargetTraits& target, const ConfigSpace& space) {
    return fallback(shape_of(a), space, target);
  };
  d.apply = [](const WorkloadArgs& a, const TargetTraits&, const Config& cfg) {
    return apply(a, cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
