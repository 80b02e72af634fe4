// The int8 channel-blocked conv2d conv2d_nchwc_u8s8s32 (TVM's conv2d_NCHWc_int8): uint8 data
// [N][C/icb][H][W][icb], int8 weights [K/16][C/icb][R][S][icb/4][16][4], int32 accumulators,
// tensorized with dot_16x4_u8s8s32 on AVX-512 VNNI and widening vector code elsewhere; optionally
// requantized to uint8 or int8 in the tile loop. Its space and register tile follow conv2d_nchwc.
#include <algorithm>

#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/requant.h"
#include "support/error.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "conv2d_nchwc_u8s8s32";
// Output channels per block: the 16 int32 lanes of one vpdpbusd.
constexpr int64_t kOcb = 16;
constexpr int64_t kMaxTileKo = 4;
constexpr int64_t kMaxTileOh = 4;
constexpr int64_t kMaxTileOw = 32;

struct Shape {
  int64_t n, c, h, w, k, r, s, stride, pad, icb, oh, ow;
  int64_t data_zero_point;  // the padding value
  Requant rq;
  int64_t cblocks() const { return c / icb; }
  int64_t kblocks() const { return ceil_div(k, kOcb); }
  std::vector<int64_t> out_shape() const { return {n, kblocks(), oh, ow, kOcb}; }
};

// The input block of C channels when ic_block is 0: all of them up to 16, else the largest of
// 16, 8, 4 that divides C (the reduction runs over whole blocks of whole 4-channel groups).
int64_t auto_int8_block(int64_t c) {
  if (c <= 16) return c;
  for (int64_t b : {16, 8}) {
    if (c % b == 0) return b;
  }
  return 4;
}

// Throws Error(kInvalidArgument) when C is not a multiple of 4, the input block does not divide
// C or is not a multiple of 4, or the window does not fit.
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
  s.icb = a.get_int("ic_block");
  if (s.icb == 0) s.icb = auto_int8_block(s.c);
  s.data_zero_point = a.get_int("data_zero_point");
  s.rq = requant_of(a);
  if (s.c % 4 != 0)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(kName) + ": C=" + std::to_string(s.c) +
                    " is not a multiple of 4 (pad the channels with zero weights)");
  if (s.icb % 4 != 0 || s.c % s.icb != 0)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(kName) + ": ic_block=" + std::to_string(s.icb) +
                    " must be a multiple of 4 that divides C=" + std::to_string(s.c));
  s.oh = window_out_extent(kName, s.h, s.r, s.stride, s.pad, 1);
  s.ow = window_out_extent(kName, s.w, s.s, s.stride, s.pad, 1);
  return s;
}

struct Tensors {
  te::Tensor in, weight, padded, out;  // padded: the input itself without padding
  RequantInputs rq;
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> v = {in, weight};
    rq.append_to(v);
    v.push_back(out);
    return v;
  }
};

// I uint8 [N][C/icb][H][W][icb], W int8 [ceil(K/16)][C/icb][R][S][icb/4][16][4] (input channel c,
// output channel k at [k/16][c/icb][r][s][c%icb/4][k%16][c%4]), the epilogue's bias and scale
// [ceil(K/16)][16], O [N][ceil(K/16)][OH][OW][16] int32 or the requantized type. The padding
// taps read data_zero_point (the data's zero point, so that the convolution of x - zero_point is
// this one less zero_point * sum(W), a per-channel constant). Output lanes past K are zeros.
Tensors make_inputs(const Shape& sh) {
  Tensors t;
  t.in = te::placeholder({sh.n, sh.cblocks(), sh.h, sh.w, sh.icb}, te::UInt(8), "I");
  t.weight = te::placeholder({sh.kblocks(), sh.cblocks(), sh.r, sh.s, sh.icb / 4, kOcb, 4},
                             te::Int(8), "W");
  t.rq = requant_inputs(sh.rq, {sh.kblocks(), kOcb});
  t.padded = t.in;
  if (sh.pad > 0)
    t.padded = pad_blocked_input(t.in, sh.n, sh.cblocks(), sh.h, sh.w, sh.icb, sh.pad, te::UInt(8),
                                 0, 0, te::cast(te::UInt(8), te::Expr(sh.data_zero_point)));
  return t;
}

te::Expr widened_product(const te::Expr& a, const te::Expr& b) {
  return te::cast(te::Int(32), a) * te::cast(te::Int(32), b);
}

// The output stage over accumulator `acc`: requantized, lanes past K zeroed.
te::Tensor output_of(const Shape& sh, const Tensors& t, const te::Tensor& acc) {
  const te::DataType dt = sh.rq.on() ? sh.rq.out : te::Int(32);
  const bool masked = sh.k % kOcb != 0;
  return te::compute(
      sh.out_shape(),
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        te::Expr v = requant_value(sh.rq, t.rq, acc(n, ko, y, x, kb), {ko, kb});
        if (masked)
          v = te::select(ko * te::Expr(kOcb) + kb < te::Expr(sh.k), v, te::cast(dt, te::Expr(0)));
        return v;
      },
      "conv");
}

// The correctness reference: one reduction over the C channels, untiled.
Tensors reference_tensors(const Shape& sh) {
  Tensors t = make_inputs(sh);
  const te::IterVar rc = te::reduce_axis({0, sh.c}, "rc");
  const te::IterVar r = te::reduce_axis({0, sh.r}, "r");
  const te::IterVar s = te::reduce_axis({0, sh.s}, "s");
  const te::Tensor p = t.padded, w = t.weight;
  const te::Expr st(sh.stride), icb(sh.icb), four(4);
  const bool staged = sh.rq.on() || sh.k % kOcb != 0;
  const te::Tensor acc = te::compute(
      sh.out_shape(),
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        const te::Expr cb = rc.var / icb, cl = rc.var % icb;
        return te::sum(widened_product(p(n, cb, y * st + r.var, x * st + s.var, cl),
                                       w(ko, cb, r.var, s.var, cl / four, kb, cl % four)),
                       {rc, r, s});
      },
      staged ? "conv_acc" : "conv");
  t.out = staged ? output_of(sh, t, acc) : acc;
  return t;
}

// Accumulator vectors of one 16-lane int32 oc block.
int64_t vectors_per_block(const TargetTraits& target) {
  return ceil_div(kOcb, target.vector_lanes(32));
}

// Knobs (stable names), as conv2d_nchwc's with cq, the icb/4 loop of 4-channel groups, in place
// of its cb:
//   tile_ko, tile_oh, tile_ow  splits in 2 [outer, register blocks <= 4 / rows <= 4 / columns <=
//   32] tile_ci  split of the input channel blocks in 2 [outer, inner] reduce_order  0: ci_o, ci_i,
//   r, s, cq   1: ci_o, r, s, ci_i, cq   2: ci_o, r, ci_i, s, cq unroll_cq 0/1, unroll_s 0/1
//   parallel 0/1 (only 0 on one core): the fused (batch, ko outer, oh outer) loop
// The padding is always computed once: the intrinsic reads plain loads, not a guarded select.
// Constraint: the accumulators fit TargetTraits::accumulator_budget, as conv2d_nchwc's.
void define_space(const Shape& sh, const TargetTraits& target, ConfigSpace& space) {
  const int64_t vectors = vectors_per_block(target);
  space.define_split("tile_ko",
                     {.extent = sh.kblocks(), .num_outputs = 2, .max_innermost = kMaxTileKo});
  space.define_split("tile_oh", {.extent = sh.oh, .num_outputs = 2, .max_innermost = kMaxTileOh});
  space.define_split("tile_ow", {.extent = sh.ow, .num_outputs = 2, .max_innermost = kMaxTileOw});
  space.define_split("tile_ci", {.extent = sh.cblocks(), .num_outputs = 2});
  space.define_knob("reduce_order", std::vector<int64_t>{0, 1, 2});
  space.define_knob("unroll_cq", std::vector<int64_t>{0, 1});
  space.define_knob("unroll_s", std::vector<int64_t>{0, 1});
  space.define_knob("parallel",
                    target.cores > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  space.add_constraint("register tile fits the vector registers",
                       [vectors, target](const EntityView& v) {
                         const int64_t weights = v["tile_ko"].values.back() * vectors;
                         return weights * v["tile_oh"].values.back() * v["tile_ow"].values.back() <=
                                target.accumulator_budget(weights);
                       });
}

// conv2d_nchwc's x86 register tile: two oc blocks and two rows when the registers allow, then as
// many columns as fit in all but four registers; all input channels in one reduction pass.
Config fallback(const Shape& sh, const TargetTraits& target, const ConfigSpace& space) {
  const int64_t vectors = vectors_per_block(target);
  const int64_t cap = std::max<int64_t>(1, (target.vector_registers() - 4) / vectors);
  const int64_t pair = cap >= 12 ? 2 : 1;
  const int64_t koi = largest_divisor_at_most(sh.kblocks(), pair);
  const int64_t ohi = largest_divisor_at_most(sh.oh, pair);
  const int64_t owi =
      largest_divisor_at_most(sh.ow, std::min(kMaxTileOw, std::max<int64_t>(1, cap / (koi * ohi))));
  std::vector<uint64_t> d(space.num_knobs(), 0);
  d[0] = closest_split(space.knob(0), {koi});
  d[1] = closest_split(space.knob(1), {ohi});
  d[2] = closest_split(space.knob(2), {owi});
  d[3] = closest_split(space.knob(3), {sh.cblocks()});
  d[4] = closest_int(space.knob(4), 0);
  d[5] = closest_int(space.knob(5), 0);
  d[6] = closest_int(space.knob(6), 0);
  d[7] = closest_int(space.knob(7), target.cores > 1 ? 1 : 0);
  return pick_fallback(space, d);
}

Instantiated apply(const Shape& sh, const TargetTraits& target, const Config& cfg) {
  Tensors t = make_inputs(sh);
  // The reduction with the 4 channels of a group innermost (kl), under the 16 lanes of an oc
  // block: the loop nest dot_16x4_u8s8s32 replaces.
  const te::IterVar ci = te::reduce_axis({0, sh.cblocks()}, "ci");
  const te::IterVar r = te::reduce_axis({0, sh.r}, "r");
  const te::IterVar sx = te::reduce_axis({0, sh.s}, "s");
  const te::IterVar cq = te::reduce_axis({0, sh.icb / 4}, "cq");
  const te::IterVar kl = te::reduce_axis({0, 4}, "kl");
  const te::Tensor p = t.padded, w = t.weight;
  const te::Expr st(sh.stride);
  const te::Tensor acc_t = te::compute(
      sh.out_shape(),
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        return te::sum(widened_product(p(n, ci.var, y * st + r.var, x * st + sx.var,
                                         cq.var * te::Expr(4) + kl.var),
                                       w(ko, ci.var, r.var, sx.var, cq.var, kb, kl.var)),
                       {ci, r, sx, cq, kl});
      },
      "conv_acc");
  t.out = output_of(sh, t, acc_t);

  te::Schedule s = te::create_schedule({t.out});
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

  // The register tile, as conv2d_nchwc's: reduction loops outside, the (y, x, ko) accumulators
  // unrolled, the oc block innermost (tensorized, or vectorized under the unrolled group).
  te::Stage acc = s[acc_t];
  acc.compute_at(out, xs[0]);
  const auto cs = apply_split(acc, acc.reduce_axis(0), cfg["tile_ci"], sh.cblocks());
  if (cs.size() != 2)
    throw Error(ErrorKind::kInstantiation, std::string(kName) + ": tile_ci splits in 2");
  const te::IterVar rr = acc.reduce_axis(1), ss = acc.reduce_axis(2), qq = acc.reduce_axis(3),
                    ll = acc.reduce_axis(4);
  std::vector<te::IterVar> order = {acc.axis(0)};
  switch (cfg["reduce_order"].as_int()) {
    case 0:
      order.insert(order.end(), {cs[0], cs[1], rr, ss, qq});
      break;
    case 1:
      order.insert(order.end(), {cs[0], rr, ss, cs[1], qq});
      break;
    case 2:
      order.insert(order.end(), {cs[0], rr, cs[1], ss, qq});
      break;
    default:
      throw Error(ErrorKind::kInstantiation, std::string(kName) + ": reduce_order is 0, 1 or 2");
  }
  order.insert(order.end(), {acc.axis(2), acc.axis(3), acc.axis(1)});
  if (target.int8_dot)
    order.insert(order.end(), {acc.axis(4), ll});
  else
    order.insert(order.end(), {ll, acc.axis(4)});
  acc.reorder(order);
  acc.unroll(acc.axis(1));
  acc.unroll(acc.axis(2));
  acc.unroll(acc.axis(3));
  unroll_if(acc, qq, cfg["unroll_cq"].as_int() != 0);
  unroll_if(acc, ss, cfg["unroll_s"].as_int() != 0);
  if (target.int8_dot) {
    acc.tensorize(acc.axis(4), te::dot_16x4_u8s8s32());
  } else {
    // Widening multiply-adds: 16 int32 lanes per block, the 4 channels of a group unrolled.
    acc.unroll(ll);
    acc.vectorize(acc.axis(4));
  }
  if (sh.pad > 0) schedule_blocked_pad(s[t.padded], false, par);
  return Instantiated{s, t.args()};
}

}  // namespace

void register_conv_nchwc_int8_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = kName;
  d.doc =
      "int8 channel-blocked conv2d: O[N,K/16,OH,OW,16] (int32) = sum I[N,C/icb,H,W,icb] (uint8) * "
      "W[K/16,C/icb,R,S,icb/4,16,4] (int8) (stride, pad with data_zero_point; output lanes past K "
      "zero): VNNI on AVX-512, widening multiply-adds elsewhere; out=u8|s8 requantizes with bias, "
      "scale, zero_point";
  d.args = {
      int_arg("N", "1", "batch"),
      int_arg("C", "", "input channels (a multiple of 4)"),
      int_arg("H", "", "input height"),
      int_arg("W", "", "input width"),
      int_arg("K", "", "output channels"),
      int_arg("R", "3", "kernel height"),
      int_arg("S", "3", "kernel width"),
      int_arg("stride", "1", "stride (both axes)"),
      int_arg("pad", "0", "padding (both sides, both axes), filled with data_zero_point", 0),
      int_arg("ic_block", "0",
              "input channels per block (innermost of I), a multiple of 4 dividing C; 0: C up to "
              "16, else the largest of 16, 8, 4 dividing C",
              0)};
  ArgSpec zp = int_arg("data_zero_point", "0", "the uint8 value of the padding taps", 0);
  zp.max_value = 255;
  zp.key_omits_default = true;
  d.args.push_back(zp);
  for (ArgSpec& a : requant_args("[K/16,16]")) d.args.push_back(std::move(a));
  d.resolve = [](WorkloadArgs& a) {
    if (a.get_int("ic_block") == 0) a.set_int("ic_block", auto_int8_block(a.get_int("C")));
  };
  d.check = [](const WorkloadArgs& a) {
    check_requant(kName, a);
    shape_of(a);
  };
  d.compute = [](const WorkloadArgs& a) {
    const Tensors t = reference_tensors(shape_of(a));
    return ComputeDef{t.args(), {t.out}};
  };
  d.flop = [](const WorkloadArgs& a) {
    const Shape sh = shape_of(a);
    return direct_conv_flop(sh.n, sh.k, sh.oh, sh.ow, sh.c, sh.r * sh.s, 0);
  };
  d.define = [](const WorkloadArgs& a, const TargetTraits& target, ConfigSpace& space) {
    define_space(shape_of(a), target, space);
  };
  d.fallback = [](const WorkloadArgs& a, const TargetTraits& target, const ConfigSpace& space) {
    return fallback(shape_of(a), target, space);
  };
  d.apply = [](const WorkloadArgs& a, const TargetTraits& target, const Config& cfg) {
    return apply(shape_of(a), target, cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
