// The bfloat16 GEMM template matmul_bf16: C[M,N] (float32) = A[M,K] (bfloat16) * B (bfloat16,
// packed in 16 x 2 blocks), tensorized with dot_16x2_bf16f32 on AVX-512 BF16, float32 vector code
// of the widened values elsewhere; optionally + bias[N], then relu, in the tile loop.
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/epilogue.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {
namespace {

// Rows x 16-column blocks of the register tile: float32 accumulators of 16 lanes each.
constexpr int64_t kMaxRows = 8;
constexpr int64_t kMaxBlocks = 4;

struct Shape {
  int64_t M, N, K, NB, KB;  // NB, KB: 16-column and 2-deep blocks of B (the last ones padded)
  Epilogue epilogue;        // none, bias or bias_relu
};

Shape shape_of(const WorkloadArgs& w) {
  const int64_t M = w.get_int("M"), N = w.get_int("N"), K = w.get_int("K");
  return {M, N, K, ceil_div(N, 16), ceil_div(K, 2), parse_epilogue(w.get("epilogue"))};
}

// B[NB][KB][16][2]: element (k, j) of the K x N matrix at [j/16][k/2][j%16][k%2], so that the 16
// columns x 2 rows one vdpbf16ps reads are 64 contiguous bytes. Padding is never read as data:
// the reference sums over k < K only, the tiled kernel pads A's rows with zeros.
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
  t.a = te::placeholder({s.M, s.K}, te::BFloat16(), "A");
  t.b = te::placeholder({s.NB, s.KB, 16, 2}, te::BFloat16(), "B");
  t.epilogue = epilogue_inputs(s.epilogue, {s.N}, {s.M, s.N}, te::Float(32));
  return t;
}

// The product of two bfloat16 values, exact in float32.
te::Expr widened_product(const te::Expr& a, const te::Expr& b) {
  return te::cast(te::Float(32), a) * te::cast(te::Float(32), b);
}

// Output element (i, j) from its float32 accumulator.
te::Expr output_value(const Shape& s, const Bf16Tensors& t, const te::Expr& acc, const te::Var& j) {
  const te::Expr bias = t.epilogue.bias.defined() ? t.epilogue.bias(j) : te::Expr();
  return s.epilogue.apply(acc, bias, te::Expr(), te::Float(32));
}

// The reference: the products summed in float32 in k order, then the epilogue.
Bf16Tensors reference_tensors(const Shape& s) {
  Bf16Tensors t = bf16_inputs(s);
  const te::IterVar k = te::reduce_axis({0, s.K}, "k");
  const te::Tensor a = t.a, b = t.b;
  const te::Expr f16(16), f2(2);
  const bool fused = !s.epilogue.empty();
  const te::Tensor acc = te::compute(
      {s.M, s.N},
      [&](te::Var i, te::Var j) {
        return te::sum(widened_product(a(i, k), b(j / f16, k.var / f2, j % f16, k.var % f2)), k);
      },
      fused ? "C_acc" : "C");
  t.c = !fused ? acc
               : te::compute(
                     {s.M, s.N},
                     [&](te::Var i, te::Var j) { return output_value(s, t, acc(i, j), j); }, "C");
  return t;
}

void define_space(const Shape& s, const TargetTraits& target, ConfigSpace& space) {
  space.define_split("tile_m", {.extent = s.M, .num_outputs = 2, .max_innermost = kMaxRows});
  space.define_split("tile_nb", {.extent = s.NB, .num_outputs = 2, .max_innermost = kMaxBlocks});
  space.define_split("tile_kb", {.extent = s.KB, .num_outputs = 2, .max_innermost = 16});
  space.define_knob("unroll_k", std::vector<int64_t>{0, 1});
  // 0: row tiles outside (an A row block meets every B panel), 1: column tiles outside (a B
  // panel stays in L2 for every row block).
  space.define_knob("cols_outer", std::vector<int64_t>{0, 1});
  space.define_knob("parallel",
                    target.cores > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  space.add_constraint("register tile fits the vector registers", [target](const EntityView& v) {
    return v["tile_m"].values.back() * v["tile_nb"].values.back() <= target.accumulator_budget(1);
  });
}

Config fallback(const Shape& s, const TargetTraits& target, const ConfigSpace& space) {
  std::vector<uint64_t> d(space.num_knobs(), 0);
  d[0] = closest_split(space.knob(0), {largest_divisor_at_most(s.M, 4)});
  d[1] = closest_split(space.knob(1), {largest_divisor_at_most(s.NB, 4)});
  d[2] = closest_split(space.knob(2), {largest_divisor_at_most(s.KB, 8)});
  d[3] = closest_int(space.knob(3), 1);
  d[4] = closest_int(space.knob(4), 1);
  d[5] = closest_int(space.knob(5), target.cores > 1 ? 1 : 0);
  return pick_fallback(space, d);
}

Instantiated apply(const Shape& s, const TargetTraits& target, const Config& cfg) {
  Bf16Tensors in = bf16_inputs(s);
  const te::Tensor a = in.a, b = in.b;
  // A with K padded to whole 2-deep blocks by zeros: what the intrinsic's pair per row reads.
  te::Tensor ap = a;
  if (s.K % 2 != 0) {
    ap = te::compute(
        {s.M, s.KB * 2},
        [&](te::Var i, te::Var k) {
          return te::select(k < te::Expr(s.K), a(i, te::min(k, te::Expr(s.K - 1))),
                            te::cast(te::BFloat16(), te::Expr(0.0f)));
        },
        "A_pad");
  }
  const te::IterVar kb = te::reduce_axis({0, s.KB}, "kb"), kl = te::reduce_axis({0, 2}, "kl");
  const te::Tensor acc = te::compute(
      {s.M, s.NB, 16},
      [&](te::Var i, te::Var jb, te::Var jl) {
        return te::sum(widened_product(ap(i, kb.var * te::Expr(2) + kl.var), b(jb, kb, jl, kl)),
                       {kb, kl});
      },
      "C_acc");
  const te::Expr f16(16);
  // The epilogue reads the accumulator tile where it was computed (acc is computed at the tile).
  in.c = te::compute(
      {s.M, s.N},
      [&](te::Var i, te::Var j) { return output_value(s, in, acc(i, j / f16, j % f16), j); }, "C");

  te::Schedule sch = te::create_schedule({in.c});
  te::Stage cs = sch[in.c];
  const int64_t rows = cfg["tile_m"].split_factors(s.M).back();
  const int64_t blocks = cfg["tile_nb"].split_factors(s.NB).back();
  auto [io, ii] = cs.split(cs.axis(0), rows);
  auto [jo, ji] = cs.split(cs.axis(1), blocks * 16);
  const bool cols_outer = cfg["cols_outer"].as_int() != 0;
  if (cols_outer)
    cs.reorder({jo, io, ii, ji});
  else
    cs.reorder({io, jo, ii, ji});
  const te::IterVar outer = cols_outer ? jo : io, inner = cols_outer ? io : jo;
  if (cfg["parallel"].as_int() != 0) cs.parallel(outer);
  cs.vectorize(ji);

  te::Stage as = sch[acc];
  as.compute_at(cs, inner);
  const auto kbs = apply_split(as, as.reduce_axis(0), cfg["tile_kb"], s.KB);
  as.reorder({kbs[0], kbs[1], as.axis(0), as.axis(1), as.axis(2), as.reduce_axis(1)});
  unroll_if(as, kbs[1], cfg["unroll_k"].as_int() != 0);
  as.unroll(as.axis(0));
  as.unroll(as.axis(1));
  if (target.bf16_dot) {
    as.tensorize(as.axis(2), te::dot_16x2_bf16f32());
  } else {
    // Widened multiply-adds: 16 float32 lanes per block, the 2 k of a block unrolled.
    as.reorder({as.axis(0), as.axis(1), as.reduce_axis(1), as.axis(2)});
    as.unroll(as.reduce_axis(1));
    as.vectorize(as.axis(2));
  }
  if (!ap.same_as(a) && cfg["parallel"].as_int() != 0) sch[ap].parallel(sch[ap].axis(0));
  return Instantiated{sch, in.args()};
}

}  // namespace

void register_matmul_bf16_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = "matmul_bf16";
  d.doc =
      "C[M,N] (float32) = A[M,K] (bfloat16) * B (bfloat16 [N/16][K/2][16][2], padded), summed "
      "in float32: vdpbf16ps on AVX-512 BF16, widened float32 multiply-adds elsewhere";
  d.args = {int_arg("M", "", "rows of A and C"),
            int_arg("N", "", "columns of C"),
            int_arg("K", "", "reduction length"),
            {.name = "epilogue",
             .type = ArgSpec::Type::kString,
             .default_value = "none",
             .doc = "after the product: none, bias (+ bias[N], float32) or bias_relu",
             .choices = {"none", "bias", "bias_relu"},
             .key_omits_default = true}};
  d.compute = [](const WorkloadArgs& w) {
    const Bf16Tensors t = reference_tensors(shape_of(w));
    return ComputeDef{t.args(), {t.c}};
  };
  d.flop = [](const WorkloadArgs& w) {
    const double outputs =
        static_cast<double>(w.get_int("M")) * static_cast<double>(w.get_int("N"));
    return outputs * (2.0 * static_cast<double>(w.get_int("K")) + shape_of(w).epilogue.flop());
  };
  d.define = [](const WorkloadArgs& w, const TargetTraits& target, ConfigSpace& space) {
    define_space(shape_of(w), target, space);
  };
  d.fallback = [](const WorkloadArgs& w, const TargetTraits& target, const ConfigSpace& space) {
    return fallback(shape_of(w), target, space);
  };
  d.apply = [](const WorkloadArgs& w, const TargetTraits& target, const Config& cfg) {
    return apply(shape_of(w), target, cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
