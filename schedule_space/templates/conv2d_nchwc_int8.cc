// The int8 channel-blocked conv2d conv2d_nchwc_u8s8s32 (TVM's conv2d_NCHWc_int8): uint8 data
// [N][C/icb][H][W][icb], int8 weights [K/16][C/icb][R][S][icb/4][16][4], int32 accumulators,
// tensorized with dot_16x4_u8s8s32 on AVX-512 VNNI and AArch64 dotprod/i8mm, widening vector code
// elsewhere; optionally requantized to uint8 or int8 in the tile loop. With shift_data the
// products read the data less 128 (requant.h): AArch64 dotprod's sdot without a compensation. The
// convolution, space and schedule are DotConv's (nchwc_dot_conv.h).
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/nchwc_dot_conv.h"
#include "schedule_space/templates/requant.h"
#include "support/error.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "conv2d_nchwc_u8s8s32";

struct Shape {
  DotConv conv;
  int64_t data_zero_point;  // the padding value
  Requant rq;
};

// Throws Error(kInvalidArgument) when C is not a multiple of 4, the input block does not divide
// C or is not a multiple of 4, or the window does not fit.
Shape shape_of(const WorkloadArgs& a) {
  Shape s;
  s.data_zero_point = a.get_int("data_zero_point");
  s.conv = dot_conv_of(kName, a, 4, te::UInt(8), te::Int(8), te::Int(32),
                       te::cast(te::UInt(8), te::Expr(s.data_zero_point)));
  s.conv.shift_data = a.get_int("shift_data") != 0;
  s.rq = requant_of(a);
  return s;
}

// I uint8, W int8 in DotConv's layouts, the epilogue's bias and scale [ceil(K/16)][16], O
// [N][ceil(K/16)][OH][OW][16] int32 or the requantized type. The padding taps read
// data_zero_point (the data's zero point, so that the convolution of x - zero_point is this one
// less zero_point * sum(W), a per-channel constant). Output lanes past K are zeros. The epilogue
// requantizes, after adding sum_coef[k] * input_sum[n][y][x] with input_sums=1 (InputSums).
DotConvParts parts_of(const WorkloadArgs& a) {
  const Shape sh = shape_of(a);
  DotConvParts t;
  t.conv = sh.conv;
  t.in = dot_conv_inputs(sh.conv);
  const RequantInputs rq = requant_inputs(sh.rq, {sh.conv.kblocks(), kDotLanes});
  rq.append_to(t.epilogue.inputs);
  const InputSums sums = input_sums(input_sums_on(a), {sh.conv.n, sh.conv.oh, sh.conv.ow},
                                    {sh.conv.kblocks(), kDotLanes});
  sums.append_to(t.epilogue.inputs);
  t.epilogue.out = sh.rq.on() ? sh.rq.out : te::Int(32);
  t.epilogue.none = !sh.rq.on() && !sums.on();
  t.epilogue.value = [q = sh.rq, rq, sums](const te::Expr& acc, const std::vector<te::Var>& at) {
    return requant_value(q, rq, with_input_sums(sums, acc, {at[1], at[4]}, {at[0], at[2], at[3]}),
                         {at[1], at[4]});
  };
  return t;
}

}  // namespace

void register_conv_nchwc_int8_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = kName;
  // A dot instruction (VNNI, SDOT) does four int8 products per fp32 lane.
  d.peak_multiple = 4;
  d.doc =
      "int8 channel-blocked conv2d: O[N,K/16,OH,OW,16] (int32) = sum I[N,C/icb,H,W,icb] (uint8) * "
      "W[K/16,C/icb,R,S,icb/4,16,4] (int8) (stride, pad with data_zero_point; output lanes past K "
      "zero): VNNI on AVX-512, sdot/usdot on AArch64 dotprod/i8mm, widening multiply-adds "
      "elsewhere; out=u8|s8 requantizes with bias, scale, zero_point; input_sums=1 adds "
      "sum_coef[k] * input_sum[n,y,x] first; shift_data: products of I - 128";
  d.args = dot_conv_args(4, "padding (both sides, both axes), filled with data_zero_point");
  ArgSpec zp = int_arg("data_zero_point", "0", "the uint8 value of the padding taps", 0);
  zp.max_value = 255;
  zp.key_omits_default = true;
  d.args.push_back(zp);
  for (ArgSpec& a : requant_args("[K/16,16]")) d.args.push_back(std::move(a));
  d.args.push_back(input_sums_arg("[N,OH,OW]", "[K/16,16]"));
  d.args.push_back(shift_data_arg());
  d.resolve = [](WorkloadArgs& a) {
    if (a.get_int("ic_block") == 0) a.set_int("ic_block", auto_dot_block(a.get_int("C"), 4));
  };
  d.check = [](const WorkloadArgs& a) {
    check_requant(kName, a);
    shape_of(a);
  };
  d.flop = [](const WorkloadArgs& a) {
    const DotConv c = shape_of(a).conv;
    return direct_conv_flop(c.n, c.k, c.oh, c.ow, c.c, c.r * c.s, 0);
  };
  set_dot_conv_template(
      d, parts_of,
      [](const DotConv& c) -> const te::TensorIntrin& {
        return te::dot_16x4_u8s8s32(c.shift_data);
      },
      [](const TargetTraits& t, const DotConv& c) { return int8_dot_multiplies(t, c.shift_data); });
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
