// The int8 channel-blocked depthwise conv2d depthwise_conv2d_nchwc_u8s8s32: uint8 data
// [N][C/16][H][W][16] (conv2d_nchwc_u8s8s32's output layout), int8 weights [C/16][R][S][16],
// int32 accumulators; optionally requantized to uint8 or int8 in the tile loop. A depthwise
// convolution has no reduction over channels, so a dot instruction's four bytes per lane can only
// sum taps: with the dot_taps knob (windows 2 to 4 wide, no dilation) the taps of a window row run
// as one dot per register of the tile, the row's pixels and weights transposed to four bytes per
// channel (dot_lanes_u8s8s32): one vpdpbusd on AVX-512 VNNI, four usdot on AArch64 i8mm, or, with
// shift_data (the data less 128, whose compensation the bias carries), four sdot on AArch64
// dotprod; otherwise widening multiply-adds. Its space and schedule are depthwise_conv2d_nchwc's
// (depthwise_space.h).
// weights=s16 takes W as int16: a depthwise conv whose uint8 weights less their zero point are
// past int8 (at most 255 in magnitude) runs on w - z_w exactly. The widening code sign-extends
// each weight vector to 32-bit lanes whatever its type, so int16 costs only its bytes: the same
// vpdpwssd (AVX-512 VNNI) or vpmaddwd (AVX2) per tap, vpmovsxwd for vpmovsxbd, and on AArch64 the
// same mla with one sxtl step fewer per weight vector. The alternative, int8 weights less a shift
// with a correction (c - z_w[k]) * sum_taps (x - z_x) per channel, would need those sums from a
// pass as costly as the conv itself (unlike a dense conv's, they differ per channel). dot_taps
// multiplies int8 weights and is not offered with s16; shift_data, which serves sdot, is refused.
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/depthwise_space.h"
#include "schedule_space/templates/requant.h"
#include "support/error.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "depthwise_conv2d_nchwc_u8s8s32";
// Channels per block: 16 int32 lanes, the block of conv2d_nchwc_u8s8s32's output.
constexpr int64_t kBlock = 16;

struct Shape : Window {
  int64_t data_zero_point;  // the padding value
  bool shift_data;          // the products read x - 128 (requant.h)
  bool s16_weights;         // weights=s16: W is int16
  Requant rq;
  int64_t blocks() const { return ceil_div(c, kBlock); }
  std::vector<int64_t> out_shape() const { return {n, blocks(), oh, ow, kBlock}; }
};

Shape shape_of(const WorkloadArgs& a) {
  Shape s{};
  static_cast<Window&>(s) = window_of(kName, a);
  s.data_zero_point = a.get_int("data_zero_point");
  s.shift_data = a.get_int("shift_data") != 0;
  s.s16_weights = a.get("weights") == "s16";
  s.rq = requant_of(a);
  return s;
}

// The kernel's arguments (I, W, the requantize inputs, O) and the stages its schedule names.
struct Tensors {
  std::vector<te::Tensor> args;
  te::Tensor padded, acc, out;  // padded: the input itself without padding
};

// I uint8 [N][ceil(C/16)][H][W][16], W int8 (int16 with weights=s16) [ceil(C/16)][R][S][16],
// the epilogue's bias and scale [ceil(C/16)][16], O [N][ceil(C/16)][OH][OW][16] int32 or the
// requantized type. Channel c sits in block c / 16, lane c % 16. The padding taps read
// data_zero_point; output lanes past C are zeros. With shift_data every product reads x - 128,
// padding taps included. acc: the reduction when an output stage follows it (requantize, zeroed
// lanes), undefined when the output is the reduction itself.
Tensors make_tensors(const Shape& sh) {
  Tensors t;
  const te::Tensor in = te::placeholder({sh.n, sh.blocks(), sh.h, sh.w, kBlock}, te::UInt(8), "I");
  const te::Tensor w = te::placeholder({sh.blocks(), sh.r, sh.s, kBlock},
                                       sh.s16_weights ? te::Int(16) : te::Int(8), "W");
  const RequantInputs rq = requant_inputs(sh.rq, {sh.blocks(), kBlock});
  t.args = {in, w};
  rq.append_to(t.args);
  t.padded = in;
  if (sh.pad > 0)
    t.padded = pad_blocked_input(in, sh.n, sh.blocks(), sh.h, sh.w, kBlock, sh.pad, te::UInt(8), 0,
                                 0, te::cast(te::UInt(8), te::Expr(sh.data_zero_point)));
  const te::IterVar r = te::reduce_axis({0, sh.r}, "r"), s = te::reduce_axis({0, sh.s}, "s");
  const te::Expr st(sh.stride), d(sh.dilation);
  const te::Tensor p = t.padded;
  const bool masked = sh.c % kBlock != 0;
  const bool staged = sh.rq.on() || masked;
  const te::Tensor acc = te::compute(
      sh.out_shape(),
      [&](te::Var n, te::Var c, te::Var y, te::Var x, te::Var l) {
        return te::sum(
            te::u8_factor(p(n, c, y * st + r.var * d, x * st + s.var * d, l), sh.shift_data) *
                te::cast(te::Int(32), w(c, r.var, s.var, l)),
            {r, s});
      },
      staged ? "dwconv_acc" : "dwconv");
  if (!staged) {
    t.out = acc;
    t.args.push_back(t.out);
    return t;
  }
  t.acc = acc;
  const te::DataType dt = sh.rq.on() ? sh.rq.out : te::Int(32);
  t.out = te::compute(
      sh.out_shape(),
      [&](te::Var n, te::Var c, te::Var y, te::Var x, te::Var l) {
        te::Expr v = requant_value(sh.rq, rq, acc(n, c, y, x, l), {c, l});
        if (masked)
          v = te::select(c * te::Expr(kBlock) + l < te::Expr(sh.c), v, te::cast(dt, te::Expr(0)));
        return v;
      },
      "dwconv");
  t.args.push_back(t.out);
  return t;
}

// Whether a window row fits one dot: 2 to 4 taps (a lane's four bytes; one tap has nothing to
// sum) read from neighbouring pixels.
bool row_fits_dot(const Shape& sh) { return sh.s >= 2 && sh.s <= 4 && sh.dilation == 1; }

// Whether the space offers dot_taps: a row that fits and an instruction that multiplies the
// data as the products read it: vpdpbusd (16 lanes, the block) and usdot take uint8, sdot int8
// (shift_data; without it each sdot would need another for its compensation, so the rows form
// is not offered there, though it builds).
bool offers_dot_taps(const Shape& sh, const TargetTraits& target) {
  if (sh.s16_weights) return false;
  const std::string& insn = target.int8_dot_insn;
  const bool multiplies =
      sh.shift_data ? int8_dot_multiplies(target, true) : insn == "vpdpbusd" || insn == "usdot";
  return multiplies && row_fits_dot(sh);
}

// The shared depthwise space without pad_inline: the padding is computed once, since with a
// data zero point the padding taps are not zero, and te skips taps only of a zero padding. Then
// dot_taps 0/1 (where offered; configs logged before it mean 0): a window row's taps in one dot
// instruction, which leaves unroll_s nothing to unroll (so dot_taps 1 takes unroll_s 0).
void define_space(const Shape& sh, const TargetTraits& target, ConfigSpace& space) {
  define_depthwise_space(sh.oh, sh.ow, ceil_div(kBlock, target.vector_lanes(32)), {}, target,
                         space);
  const bool dot = offers_dot_taps(sh, target);
  space.define_knob("dot_taps", dot ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  space.set_legacy_value("dot_taps", 0);
  if (dot)
    space.add_constraint("dot_taps runs a window row in one instruction", [](const EntityView& v) {
      return v["dot_taps"].as_int() == 0 || v["unroll_s"].as_int() == 0;
    });
}

Instantiated apply(const Shape& sh, const Config& cfg) {
  Tensors t = make_tensors(sh);
  te::Schedule s = te::create_schedule({t.out});
  const te::Tensor acc = t.acc.defined() ? t.acc : s.cache_write(t.out, "local");
  const Entity* dot = cfg.find("dot_taps");
  const bool row_dot = dot && dot->as_int() != 0;
  if (row_dot && !row_fits_dot(sh))
    throw Error(ErrorKind::kInstantiation,
                std::string(kName) + ": dot_taps needs a window 2 to 4 wide without dilation");
  if (row_dot && sh.s16_weights)
    throw Error(ErrorKind::kInstantiation,
                std::string(kName) + ": dot_taps multiplies int8 weights, not weights=s16");
  schedule_depthwise(
      s, t.out, acc, sh.oh, sh.ow, cfg, kName,
      row_dot ? &te::dot_lanes_u8s8s32(static_cast<int>(sh.s), sh.shift_data) : nullptr);
  if (sh.pad > 0) schedule_blocked_pad(s[t.padded], false, cfg["parallel"].as_int() != 0);
  return Instantiated{s, t.args};
}

}  // namespace

void register_depthwise_nchwc_int8_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = kName;
  // A dot instruction (VNNI, SDOT) does four int8 products per fp32 lane.
  d.peak_multiple = 4;
  d.doc =
      "int8 channel-blocked depthwise conv2d: O[N,C/16,OH,OW,16] (int32) = sum_{r,s} "
      "I[N,C/16,H,W,16] (uint8) * W[C/16,R,S,16] (int8, or int16 with weights=s16) (stride, pad "
      "with data_zero_point, dilation; output lanes past C zero): a window row's taps per "
      "vpdpbusd, usdot or, with shift_data (products of x - 128), sdot (dot_taps) or widening "
      "multiply-adds; out=u8|s8 requantizes with bias, scale, zero_point";
  d.args = {int_arg("N", "1", "batch"),
            int_arg("C", "", "channels"),
            int_arg("H", "", "input height"),
            int_arg("W", "", "input width"),
            int_arg("R", "3", "kernel height"),
            int_arg("S", "3", "kernel width"),
            int_arg("stride", "1", "stride (both axes)"),
            int_arg("pad", "0", "padding (both sides, both axes), filled with data_zero_point", 0),
            int_arg("dilation", "1", "dilation (both axes)")};
  ArgSpec zp = int_arg("data_zero_point", "0", "the uint8 value of the padding taps", 0);
  zp.max_value = 255;
  zp.key_omits_default = true;
  d.args.push_back(zp);
  for (ArgSpec& a : requant_args("[C/16,16]")) d.args.push_back(std::move(a));
  d.args.push_back(shift_data_arg());
  d.args.push_back({.name = "weights",
                    .type = ArgSpec::Type::kString,
                    .default_value = "s8",
                    .doc = "W's type: s8, or s16 for weights less their zero point past int8 "
                           "(widening multiply-adds alone, no dot_taps)",
                    .choices = {"s8", "s16"},
                    .key_omits_default = true});
  d.check = [](const WorkloadArgs& a) {
    check_requant(kName, a);
    const Shape sh = shape_of(a);
    if (sh.s16_weights && sh.shift_data)
      throw Error(
          ErrorKind::kInvalidArgument,
          std::string(kName) + ": shift_data serves sdot on int8 weights; weights=s16 runs no dot");
  };
  d.compute = [](const WorkloadArgs& a) {
    const Tensors t = make_tensors(shape_of(a));
    return ComputeDef{t.args, {t.out}};
  };
  d.flop = [](const WorkloadArgs& a) {
    const Shape sh = shape_of(a);
    return 2.0 * static_cast<double>(sh.n) * static_cast<double>(sh.c) *
           static_cast<double>(sh.oh) * static_cast<double>(sh.ow) *
           static_cast<double>(sh.r * sh.s);
  };
  d.define = [](const WorkloadArgs& a, const TargetTraits& target, ConfigSpace& space) {
    define_space(shape_of(a), target, space);
  };
  d.fallback = [](const WorkloadArgs& a, const TargetTraits& target, const ConfigSpace& space) {
    const Shape sh = shape_of(a);
    // dot_taps 1 where it was measured faster: vpdpbusd (AArch64's four dots per row: no figure).
    const bool dot = offers_dot_taps(sh, target) && target.int8_dot_insn == "vpdpbusd";
    return dot ? depthwise_dot_fallback(sh.oh, sh.ow, target, space)
               : depthwise_fallback(sh.ow, target, space);
  };
  d.apply = [](const WorkloadArgs& a, const TargetTraits&, const Config& cfg) {
    return apply(shape_of(a), cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
