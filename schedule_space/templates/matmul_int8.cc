// The int8 GEMM template matmul_u8s8s32: C[M,N] (int32) = A[M,K] (uint8) * B (int8, packed in
// 16 x 4 blocks), tensorized with dot_16x4_u8s8s32 on AVX-512 VNNI, widening vector code elsewhere;
// optionally requantized to uint8 or int8 in the tile loop.
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/packed_gemm.h"
#include "support/error.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {
namespace {

// The requantize epilogue (ONNX QuantizeLinear after an int32 bias, as QLinearMatMul/QLinearConv):
// y = clamp(round_half_even((acc + bias[j]) * scale) + zp, lo, hi), [lo, hi] the output type's
// range, lo raised to zp by relu (zero in the quantized domain). The product is a float32 one,
// rounded with nearbyint, as ONNX Runtime computes it.
struct Requant {
  te::DataType out = te::Int(32);  // Int(32): no epilogue, the accumulator is the output
  bool per_channel = false;        // scale f32 [N] instead of [1]
  bool relu = false;
  bool on() const { return out != te::Int(32); }
};

te::Expr widened_product(const te::Expr& a, const te::Expr& b) {
  return te::cast(te::Int(32), a) * te::cast(te::Int(32), b);
}

struct Shape {
  PackedGemm g;  // B in 16 x 4 blocks
  Requant rq;
};

Requant requant_of(const WorkloadArgs& w) {
  Requant rq;
  const std::string& out = w.get("out");
  if (out == "u8") rq.out = te::UInt(8);
  if (out == "s8") rq.out = te::Int(8);
  rq.per_channel = w.get("scale") == "per_channel";
  rq.relu = w.get_int("relu") != 0;
  return rq;
}

Shape shape_of(const WorkloadArgs& w) {
  const int64_t M = w.get_int("M"), N = w.get_int("N"), K = w.get_int("K");
  return {packed_gemm(M, N, K, 4, widened_product), requant_of(w)};
}

// B[NB][KB][16][4] (packed_gemm.h): the 16 columns x 4 rows one vpdpbusd reads are 64 contiguous
// bytes. With the epilogue: bias int32 [N], scale float32 [1] or [N], zero_point int32 [1] (the
// output's).
struct Int8Tensors {
  te::Tensor a, b, bias, scale, zero_point, c;

  // Kernel ABI order: A, B, the epilogue's inputs, C.
  std::vector<te::Tensor> args() const {
    if (!bias.defined()) return {a, b, c};
    return {a, b, bias, scale, zero_point, c};
  }
};

Int8Tensors int8_inputs(const Shape& s) {
  Int8Tensors t;
  t.a = te::placeholder({s.g.M, s.g.K}, te::UInt(8), "A");
  t.b = te::placeholder({s.g.NB, s.g.KB, 16, 4}, te::Int(8), "B");
  if (s.rq.on()) {
    t.bias = te::placeholder({s.g.N}, te::Int(32), "bias");
    t.scale = te::placeholder({s.rq.per_channel ? s.g.N : 1}, te::Float(32), "scale");
    t.zero_point = te::placeholder({1}, te::Int(32), "zero_point");
  }
  return t;
}

// Output element (i, j) from its int32 accumulator: the accumulator itself, or requantized.
te::Expr output_value(const Shape& s, const Int8Tensors& t, const te::Expr& acc, const te::Var& j) {
  if (!s.rq.on()) return acc;
  const te::Expr zero(0);
  const te::Expr scaled =
      te::cast(te::Float(32), acc + t.bias(j)) * t.scale(s.rq.per_channel ? te::Expr(j) : zero);
  const te::Expr zp = te::cast(te::Float(32), t.zero_point(zero));
  const bool u8 = s.rq.out == te::UInt(8);
  te::Expr lo(u8 ? 0.0 : -128.0);
  if (s.rq.relu) lo = te::max(lo, zp);
  // Clamped in float, so that the conversion to int32 never overflows.
  const te::Expr y =
      te::min(te::max(te::round_even(scaled) + zp, lo), te::Expr(u8 ? 255.0 : 127.0));
  return te::cast(s.rq.out, te::cast(te::Int(32), y));
}

Int8Tensors reference_tensors(const Shape& s) {
  Int8Tensors t = int8_inputs(s);
  const te::Tensor acc = packed_reference(s.g, t.a, t.b, s.rq.on() ? "C_acc" : "C");
  if (!s.rq.on()) {
    t.c = acc;
    return t;
  }
  t.c = te::compute(
      {s.g.M, s.g.N}, [&](te::Var i, te::Var j) { return output_value(s, t, acc(i, j), j); }, "C");
  return t;
}

Instantiated apply(const Shape& s, const TargetTraits& target, const Config& cfg) {
  Int8Tensors in = int8_inputs(s);
  const auto product = packed_product(s.g, in.a, in.b, te::cast(te::UInt(8), te::Expr(0)));
  const te::Tensor acc = product.first, ap = product.second;
  const te::Expr f16(16);
  // The epilogue reads the accumulator tile where it was computed (acc is computed at the tile).
  in.c = te::compute(
      {s.g.M, s.g.N},
      [&](te::Var i, te::Var j) { return output_value(s, in, acc(i, j / f16, j % f16), j); }, "C");
  te::Schedule sch = te::create_schedule({in.c});
  schedule_packed(sch, s.g, in.c, acc, in.a, ap, cfg,
                  target.int8_dot ? &te::dot_16x4_u8s8s32() : nullptr);
  return Instantiated{sch, in.args()};
}

}  // namespace

void register_matmul_int8_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = "matmul_u8s8s32";
  d.doc =
      "C[M,N] (int32) = A[M,K] (uint8) * B (int8 [N/16][K/4][16][4], padded): VNNI on AVX-512, "
      "widening multiply-adds elsewhere; out=u8|s8 requantizes with bias, scale, zero_point";
  ArgSpec relu = int_arg("relu", "0", "1: clamp the output at zero_point from below", 0);
  relu.max_value = 1;
  relu.key_omits_default = true;
  d.args = packed_gemm_args();
  d.args.insert(
      d.args.end(),
      {{.name = "out",
        .type = ArgSpec::Type::kString,
        .default_value = "s32",
        .doc = "C's type: s32 (the accumulator), or u8/s8 requantized: inputs bias int32 [N], "
               "scale float32, zero_point int32 [1]; "
               "C = clamp(round_half_even((acc + bias) * scale) + zero_point)",
        .choices = {"s32", "u8", "s8"},
        .key_omits_default = true},
       {.name = "scale",
        .type = ArgSpec::Type::kString,
        .default_value = "per_tensor",
        .doc = "scale float32 [1] (per_tensor) or [N] (per_channel)",
        .choices = {"per_tensor", "per_channel"},
        .key_omits_default = true},
       relu});
  d.check = [](const WorkloadArgs& w) {
    if (w.get("out") == "s32" && (w.get("scale") != "per_tensor" || w.get_int("relu") != 0))
      throw Error(ErrorKind::kInvalidArgument,
                  "matmul_u8s8s32: scale and relu apply only to out=u8 or out=s8");
  };
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
