// The bfloat16 GEMM template matmul_bf16: C[M,N] (float32) = A[M,K] (bfloat16) * B (bfloat16,
// packed in 16 x 2 blocks), tensorized with dot_16x2_bf16f32 on AVX-512 BF16, float32 vector code
// of the widened values elsewhere; optionally + bias[N], then relu, in the tile loop.
#include <functional>

#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/epilogue.h"
#include "schedule_space/templates/packed_gemm.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {
namespace {

// The product of two bfloat16 values, exact in float32.
te::Expr widened_product(const te::Expr& a, const te::Expr& b) {
  return te::cast(te::Float(32), a) * te::cast(te::Float(32), b);
}

struct Shape {
  PackedGemm g;       // B in 16 x 2 blocks: the 64 bytes one vdpbf16ps reads
  Epilogue epilogue;  // none, bias or bias_relu
};

Shape shape_of(const WorkloadArgs& w) {
  const int64_t M = w.get_int("M"), N = w.get_int("N"), K = w.get_int("K");
  return {packed_gemm(M, N, K, 2, widened_product), parse_epilogue(w.get("epilogue"))};
}

struct Bf16Tensors {
  te::Tensor a, b, c;
  EpilogueInputs epilogue;

  // Kernel ABI order: A, B, bias, C.
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> v{a, b};
    epilogue.append_to(v);
    v.push_back(c);
    return v;
  }
};

Bf16Tensors bf16_inputs(const Shape& s) {
  Bf16Tensors t;
  t.a = te::placeholder({s.g.M, s.g.K}, te::BFloat16(), "A");
  t.b = te::placeholder({s.g.NB, s.g.KB, 16, 2}, te::BFloat16(), "B");
  t.epilogue = epilogue_inputs(s.epilogue, {s.g.N}, {s.g.M, s.g.N}, te::Float(32));
  return t;
}

// The output from the accumulator, `at` reading its value for element (i, j).
te::Tensor output(const Shape& s, const Bf16Tensors& t,
                  const std::function<te::Expr(const te::Var&, const te::Var&)>& at) {
  return te::compute(
      {s.g.M, s.g.N},
      [&](te::Var i, te::Var j) {
        const te::Expr bias = t.epilogue.bias.defined() ? t.epilogue.bias(j) : te::Expr();
        return s.epilogue.apply(at(i, j), bias, te::Expr(), te::Float(32));
      },
      "C");
}

// The reference: the products summed in float32 in k order, then the epilogue.
Bf16Tensors reference_tensors(const Shape& s) {
  Bf16Tensors t = bf16_inputs(s);
  const bool fused = !s.epilogue.empty();
  const te::Tensor acc = packed_reference(s.g, t.a, t.b, fused ? "C_acc" : "C");
  t.c = !fused ? acc : output(s, t, [&](const te::Var& i, const te::Var& j) { return acc(i, j); });
  return t;
}

Instantiated apply(const Shape& s, const TargetTraits& target, const Config& cfg) {
  Bf16Tensors in = bf16_inputs(s);
  const auto product = packed_product(s.g, in.a, in.b, te::cast(te::BFloat16(), te::Expr(0.0f)));
  const te::Tensor acc = product.first, ap = product.second;
  const te::Expr f16(16);
  // The epilogue reads the accumulator tile where it was computed (acc is computed at the tile).
  in.c =
      output(s, in, [&](const te::Var& i, const te::Var& j) { return acc(i, j / f16, j % f16); });
  te::Schedule sch = te::create_schedule({in.c});
  schedule_packed(sch, s.g, in.c, acc, in.a, ap, cfg,
                  target.bf16_dot ? &te::dot_16x2_bf16f32() : nullptr);
  return Instantiated{sch, in.args()};
}

}  // namespace

void register_matmul_bf16_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = "matmul_bf16";
  // A bf16 dot instruction does two products per fp32 lane.
  d.peak_multiple = 2;
  d.doc =
      "C[M,N] (float32) = A[M,K] (bfloat16) * B (bfloat16 [N/16][K/2][16][2], padded), summed "
      "in float32: vdpbf16ps on AVX-512 BF16, widened float32 multiply-adds elsewhere";
  d.args = packed_gemm_args();
  d.args.push_back({.name = "epilogue",
                    .type = ArgSpec::Type::kString,
                    .default_value = "none",
                    .doc = "after the product: none, bias (+ bias[N], float32) or bias_relu",
                    .choices = {"none", "bias", "bias_relu"},
                    .key_omits_default = true});
  d.compute = [](const WorkloadArgs& w) {
    const Bf16Tensors t = reference_tensors(shape_of(w));
    return ComputeDef{t.args(), {t.c}};
  };
  d.flop = [](const WorkloadArgs& w) {
    const double outputs =
        static_cast<double>(w.get_int("M")) * static_cast<double>(w.get_int("N"));
    return outputs * (2.0 * static_cast<double>(w.get_int("K")) + shape_of(w).epilogue.flop());
  };
  set_packed_space(d, [](const WorkloadArgs& w) { return shape_of(w).g; });
  d.apply = [](const WorkloadArgs& w, const TargetTraits& target, const Config& cfg) {
    return apply(shape_of(w), target, cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
