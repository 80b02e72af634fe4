// The int8 GEMM template matmul_u8s8s32: C[M,N] (int32) = A[M,K] (uint8) * B (int8, packed in
// 16 x 4 blocks), tensorized with dot_16x4_u8s8s32 where the target has an int8 dot instruction
// (AVX-512 VNNI, AArch64 dotprod or i8mm), widening vector code elsewhere; optionally requantized
// to uint8 or int8 in the tile loop. With shift_data the products read A less 128 (requant.h):
// AArch64 dotprod's sdot without a compensation.
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/packed_gemm.h"
#include "schedule_space/templates/requant.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {
namespace {

struct Shape {
  PackedGemm g;  // B in 16 x 4 blocks
  Requant rq;
  bool input_sums = false;
};

Shape shape_of(const WorkloadArgs& w) {
  const int64_t M = w.get_int("M"), N = w.get_int("N"), K = w.get_int("K");
  const bool shift = w.get_int("shift_data") != 0;
  PackedGemm g = packed_gemm(M, N, K, 4, [shift](const te::Expr& a, const te::Expr& b) {
    return te::u8_factor(a, shift) * te::cast(te::Int(32), b);
  });
  g.shift = shift;
  return {g, requant_of(w), input_sums_on(w)};
}

// B[NB][KB][16][4] (packed_gemm.h): the 16 columns x 4 rows one vpdpbusd reads are 64 contiguous
// bytes, and each 16 of them the 4 columns x 4 rows one NEON sdot/usdot reads: one layout, and so
// one kernel ABI, for every target. With the epilogue: bias int32 [N], scale float32 [1] or [N],
// zero_point int32 [1] (the output's); with input_sums=1 input_sum int32 [M] (the rows of A less
// their zero point, summed) and sum_coef int32 [N] (InputSums).
struct Int8Tensors {
  te::Tensor a, b, c;
  RequantInputs rq;
  InputSums sums;

  // Kernel ABI order: A, B, the epilogue's inputs, C.
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> v = {a, b};
    rq.append_to(v);
    sums.append_to(v);
    v.push_back(c);
    return v;
  }

  // Output element (i, j) from its accumulator.
  te::Expr value(const Requant& q, const te::Expr& acc, const te::Expr& i,
                 const te::Expr& j) const {
    return requant_value(q, rq, with_input_sums(sums, acc, {j}, {i}), {j});
  }
};

Int8Tensors int8_inputs(const Shape& s) {
  Int8Tensors t;
  t.a = te::placeholder({s.g.M, s.g.K}, te::UInt(8), "A");
  t.b = te::placeholder({s.g.NB, s.g.KB, 16, 4}, te::Int(8), "B");
  t.rq = requant_inputs(s.rq, {s.g.N});
  t.sums = input_sums(s.input_sums, {s.g.M}, {s.g.N});
  return t;
}

Int8Tensors reference_tensors(const Shape& s) {
  Int8Tensors t = int8_inputs(s);
  const bool staged = s.rq.on() || s.input_sums;
  const te::Tensor acc = packed_reference(s.g, t.a, t.b, staged ? "C_acc" : "C");
  if (!staged) {
    t.c = acc;
    return t;
  }
  t.c = te::compute(
      {s.g.M, s.g.N}, [&](te::Var i, te::Var j) { return t.value(s.rq, acc(i, j), i, j); }, "C");
  return t;
}

Instantiated apply(const Shape& s, const TargetTraits& target, const Config& cfg) {
  Int8Tensors in = int8_inputs(s);
  // A's columns past K: a zero product (shifted data reads 128 as zero).
  const auto product =
      packed_product(s.g, in.a, in.b, te::cast(te::UInt(8), te::Expr(s.g.shift ? 128 : 0)));
  const te::Tensor acc = product.first, ap = product.second;
  const te::Expr f16(16);
  // The epilogue reads the accumulator tile where it was computed (acc is computed at the tile).
  in.c = te::compute(
      {s.g.M, s.g.N},
      [&](te::Var i, te::Var j) { return in.value(s.rq, acc(i, j / f16, j % f16), i, j); }, "C");
  te::Schedule sch = te::create_schedule({in.c});
  schedule_packed(
      sch, s.g, in.c, acc, in.a, ap, cfg,
      int8_dot_multiplies(target, s.g.shift) ? &te::dot_16x4_u8s8s32(s.g.shift) : nullptr);
  return Instantiated{sch, in.args()};
}

}  // namespace

void register_matmul_int8_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = "matmul_u8s8s32";
  // A dot instruction (VNNI, SDOT) does four int8 products per fp32 lane.
  d.peak_multiple = 4;
  d.doc =
      "C[M,N] (int32) = A[M,K] (uint8) * B (int8 [N/16][K/4][16][4], padded): VNNI on AVX-512, "
      "sdot/usdot on AArch64 dotprod/i8mm, widening multiply-adds elsewhere; out=u8|s8 requantizes "
      "with bias, scale, zero_point; input_sums=1 adds sum_coef[j] * input_sum[i] first; "
      "shift_data: products of A - 128";
  d.args = packed_gemm_args();
  for (ArgSpec& a : requant_args("[N]")) d.args.push_back(std::move(a));
  d.args.push_back(input_sums_arg("[M]", "[N]"));
  d.args.push_back(shift_data_arg());
  d.check = [](const WorkloadArgs& w) { check_requant("matmul_u8s8s32", w); };
  d.compute = [](const WorkloadArgs& w) {
    const Int8Tensors t = reference_tensors(shape_of(w));
    return ComputeDef{t.args(), {t.c}};
  };
  d.flop = [](const WorkloadArgs& w) {
    return 2.0 * static_cast<double>(w.get_int("M")) * static_cast<double>(w.get_int("N")) *
           static_cast<double>(w.get_int("K"));
  };
  set_packed_space(d, [](const WorkloadArgs& w) { return shape_of(w).g; });
  d.apply = [](const WorkloadArgs& w, const TargetTraits& target, const Config& cfg) {
    return apply(shape_of(w), target, cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
