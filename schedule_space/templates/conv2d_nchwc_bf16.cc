// The bfloat16 channel-blocked conv2d conv2d_nchwc_bf16: bfloat16 data [N][C/icb][H][W][icb] and
// weights [K/16][C/icb][R][S][icb/2][16][2], float32 accumulators and output, tensorized with
// dot_16x2_bf16f32 (vdpbf16ps on AVX-512 BF16, codegen's float32 form elsewhere) or in float32
// vector code of the widened values; conv2d_nchwc's epilogues (bias, residual, an activation) in
// the tile loop. The convolution, space and schedule are DotConv's (nchwc_dot_conv.h).
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/epilogue.h"
#include "schedule_space/templates/nchwc_dot_conv.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "conv2d_nchwc_bf16";

struct Shape {
  DotConv conv;
  Epilogue epilogue;
};

Shape shape_of(const WorkloadArgs& a) {
  return {dot_conv_of(kName, a, 2, te::BFloat16(), te::BFloat16(), te::Float(32),
                      te::cast(te::BFloat16(), te::Expr(0.0f))),
          epilogue_of(a)};
}

// I and W bfloat16 in DotConv's layouts, bias float32 [ceil(K/16)][16], residual and O float32
// [N][ceil(K/16)][OH][OW][16]. Output lanes past K are zeros (a valid zero-padded input of the
// next layer).
DotConvParts parts_of(const WorkloadArgs& a) {
  const Shape sh = shape_of(a);
  DotConvParts t;
  t.conv = sh.conv;
  t.in = dot_conv_inputs(sh.conv);
  const EpilogueInputs in = epilogue_inputs(sh.epilogue, {sh.conv.kblocks(), kDotLanes},
                                            sh.conv.out_shape(), te::Float(32));
  in.append_to(t.epilogue.inputs);
  t.epilogue.out = te::Float(32);
  t.epilogue.none = sh.epilogue.empty();
  t.epilogue.value = [e = sh.epilogue, in](const te::Expr& acc, const std::vector<te::Var>& at) {
    const te::Expr bias = in.bias.defined() ? in.bias(at[1], at[4]) : te::Expr();
    const te::Expr res =
        in.residual.defined() ? in.residual(at[0], at[1], at[2], at[3], at[4]) : te::Expr();
    return e.apply(acc, bias, res, te::Float(32));
  };
  return t;
}

}  // namespace

void register_conv_nchwc_bf16_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = kName;
  // A bf16 dot instruction does two products per fp32 lane.
  d.peak_multiple = 2;
  d.doc =
      "bfloat16 channel-blocked conv2d: O[N,K/16,OH,OW,16] (float32) = sum I[N,C/icb,H,W,icb] * "
      "W[K/16,C/icb,R,S,icb/2,16,2] (bfloat16) summed in float32 (stride, zero pad; output lanes "
      "past K zero): vdpbf16ps on AVX-512 BF16, widened float32 multiply-adds elsewhere; "
      "epilogue: bias[K/16,16], residual like O, an activation";
  d.args = dot_conv_args(2, "zero padding (both sides, both axes)");
  for (ArgSpec& e : epilogue_args({.bias_doc = "bias[K/16,16]", .residual_doc = "residual like O"}))
    d.args.push_back(std::move(e));
  d.resolve = [](WorkloadArgs& a) {
    if (a.get_int("ic_block") == 0) a.set_int("ic_block", auto_dot_block(a.get_int("C"), 2));
    resolve_epilogue(a);
  };
  d.check = [](const WorkloadArgs& a) {
    check_epilogue(kName, a);
    shape_of(a);
  };
  d.flop = [](const WorkloadArgs& a) {
    const Shape sh = shape_of(a);
    const DotConv& c = sh.conv;
    return direct_conv_flop(c.n, c.k, c.oh, c.ow, c.c, c.r * c.s, sh.epilogue.flop());
  };
  set_dot_conv_template(
      d, parts_of, [](const DotConv&) -> const te::TensorIntrin& { return te::dot_16x2_bf16f32(); },
      [](const TargetTraits& t, const DotConv&) { return t.bf16_dot; });
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
