#include "schedule_space/templates/nchwc_dot_conv.h"

#include "schedule_space/templates/common.h"
#include "support/error.h"
#include "te/simplify.h"

namespace ktune::schedule_space::templates {

te::Expr DotConv::product(const te::Expr& d, const te::Expr& wt) const {
  return (shift_data ? te::u8_factor(d, true) : te::cast(acc, d)) * te::cast(acc, wt);
}

int64_t auto_dot_block(int64_t c, int64_t depth) {
  if (c <= 16) return c;
  for (int64_t b : {16, 8}) {
    if (c % b == 0) return b;
  }
  return depth;
}

DotConv dot_conv_of(const std::string& tmpl, const WorkloadArgs& a, int64_t depth,
                    te::DataType data, te::DataType weight, te::DataType acc,
                    const te::Expr& pad_value) {
  DotConv s{};
  static_cast<Window&>(s) = window_of(tmpl, a, /*has_dilation=*/false);
  s.k = a.get_int("K");
  s.icb = a.get_int("ic_block");
  s.depth = depth;
  s.data = data, s.weight = weight, s.acc = acc;
  s.pad_value = pad_value;
  if (s.icb == 0) s.icb = auto_dot_block(s.c, depth);
  const std::string d = std::to_string(depth);
  if (s.c % depth != 0)
    throw Error(ErrorKind::kInvalidArgument, tmpl + ": C=" + std::to_string(s.c) +
                                                 " is not a multiple of " + d +
                                                 " (pad the channels with zero weights)");
  if (s.icb % depth != 0 || s.c % s.icb != 0)
    throw Error(ErrorKind::kInvalidArgument, tmpl + ": ic_block=" + std::to_string(s.icb) +
                                                 " must be a multiple of " + d +
                                                 " that divides C=" + std::to_string(s.c));
  return s;
}

std::vector<ArgSpec> dot_conv_args(int64_t depth, const char* pad_doc) {
  const std::string d = std::to_string(depth);
  // ArgSpec keeps its own copies of the texts.
  const std::string c_doc = "input channels (a multiple of " + d + ")";
  const std::string icb_doc = "input channels per block (innermost of I), a multiple of " + d +
                              " dividing C; 0: C up to 16, else the largest of 16, 8, " + d +
                              " dividing C";
  return {int_arg("N", "1", "batch"),          int_arg("C", "", c_doc.c_str()),
          int_arg("H", "", "input height"),    int_arg("W", "", "input width"),
          int_arg("K", "", "output channels"), int_arg("R", "3", "kernel height"),
          int_arg("S", "3", "kernel width"),   int_arg("stride", "1", "stride (both axes)"),
          int_arg("pad", "0", pad_doc, 0),     int_arg("ic_block", "0", icb_doc.c_str(), 0)};
}

DotConvInputs dot_conv_inputs(const DotConv& d) {
  DotConvInputs t;
  t.in = te::placeholder({d.n, d.cblocks(), d.h, d.w, d.icb}, d.data, "I");
  t.weight = te::placeholder(
      {d.kblocks(), d.cblocks(), d.r, d.s, d.icb / d.depth, kDotLanes, d.depth}, d.weight, "W");
  t.padded = t.in;
  if (d.pad > 0)
    t.padded = pad_blocked_input(t.in, d.n, d.cblocks(), d.h, d.w, d.icb, d.pad, d.data, 0, 0,
                                 d.pad_value);
  return t;
}

namespace {

// The NCHWc conv space's dimensions: one 16-lane accumulator per oc block.
NchwcConvDims dims_of(const DotConv& d, const TargetTraits& target) {
  return {d.kblocks(), d.oh, d.ow, d.cblocks(),
          ceil_div(kDotLanes, target.vector_lanes(d.acc.bits))};
}

// The correctness reference's accumulator: one reduction over the C channels, untiled.
te::Tensor reference_accumulator(const DotConv& d, const DotConvInputs& t,
                                 const std::string& name) {
  const te::IterVar rc = te::reduce_axis({0, d.c}, "rc");
  const te::IterVar r = te::reduce_axis({0, d.r}, "r");
  const te::IterVar s = te::reduce_axis({0, d.s}, "s");
  const te::Tensor p = t.padded, w = t.weight;
  const te::Expr st(d.stride), icb(d.icb), depth(d.depth);
  return te::compute(
      d.out_shape(),
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        const te::Expr cb = rc.var / icb, cl = rc.var % icb;
        return te::sum(d.product(p(n, cb, y * st + r.var, x * st + s.var, cl),
                                 w(ko, cb, r.var, s.var, cl / depth, kb, cl % depth)),
                       {rc, r, s});
      },
      name);
}

// The tiled accumulator "conv_acc": the reduction with the depth channels of a group innermost,
// under the 16 lanes of an oc block (the loop nest the intrinsic replaces).
te::Tensor tiled_accumulator(const DotConv& d, const DotConvInputs& t) {
  const te::IterVar ci = te::reduce_axis({0, d.cblocks()}, "ci");
  const te::IterVar r = te::reduce_axis({0, d.r}, "r");
  const te::IterVar sx = te::reduce_axis({0, d.s}, "s");
  const te::IterVar cq = te::reduce_axis({0, d.icb / d.depth}, "cq");
  const te::IterVar kl = te::reduce_axis({0, d.depth}, "kl");
  const te::Tensor p = t.padded, w = t.weight;
  const te::Expr st(d.stride), depth(d.depth);
  return te::compute(
      d.out_shape(),
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        return te::sum(
            d.product(p(n, ci.var, y * st + r.var, x * st + sx.var, cq.var * depth + kl.var),
                      w(ko, ci.var, r.var, sx.var, cq.var, kb, kl.var)),
            {ci, r, sx, cq, kl});
      },
      "conv_acc");
}

// The output stage "conv" over accumulator `acc`: the epilogue, lanes past K zeroed.
te::Tensor output_stage(const DotConv& d, const DotConvEpilogue& e, const te::Tensor& acc) {
  const bool masked = d.k % kDotLanes != 0;
  return te::compute(
      d.out_shape(),
      [&](te::Var n, te::Var ko, te::Var y, te::Var x, te::Var kb) {
        te::Expr v = e.value(acc(n, ko, y, x, kb), {n, ko, y, x, kb});
        if (masked)
          v = te::select(ko * te::Expr(kDotLanes) + kb < te::Expr(d.k), v,
                         te::cast(e.out, te::Expr(0)));
        return v;
      },
      "conv");
}

// Whether the padding taps can be skipped: the padding is there, is zero (a zero tap adds nothing;
// a data zero point would add zero_point * w per tap, which the requantize bias counts for every
// tap), the data is not shifted (a shifted zero tap adds -128 * w), and the intrinsic reads it
// (tensorize guards the dot; the widening code would keep a select per tap).
bool can_skip_taps(const DotConv& d, bool has_intrin) {
  if (d.pad == 0 || d.shift_data || !has_intrin) return false;
  const te::Expr v = te::simplify(d.pad_value);
  if (const te::FloatImm* f = v.as<te::FloatImm>()) return f->value == 0;
  return te::is_const_int(v, 0);
}

// The knob after the NCHWc conv space's: skip_taps 0/1 (where can_skip_taps): inline the padding
// into the reduction and run the dot only for the taps inside the input (interior tiles without
// a guard), or pad once. Configs logged before it mean 0.
void define_skip_taps_knob(ConfigSpace& space, bool skippable) {
  space.define_knob("skip_taps", skippable ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  space.set_legacy_value("skip_taps", 0);
}

bool skips_taps(const Config& cfg) {
  const Entity* e = cfg.find("skip_taps");
  return e && e->as_int() != 0;
}

// Schedules `out` (reading accumulator `acc` at its element) as the NCHWc conv space says.
void schedule_dot_conv(te::Schedule& s, const DotConv& d, const DotConvInputs& t,
                       const te::Tensor& out, const te::Tensor& acc_t, const Config& cfg,
                       const TargetTraits& target, const te::TensorIntrin* intrin,
                       const std::string& tmpl) {
  const NchwcConvDims dims = dims_of(d, target);
  const te::IterVar tile = schedule_nchwc_output(s[out], cfg, dims, tmpl);
  // The register tile, as conv2d_nchwc's: reduction loops outside, the (y, x, ko) accumulators
  // unrolled, the oc block innermost (tensorized, or vectorized under the unrolled group).
  te::Stage acc = s[acc_t];
  acc.compute_at(s[out], tile);
  const te::IterVar rr = acc.reduce_axis(1), ss = acc.reduce_axis(2), qq = acc.reduce_axis(3),
                    ll = acc.reduce_axis(4);
  const std::vector<te::IterVar> innermost = intrin ? std::vector<te::IterVar>{acc.axis(4), ll}
                                                    : std::vector<te::IterVar>{ll, acc.axis(4)};
  order_nchwc_accumulator(acc, acc.reduce_axis(0), rr, ss, qq, innermost, cfg, dims, tmpl);
  unroll_if(acc, qq, cfg["unroll_cq"].as_int() != 0);
  unroll_if(acc, ss, cfg["unroll_s"].as_int() != 0);
  if (intrin) {
    acc.tensorize(acc.axis(4), *intrin);
  } else {
    // Widening multiply-adds: 16 lanes per block, the channels of a group unrolled.
    acc.unroll(ll);
    acc.vectorize(acc.axis(4));
  }
  if (d.pad > 0) schedule_blocked_pad(s[t.padded], skips_taps(cfg), cfg["parallel"].as_int() != 0);
}

// Padded stride-1 3x3 windows of uint8 data through vpdpbusd (AVX-512 VNNI): the shared tile
// with its padding taps skipped, and two columns instead of seven where the output width is
// even. On ResNet-18's four stride-1 3x3 layers config_race --fallback put 2 oc blocks x 2 rows x
// 2 columns with skip_taps at 1.04-1.10x the shared tile padded once at one thread and 1.07-1.14x
// at two; on 7x7 (odd width) the shared tile with skip_taps ran at 1.11x and 1.10x. unroll_s
// added nothing.
bool vnni_padded_3x3(const DotConv& c, const TargetTraits& target, bool has_intrin) {
  return c.stride == 1 && c.r == 3 && c.s == 3 && can_skip_taps(c, has_intrin) &&
         c.data == te::UInt(8) && !target.is_aarch64() && target.vector_registers() == 32;
}

Config fallback(const DotConv& c, const TargetTraits& target, const ConfigSpace& space,
                bool has_intrin) {
  const NchwcConvDims dims = dims_of(c, target);
  std::vector<uint64_t> digits = nchwc_conv_fallback_digits(dims, target, space);
  if (vnni_padded_3x3(c, target, has_intrin)) {
    const auto at = static_cast<size_t>(space.knob_position("skip_taps"));
    digits[at] = closest_int(space.knob(at), 1);
    if (c.ow % 2 == 0) digits[2] = closest_split(space.knob(2), {2});
  }
  return pick_fallback(space, digits);
}

// Kernel ABI order: I, W, the epilogue's inputs, O.
std::vector<te::Tensor> kernel_args(const DotConvInputs& t, const DotConvEpilogue& e,
                                    const te::Tensor& out) {
  std::vector<te::Tensor> v = {t.in, t.weight};
  v.insert(v.end(), e.inputs.begin(), e.inputs.end());
  v.push_back(out);
  return v;
}

ComputeDef compute(const DotConv& d, const DotConvInputs& t, const DotConvEpilogue& e) {
  const bool staged = !e.none || d.k % kDotLanes != 0;
  const te::Tensor acc = reference_accumulator(d, t, staged ? "conv_acc" : "conv");
  const te::Tensor out = staged ? output_stage(d, e, acc) : acc;
  return ComputeDef{kernel_args(t, e, out), {out}};
}

Instantiated apply(const DotConv& d, const DotConvInputs& t, const DotConvEpilogue& e,
                   const Config& cfg, const TargetTraits& target, const te::TensorIntrin* intrin,
                   const std::string& tmpl) {
  const te::Tensor acc = tiled_accumulator(d, t);
  const te::Tensor out = output_stage(d, e, acc);
  te::Schedule s = te::create_schedule({out});
  schedule_dot_conv(s, d, t, out, acc, cfg, target, intrin, tmpl);
  return Instantiated{s, kernel_args(t, e, out)};
}

}  // namespace

void set_dot_conv_template(TemplateDef& d, DotConvParts (*parts_of)(const WorkloadArgs&),
                           const te::TensorIntrin& (*intrin)(const DotConv&),
                           bool (*has_intrin)(const TargetTraits&, const DotConv&)) {
  d.compute = [parts_of](const WorkloadArgs& a) {
    const DotConvParts p = parts_of(a);
    return compute(p.conv, p.in, p.epilogue);
  };
  d.define = [parts_of, has_intrin](const WorkloadArgs& a, const TargetTraits& target,
                                    ConfigSpace& space) {
    const DotConv c = parts_of(a).conv;
    define_nchwc_conv_space(dims_of(c, target), {.unroll_inner = "unroll_cq"}, target, space);
    define_skip_taps_knob(space, can_skip_taps(c, has_intrin(target, c)));
  };
  d.fallback = [parts_of, has_intrin](const WorkloadArgs& a, const TargetTraits& target,
                                      const ConfigSpace& space) {
    const DotConv c = parts_of(a).conv;
    return fallback(c, target, space, has_intrin(target, c));
  };
  const std::string name = d.name;
  d.apply = [parts_of, intrin, has_intrin, name](const WorkloadArgs& a, const TargetTraits& target,
                                                 const Config& cfg) {
    const DotConvParts p = parts_of(a);
    return apply(p.conv, p.in, p.epilogue, cfg, target,
                 has_intrin(target, p.conv) ? &intrin(p.conv) : nullptr, name);
  };
}

}  // namespace ktune::schedule_space::templates
