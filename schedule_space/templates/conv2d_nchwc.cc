// Built-in channel-blocked conv2d (NCHWc, TVM's conv2d_NCHWc for x86): input, weights and output
// are already blocked by channels, so an output-channel block is the vector lane dimension. The
// micro-kernel keeps (oc blocks) x (rows) x (columns) accumulator vectors in registers; per
// reduction step it loads one weight vector per oc block and broadcasts one input scalar per
// output pixel.
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/epilogue.h"
#include "schedule_space/templates/nchwc_conv_space.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "conv2d_nchwc";

// Channel blocks: ic_block and oc_block of 0 (the default) are auto_channel_block's choice.

struct Shape : Window {
  int64_t k, icb, ocb;
  Epilogue epilogue;  // what follows the convolution in the same tile loop
  // The residual's nearest upsampling: it is [N][ceil(K/ocb)][ceil(OH/f)][ceil(OW/f)][ocb], read at
  // (y / f, x / f). An FPN adds its upsampled top-down map to a 1x1 lateral conv: read in place,
  // the upsampled map is never written (frontend's EpilogueFuser takes the Resize).
  int64_t residual_upsample = 1;
  // Blocks, the last one partly padding when the channels are not a block multiple.
  int64_t cblocks() const { return ceil_div(c, icb); }
  int64_t kblocks() const { return ceil_div(k, ocb); }
};

// The shape of a workload (blocks resolved); throws Error(kInvalidArgument) when the window does
// not fit.
Shape shape_of(const WorkloadArgs& a) {
  Shape s{};
  static_cast<Window&>(s) = window_of(kName, a);
  s.k = a.get_int("K");
  s.icb = a.get_int("ic_block");
  s.ocb = a.get_int("oc_block");
  if (s.icb == 0) s.icb = auto_channel_block(s.c);
  if (s.ocb == 0) s.ocb = auto_channel_block(s.k);
  s.epilogue = epilogue_of(a);
  s.residual_upsample = a.get_int("residual_upsample");
  if (s.residual_upsample != 1 && !s.epilogue.residual)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(kName) + ": residual_upsample needs an epilogue with a residual");
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
// bias[ceil(K/ocb)][ocb], residual and O [N][ceil(K/ocb)][OH][OW][ocb] (the residual smaller by
// residual_upsample, see Shape). Channel c sits in block
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
  const int64_t f = sh.residual_upsample;
  t.epilogue =
      epilogue_inputs(sh.epilogue, {sh.kblocks(), sh.ocb},
                      {sh.n, sh.kblocks(), ceil_div(sh.oh, f), ceil_div(sh.ow, f), sh.ocb}, dt);
  te::Tensor padded = t.in;
  if (sh.padded()) {
    padded = pad_blocked_window(t.in, sh, sh.cblocks(), sh.icb, dt);
    t.padded = padded;
  }
  // One reduction axis over the C channels: the schedule splits it by icb into (block, lane),
  // dividing or with a guarded tail block.
  const te::IterVar rc = te::reduce_axis({0, sh.c}, "rc");
  const te::IterVar r = te::reduce_axis({0, sh.r}, "r");
  const te::IterVar s = te::reduce_axis({0, sh.s}, "s");
  const te::Tensor w = t.weight;
  const te::Expr st(sh.stride), stw(sh.stride_w), d(sh.dilation), icb(sh.icb);
  const bool masked = sh.k % sh.ocb != 0;
  const bool staged = masked || !sh.epilogue.empty();
  const te::Tensor conv = te::compute(
      out_shape,
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        return te::sum(
            padded(n, rc.var / icb, y * st + r.var * d, x * stw + s.var * d, rc.var % icb) *
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
  const auto residual_at = [&](const te::Var& n, const te::Var& ko, const te::Var& y,
                               const te::Var& x, const te::Var& kb) {
    if (f == 1) return res(n, ko, y, x, kb);
    return res(n, ko, y / te::Expr(f), x / te::Expr(f), kb);
  };
  t.out = te::compute(
      out_shape,
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        te::Expr v =
            sh.epilogue.apply(conv(n, ko, y, x, kb), bias.defined() ? bias(ko, kb) : te::Expr(),
                              res.defined() ? residual_at(n, ko, y, x, kb) : te::Expr(), dt);
        if (masked) v = te::select(ko * te::Expr(sh.ocb) + kb < te::Expr(sh.k), v, zero);
        return v;
      },
      "conv");
  return t;
}

// The space's dimensions: accumulator vectors per oc block from the target's lanes.
NchwcConvDims dims_of(const Shape& sh, int dtype_bits, const TargetTraits& target) {
  return {sh.kblocks(), sh.oh, sh.ow, sh.cblocks(),
          ceil_div(sh.ocb, target.vector_lanes(dtype_bits))};
}

// The shared NCHWc conv space (nchwc_conv_space.h) with unroll_cb, the ic_block-long lane loop,
// as the inner unroll, pad_inline, and then:
//   skip_taps 0/1 (with pad_inline 1): te skips the padding taps and runs interior tiles
//            unguarded (skip_padding_taps)
void define_space(const Shape& sh, int dtype_bits, const TargetTraits& target, ConfigSpace& space) {
  define_nchwc_conv_space(
      dims_of(sh, dtype_bits, target),
      {.unroll_inner = "unroll_cb", .pad_inline_knob = true, .padded = sh.padded()}, target, space);
  define_skip_taps(space, sh.padded());
}

// Strided 3x3 windows on x86 with 32 vector registers and one vector per oc block (AVX-512,
// float32): one oc block x two rows x the columns that fill all but four registers (2 x 14 on
// ResNet-18's stride-2 28x28 and 14x14 outputs), the ic_block lane loop unrolled and the padding
// taps skipped. On a stride-2 ResNet-18 layer config_race --library put that tile at 1.02-1.06x
// oneDNN, and two or more oc blocks with the lane loop unrolled at 0.65-0.73x; the general
// fallback (2 x 2 x 7, rolled, padded once) differs from it in the oc blocks, the columns,
// unroll_cb and skip_taps. Rows take a tail where the output height has few divisors (7 rows:
// 2 + 2 + 2 + 1), as the space offers them.
bool strided_tile(const Shape& sh, const NchwcConvDims& d, const TargetTraits& target) {
  return sh.stride > 1 && sh.r == 3 && sh.s == 3 && !target.is_aarch64() &&
         target.vector_registers() == 32 && d.vectors == 1;
}

// Padded stride-1 3x3 windows on the same targets keep the shared tile (2 oc blocks x 2 rows x 7
// columns on ResNet-18's layers) with the padding inlined and its taps skipped. On ResNet-18's
// four stride-1 3x3 layers config_race --library put it at 1.005-1.041x oneDNN at one thread and
// 0.98-1.09x at two, where the tile padded once ran at 0.93-1.01x and 0.85-1.01x: the padding
// taps are 2-18% of the nominal ones, and the tile is otherwise at the FMA peak.
bool skip_padding_taps(const Shape& sh, const NchwcConvDims& d, const TargetTraits& target) {
  return sh.stride == 1 && sh.padded() && sh.r == 3 && sh.s == 3 && !target.is_aarch64() &&
         target.vector_registers() == 32 && d.vectors == 1;
}

// The shared fallback (nchwc_conv_fallback), with strided_tile's tile where it applies.
Config fallback(const Shape& sh, int dtype_bits, const TargetTraits& target,
                const ConfigSpace& space) {
  const NchwcConvDims d = dims_of(sh, dtype_bits, target);
  std::vector<uint64_t> digits = nchwc_conv_fallback_digits(d, target, space);
  if (skip_padding_taps(sh, d, target))
    for (const char* knob : {"pad_inline", "skip_taps"}) {
      const auto at = static_cast<size_t>(space.knob_position(knob));
      digits[at] = closest_int(space.knob(at), 1);
    }
  if (strided_tile(sh, d, target)) {
    digits[0] = closest_split(space.knob(0), {1});
    digits[1] = closest_split(space.knob(1), {2});
    const int64_t rows = space.knob(1).entity(digits[1]).values.back();
    digits[2] = widest_split_at_most(space.knob(2), (target.vector_registers() - 4) / rows);
    // Without padding pad_inline and skip_taps offer only 0.
    for (const char* knob : {"unroll_cb", "pad_inline", "skip_taps"}) {
      const auto at = static_cast<size_t>(space.knob_position(knob));
      digits[at] = closest_int(space.knob(at), 1);
    }
  }
  return pick_fallback(space, digits);
}

Instantiated apply(const WorkloadArgs& a, const TargetTraits& target, const Config& cfg) {
  const Shape sh = shape_of(a);
  const int dtype_bits = dtype_of(a.get("dtype")).bits;
  Tensors t = make_tensors(a);
  te::Schedule s = te::create_schedule({t.out});
  const te::Tensor acc_t = t.conv.defined() ? t.conv : s.cache_write(t.out, "local");
  const bool par = cfg["parallel"].as_int() != 0;
  const NchwcConvDims d = dims_of(sh, dtype_bits, target);
  const te::IterVar tile = schedule_nchwc_output(s[t.out], cfg, d, kName);

  // The register tile: reduction loops outside, the (y, x, ko) accumulators unrolled and the
  // oc block vectorized innermost, so every accumulator is a register for the whole reduction.
  te::Stage acc = s[acc_t];
  acc.compute_at(s[t.out], tile);
  // Channels -> (block, lane); the lane loop is the old cb axis. A last block that is only partly
  // channels runs under a guard (peeled off by the lowering).
  auto [ci, cb] = acc.split(acc.reduce_axis(0), sh.icb);
  const te::IterVar r = acc.reduce_axis(1), sx = acc.reduce_axis(2);
  order_nchwc_accumulator(acc, ci, r, sx, cb, {acc.axis(4)}, cfg, d, kName);
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
      "epilogue: bias[K/ocb,ocb], residual like O or upsampled into it, an activation)";
  d.args = {
      int_arg("N", "1", "batch"),
      int_arg("C", "", "input channels"),
      int_arg("H", "", "input height"),
      int_arg("W", "", "input width"),
      int_arg("K", "", "output channels"),
      int_arg("R", "3", "kernel height"),
      int_arg("S", "3", "kernel width"),
      int_arg("stride", "1", "stride (both axes, or the rows' with stride_w)"),
      int_arg("pad", "0", "zero padding (every side, or the rows above with pad_left, ...)", 0),
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
  d.args.push_back({.name = "residual_upsample",
                    .default_value = "1",
                    .doc = "the residual's nearest upsampling factor: it is smaller by it in both "
                           "spatial axes and read at (y / f, x / f)",
                    .max_value = 16,
                    .key_omits_default = true});
  d.args.push_back(dtype_arg());
  d.args.push_back(stride_w_arg());
  for (ArgSpec& p : side_pad_args()) d.args.push_back(std::move(p));
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
  d.apply = [](const WorkloadArgs& a, const TargetTraits& target, const Config& cfg) {
    return apply(a, target, cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
