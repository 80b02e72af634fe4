// Built-in channel-blocked conv2d (NCHWc, TVM's conv2d_NCHWc for x86): input, weights and output
// are already blocked by channels, so an output-channel block is the vector lane dimension. The
// micro-kernel keeps (oc blocks) x (rows) x (columns) accumulator vectors in registers; per
// reduction step it loads one weight vector per oc block and broadcasts one input scalar per
// output pixel.
#include <algorithm>

#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/epilogue.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "conv2d_nchwc";
constexpr int64_t kMaxTileKo = 4;
constexpr int64_t kMaxTileOh = 4;
constexpr int64_t kMaxTileOw = 32;

// Channel blocks: ic_block and oc_block of 0 (the default) are auto_channel_block's choice.

struct Shape {
  int64_t n, c, h, w, k, r, s, stride, pad, dilation, icb, ocb, oh, ow;
  Epilogue epilogue;  // what follows the convolution in the same tile loop
  // Blocks, the last one partly padding when the channels are not a block multiple.
  int64_t cblocks() const { return ceil_div(c, icb); }
  int64_t kblocks() const { return ceil_div(k, ocb); }
};

// The shape of a workload (blocks resolved); throws Error(kInvalidArgument) when the window does
// not fit.
Shape shape_of(const WorkloadArgs& a) {
  Shape s{};
  s.n = a.get_int("N");
  s.c = a.get_int("C");
  s.h = a.get_int("H");
  s.w = a.get_int("W");
  s.k = a.get_int("K");
  s.r = a.get_int("R");
  s.s = a.get_int("S");
  s.stride = a.get_int("stride");
  s.pad = a.get_int("pad");
  s.dilation = a.get_int("dilation");
  s.icb = a.get_int("ic_block");
  s.ocb = a.get_int("oc_block");
  if (s.icb == 0) s.icb = auto_channel_block(s.c);
  if (s.ocb == 0) s.ocb = auto_channel_block(s.k);
  s.epilogue = epilogue_of(a);
  s.oh = window_out_extent(kName, s.h, s.r, s.stride, s.pad, s.dilation);
  s.ow = window_out_extent(kName, s.w, s.s, s.stride, s.pad, s.dilation);
  return s;
}

struct Tensors {
  te::Tensor in, weight, padded, conv, out;  // padded: undefined without padding
  EpilogueInputs epilogue;
  // conv: the reduction when an epilogue stage (the epilogue's steps, zeroed tail channels)
  // follows it; undefined when the output is the reduction itself.
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> v = {in, weight};
    epilogue.append_to(v);
    v.push_back(out);
    return v;
  }
};

// I[N][ceil(C/icb)][H][W][icb], W[ceil(K/ocb)][ceil(C/icb)][R][S][icb][ocb],
// bias[ceil(K/ocb)][ocb], residual and O [N][ceil(K/ocb)][OH][OW][ocb]. Channel c sits in block
// c / icb, lane c % icb. Lanes past the channel count (the last block's padding) of I, W and bias
// are never used: the reduction runs over exactly C input channels, and output lanes past K are
// written as zeros (so O is a valid zero-padded input of a next layer with ic_block = oc_block).
Tensors make_tensors(const WorkloadArgs& a) {
  const Shape sh = shape_of(a);
  const te::DataType dt = dtype_of(a.get("dtype"));
  const te::Expr zero = te::cast(dt, te::Expr(0.0));
  Tensors t;
  t.in = te::placeholder({sh.n, sh.cblocks(), sh.h, sh.w, sh.icb}, dt, "I");
  t.weight = te::placeholder({sh.kblocks(), sh.cblocks(), sh.r, sh.s, sh.icb, sh.ocb}, dt, "W");
  const std::vector<int64_t> out_shape = {sh.n, sh.kblocks(), sh.oh, sh.ow, sh.ocb};
  t.epilogue = epilogue_inputs(sh.epilogue, {sh.kblocks(), sh.ocb}, out_shape, dt);
  te::Tensor padded = t.in;
  if (sh.pad > 0) {
    padded = pad_blocked_input(t.in, sh.n, sh.cblocks(), sh.h, sh.w, sh.icb, sh.pad, dt);
    t.padded = padded;
  }
  // One reduction axis over the C channels: the schedule splits it by icb into (block, lane),
  // dividing or with a guarded tail block.
  const te::IterVar rc = te::reduce_axis({0, sh.c}, "rc");
  const te::IterVar r = te::reduce_axis({0, sh.r}, "r");
  const te::IterVar s = te::reduce_axis({0, sh.s}, "s");
  const te::Tensor w = t.weight;
  const te::Expr st(sh.stride), d(sh.dilation), icb(sh.icb);
  const bool masked = sh.k % sh.ocb != 0;
  const bool staged = masked || !sh.epilogue.empty();
  const te::Tensor conv = te::compute(
      out_shape,
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        return te::sum(
            padded(n, rc.var / icb, y * st + r.var * d, x * st + s.var * d, rc.var % icb) *
                w(ko, rc.var / icb, r.var, s.var, rc.var % icb, kb),
            {rc, r, s});
      },
      staged ? "conv_acc" : "conv");
  if (!staged) {
    t.out = conv;
    return t;
  }
  t.conv = conv;
  const te::Tensor bias = t.epilogue.bias, res = t.epilogue.residual;
  t.out = te::compute(
      out_shape,
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        te::Expr v =
            sh.epilogue.apply(conv(n, ko, y, x, kb), bias.defined() ? bias(ko, kb) : te::Expr(),
                              res.defined() ? res(n, ko, y, x, kb) : te::Expr(), dt);
        if (masked) v = te::select(ko * te::Expr(sh.ocb) + kb < te::Expr(sh.k), v, zero);
        return v;
      },
      "conv");
  return t;
}

// Accumulator vectors of one oc block.
int64_t vectors_per_block(int64_t ocb, int64_t lanes) { return (ocb + lanes - 1) / lanes; }

// Knobs (stable names):
//   tile_ko  split of the output channel blocks (K/oc_block) in 2 [outer, register blocks <= 4]
//   tile_oh  split of output rows in 2 [outer, register rows <= 4]
//   tile_ow  split of output columns in 2 [outer, register columns <= 32]
//   tile_ci  split of the input channel blocks (C/ic_block) in 2 [outer, inner]
//   reduce_order  0: ci_o, ci_i, r, s, cb   1: ci_o, r, s, ci_i, cb   2: ci_o, r, ci_i, s, cb
//   unroll_cb 0/1: unroll the ic_block-long cb loop (innermost of the reduction)
//   unroll_s  0/1: unroll the window column loop
//   pad_inline 0/1 (with padding only): inline the padding into the reduction, or pad once
//   skip_taps 0/1 (with pad_inline 1): te skips the padding taps and runs interior tiles
//            unguarded (skip_padding_taps)
//   parallel 0/1 (only 0 on one core): the fused (batch, ko outer, oh outer) loop
// Constraint: the accumulators (tile_ko inner x vectors per oc block x tile_oh inner x tile_ow
// inner) fit TargetTraits::accumulator_budget of the tile's weight vectors, tile_ko inner x
// vectors per oc block (x86: two registers free, a weight vector and a broadcast input;
// AArch64: every weight vector of the tile, which LLVM loads together, and the input scalar).
void define_space(const Shape& sh, int dtype_bits, const TargetTraits& target, ConfigSpace& space) {
  const int64_t lanes = target.vector_lanes(dtype_bits);
  const int64_t vectors = vectors_per_block(sh.ocb, lanes);
  space.define_split("tile_ko",
                     {.extent = sh.kblocks(), .num_outputs = 2, .max_innermost = kMaxTileKo});
  space.define_split("tile_oh", {.extent = sh.oh, .num_outputs = 2, .max_innermost = kMaxTileOh});
  space.define_split("tile_ow", {.extent = sh.ow, .num_outputs = 2, .max_innermost = kMaxTileOw});
  space.define_split("tile_ci", {.extent = sh.cblocks(), .num_outputs = 2});
  space.define_knob("reduce_order", std::vector<int64_t>{0, 1, 2});
  space.define_knob("unroll_cb", std::vector<int64_t>{0, 1});
  space.define_knob("unroll_s", std::vector<int64_t>{0, 1});
  space.define_knob("pad_inline",
                    sh.pad > 0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  space.define_knob("parallel",
                    target.cores > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  define_skip_taps(space, sh.pad > 0);
  space.add_constraint("register tile fits the vector registers",
                       [vectors, target](const EntityView& v) {
                         const int64_t weights = v["tile_ko"].values.back() * vectors;
                         return weights * v["tile_oh"].values.back() * v["tile_ow"].values.back() <=
                                target.accumulator_budget(weights);
                       });
}

// The AArch64 register tile (Cortex-A72/A76 class, not timed here: qemu timings say nothing):
// of the (ko, oh, ow) blocks that divide their extents, the most accumulators that fit 32 NEON
// registers with every weight vector of the tile and the input scalar (accumulator_budget);
// among equals, the fewest loads per step (weight vectors + input scalars), then more columns.
// With 16-wide oc blocks (4 vectors) that is 16 accumulators: 1 x 1 x 4 on 56 x 56, 2 x 1 x 2
// on 7 x 14 (where one block would get only 2 columns). x86's pairing below, measured on Zen 4,
// would put 7 columns x 4 vectors = 28 accumulators + 5 operands in 32 registers: LLVM then
// reloads an accumulator from the stack in every step of the innermost loop.
void aarch64_register_blocks(const Shape& sh, int64_t vectors, const TargetTraits& target,
                             int64_t& koi, int64_t& ohi, int64_t& owi) {
  int64_t best_acc = 0, best_loads = 0;
  for (int64_t k = 1; k <= std::min(kMaxTileKo, sh.kblocks()); ++k) {
    if (sh.kblocks() % k != 0) continue;
    for (int64_t h = 1; h <= std::min(kMaxTileOh, sh.oh); ++h) {
      if (sh.oh % h != 0) continue;
      for (int64_t w = 1; w <= std::min(kMaxTileOw, sh.ow); ++w) {
        if (sh.ow % w != 0) continue;
        const int64_t acc = k * vectors * h * w, loads = k * vectors + h * w;
        if (acc > target.accumulator_budget(k * vectors)) continue;
        const bool better =
            acc > best_acc ||
            (acc == best_acc && (loads < best_loads || (loads == best_loads && w > owi)));
        if (!better) continue;
        best_acc = acc, best_loads = loads;
        koi = k, ohi = h, owi = w;
      }
    }
  }
}

// Two oc blocks (each broadcast input feeds two FMAs, halving the loads per FMA: measured
// ~1.15x over one block) and two rows, then as many columns as fit, up to budget - 2
// accumulators (2 x 2 x 7 measured ~3% ahead of 2 x 1 x 14 on 56 x 56); all input channels
// in one reduction pass; padding done once. cb stays a loop: unrolled 16x the tile's FMAs it
// measured ~5% slower (code size), LLVM unrolls it a little.
Config fallback(const Shape& sh, int dtype_bits, const TargetTraits& target,
                const ConfigSpace& space) {
  const int64_t lanes = target.vector_lanes(dtype_bits);
  const int64_t vectors = vectors_per_block(sh.ocb, lanes);
  int64_t koi = 1, ohi = 1, owi = 1;
  if (target.is_aarch64()) {
    aarch64_register_blocks(sh, vectors, target, koi, ohi, owi);
  } else {
    const int64_t cap = std::max<int64_t>(1, (target.vector_registers() - 4) / vectors);
    // With few register blocks (AVX2 with 16-wide oc blocks) columns alone fill them.
    const int64_t pair = cap >= 12 ? 2 : 1;
    koi = largest_divisor_at_most(sh.kblocks(), pair);
    ohi = largest_divisor_at_most(sh.oh, pair);
    owi = largest_divisor_at_most(sh.ow,
                                  std::min(kMaxTileOw, std::max<int64_t>(1, cap / (koi * ohi))));
  }
  std::vector<uint64_t> d(space.num_knobs(), 0);
  d[0] = closest_split(space.knob(0), {koi});
  d[1] = closest_split(space.knob(1), {ohi});
  d[2] = closest_split(space.knob(2), {owi});
  d[3] = closest_split(space.knob(3), {sh.cblocks()});
  d[4] = closest_int(space.knob(4), 0);
  d[5] = closest_int(space.knob(5), 0);
  d[6] = closest_int(space.knob(6), 0);
  d[7] = closest_int(space.knob(7), 0);
  d[8] = closest_int(space.knob(8), target.cores > 1 ? 1 : 0);
  return pick_fallback(space, d);
}

Instantiated apply(const WorkloadArgs& a, const Config& cfg) {
  const Shape sh = shape_of(a);
  Tensors t = make_tensors(a);
  te::Schedule s = te::create_schedule({t.out});
  const te::Tensor acc_t = t.conv.defined() ? t.conv : s.cache_write(t.out, "local");
  const bool par = cfg["parallel"].as_int() != 0;

  te::Stage out = s[t.out];
  const auto ks = apply_split(out, out.axis(1), cfg["tile_ko"], sh.kblocks());
  const auto ys = apply_split(out, out.axis(2), cfg["tile_oh"], sh.oh);
  const auto xs = apply_split(out, out.axis(3), cfg["tile_ow"], sh.ow);
  if (ks.size() != 2 || ys.size() != 2 || xs.size() != 2)
    throw Error(ErrorKind::kInstantiation,
                std::string(kName) + ": tile_ko, tile_oh and tile_ow split in 2");
  const te::IterVar kb = out.axis(4);
  out.reorder({out.axis(0), ks[0], ys[0], xs[0], ks[1], ys[1], xs[1], kb});
  const te::IterVar outer = out.fuse(out.fuse(out.axis(0), ks[0]), ys[0]);
  if (par) out.parallel(outer);
  out.vectorize(kb);

  // The register tile: reduction loops outside, the (y, x, ko) accumulators unrolled and the
  // oc block vectorized innermost, so every accumulator is a register for the whole reduction.
  te::Stage acc = s[acc_t];
  acc.compute_at(out, xs[0]);
  // Channels -> (block, lane); the lane loop is the old cb axis. A last block that is only partly
  // channels runs under a guard (peeled off by the lowering).
  auto [ci, cb] = acc.split(acc.reduce_axis(0), sh.icb);
  const auto cs = apply_split(acc, ci, cfg["tile_ci"], sh.cblocks());
  if (cs.size() != 2)
    throw Error(ErrorKind::kInstantiation, std::string(kName) + ": tile_ci splits in 2");
  const te::IterVar r = acc.reduce_axis(1), sx = acc.reduce_axis(2);
  std::vector<te::IterVar> order = {acc.axis(0)};
  switch (cfg["reduce_order"].as_int()) {
    case 0:
      order.insert(order.end(), {cs[0], cs[1], r, sx, cb});
      break;
    case 1:
      order.insert(order.end(), {cs[0], r, sx, cs[1], cb});
      break;
    case 2:
      order.insert(order.end(), {cs[0], r, cs[1], sx, cb});
      break;
    default:
      throw Error(ErrorKind::kInstantiation, std::string(kName) + ": reduce_order is 0, 1 or 2");
  }
  // Oc blocks innermost of the tile: each broadcast input feeds tile_ko FMAs back to back, so
  // it dies at once instead of being kept (or spilled) until the next oc block's pass.
  order.insert(order.end(), {acc.axis(2), acc.axis(3), acc.axis(1), acc.axis(4)});
  acc.reorder(order);
  acc.unroll(acc.axis(1));
  acc.unroll(acc.axis(2));
  acc.unroll(acc.axis(3));
  acc.vectorize(acc.axis(4));
  unroll_if(acc, cb, cfg["unroll_cb"].as_int() != 0);
  unroll_if(acc, sx, cfg["unroll_s"].as_int() != 0);

  if (t.padded.defined()) schedule_blocked_pad(s[t.padded], cfg["pad_inline"].as_int() != 0, par);
  apply_skip_taps(s, cfg);
  return Instantiated{s, t.args()};
}

}  // namespace

void register_conv_nchwc_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = kName;
  d.doc =
      "channel-blocked conv2d: O[N,K/ocb,OH,OW,ocb] = sum I[N,C/icb,H,W,icb] * "
      "W[K/ocb,C/icb,R,S,icb,ocb] "
      "(stride, pad, dilation; blocks rounded up, padding lanes ignored on input and zero on "
      "output; "
      "epilogue: bias[K/ocb,ocb], residual like O, an activation)";
  d.args = {
      int_arg("N", "1", "batch"),
      int_arg("C", "", "input channels"),
      int_arg("H", "", "input height"),
      int_arg("W", "", "input width"),
      int_arg("K", "", "output channels"),
      int_arg("R", "3", "kernel height"),
      int_arg("S", "3", "kernel width"),
      int_arg("stride", "1", "stride (both axes)"),
      int_arg("pad", "0", "zero padding (both sides, both axes)", 0),
      int_arg("dilation", "1", "dilation (both axes)"),
      int_arg(
          "ic_block", "0",
          "input channels per block (innermost of I); 0: C up to 16, else 16 or 8 (less padding)",
          0),
      int_arg("oc_block", "0",
              "output channels per block (innermost of W and O); 0: chosen from K like ic_block",
              0)};
  for (ArgSpec& e :
       epilogue_args({.bias_doc = "bias[K/ocb,ocb]", .residual_doc = "residual like O"}))
    d.args.push_back(std::move(e));
  d.args.push_back(dtype_arg());
  d.resolve = [](WorkloadArgs& a) {
    resolve_channel_blocks(a);
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
    return direct_conv_flop(sh.n, sh.k, sh.oh, sh.ow, sh.c, sh.r * sh.s, sh.epilogue.flop());
  };
  d.define = [](const WorkloadArgs& a, const TargetTraits& target, ConfigSpace& space) {
    define_space(shape_of(a), dtype_of(a.get("dtype")).bits, target, space);
  };
  d.fallback = [](const WorkloadArgs& a, const TargetTraits& target, const ConfigSpace& space) {
    return fallback(shape_of(a), dtype_of(a.get("dtype")).bits, target, space);
  };
  d.apply = [](const WorkloadArgs& a, const TargetTraits&, const Config& cfg) {
    return apply(a, cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
