// The int8 GEMM template matmul_u8s8s32: C[M,N] (int32) = A[M,K] (uint8) * B (int8, packed in
// 16 x 4 blocks), tensorized with dot_16x4_u8s8s32 where the target has an int8 dot instruction
// (AVX-512 VNNI, AArch64 dotprod or i8mm), widening vector code elsewhere; optionally requantized
// to uint8 or int8 in the tile loop.
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/requant.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {
namespace {

// Rows x 16-column blocks of the register tile: int32 accumulators of 16 lanes each.
constexpr int64_t kMaxRows = 8;
constexpr int64_t kMaxBlocks = 4;

// Whether a rows x blocks register tile fits the vector registers. x86-64 counts one register
// per block (AVX-512; B is read from memory by the multiply-add). On AArch64 a block is four
// NEON registers, its B operand four more that every row of the tile reads, and with sdot four
// more for B's compensation (codegen/llvm_dot.cc), also shared by the rows.
bool tile_fits(const TargetTraits& t, int64_t rows, int64_t blocks) {
  if (!t.is_aarch64()) return rows * blocks <= t.accumulator_budget(1);
  const int64_t per_block = 16 / t.vector_lanes(32);
  const int64_t operands = blocks * per_block * (t.int8_dot_insn == "sdot" ? 2 : 1);
  return rows * blocks * per_block <= t.accumulator_budget(operands);
}

struct Shape {
  int64_t M, N, K, NB, KB;  // NB, KB: 16-column and 4-deep blocks of B (the last ones padded)
  Requant rq;
};

Shape shape_of(const WorkloadArgs& w) {
  const int64_t M = w.get_int("M"), N = w.get_int("N"), K = w.get_int("K");
  return {M, N, K, ceil_div(N, 16), ceil_div(K, 4), requant_of(w)};
}

// B[NB][KB][16][4]: element (k, j) of the K x N matrix at [j/16][k/4][j%16][k%4], so that the 16
// columns x 4 rows one vpdpbusd reads are 64 contiguous bytes, and each 16 of them the 4 columns
// x 4 rows one NEON sdot/usdot reads: one layout, and so one kernel ABI, for every target. Padding
// is never read as data: the reference sums over k < K only, the tiled kernel pads A's rows with
// zeros. With the epilogue: bias int32 [N], scale float32 [1] or [N], zero_point int32 [1] (the
// output's).
struct Int8Tensors {
  te::Tensor a, b, c;
  RequantInputs rq;

  // Kernel ABI order: A, B, the epilogue's inputs, C.
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> v = {a, b};
    rq.append_to(v);
    v.push_back(c);
    return v;
  }
};

Int8Tensors int8_inputs(const Shape& s) {
  Int8Tensors t;
  t.a = te::placeholder({s.M, s.K}, te::UInt(8), "A");
  t.b = te::placeholder({s.NB, s.KB, 16, 4}, te::Int(8), "B");
  t.rq = requant_inputs(s.rq, {s.N});
  return t;
}

// Output element (i, j) from its int32 accumulator: the accumulator itself, or requantized.
te::Expr output_value(const Shape& s, const Int8Tensors& t, const te::Expr& acc, const te::Var& j) {
  return requant_value(s.rq, t.rq, acc, {j});
}

te::Expr widened_product(const te::Expr& a, const te::Expr& b) {
  return te::cast(te::Int(32), a) * te::cast(te::Int(32), b);
}

Int8Tensors reference_tensors(const Shape& s) {
  Int8Tensors t = int8_inputs(s);
  const te::IterVar k = te::reduce_axis({0, s.K}, "k");
  const te::Tensor a = t.a, b = t.b;
  const te::Expr f16(16), f4(4);
  const te::Tensor acc = te::compute(
      {s.M, s.N},
      [&](te::Var i, te::Var j) {
        return te::sum(widened_product(a(i, k), b(j / f16, k.var / f4, j % f16, k.var % f4)), k);
      },
      s.rq.on() ? "C_acc" : "C");
  if (!s.rq.on()) {
    t.c = acc;
    return t;
  }
  t.c = te::compute(
      {s.M, s.N}, [&](te::Var i, te::Var j) { return output_value(s, t, acc(i, j), j); }, "C");
  return t;
}

void define_space(const Shape& s, const TargetTraits& target, ConfigSpace& space) {
  space.define_split("tile_m", {.extent = s.M, .num_outputs = 2, .max_innermost = kMaxRows});
  space.define_split("tile_nb", {.extent = s.NB, .num_outputs = 2, .max_innermost = kMaxBlocks});
  space.define_split("tile_kb", {.extent = s.KB, .num_outputs = 2, .max_innermost = 8});
  space.define_knob("unroll_k", std::vector<int64_t>{0, 1});
  // 0: row tiles outside (an A row block meets every B panel), 1: column tiles outside (a B
  // panel stays in L2 for every row block).
  space.define_knob("cols_outer", std::vector<int64_t>{0, 1});
  space.define_knob("parallel",
                    target.cores > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  space.add_constraint("register tile fits the vector registers", [target](const EntityView& v) {
    return tile_fits(target, v["tile_m"].values.back(), v["tile_nb"].values.back());
  });
}

Config fallback(const Shape& s, const TargetTraits& target, const ConfigSpace& space) {
  std::vector<uint64_t> d(space.num_knobs(), 0);
  d[0] = closest_split(space.knob(0), {largest_divisor_at_most(s.M, 4)});
  // One block per row on AArch64: 4 rows x 4 NEON accumulators with their operands fit.
  d[1] = closest_split(space.knob(1), {largest_divisor_at_most(s.NB, target.is_aarch64() ? 1 : 4)});
  d[2] = closest_split(space.knob(2), {largest_divisor_at_most(s.KB, 4)});
  // Unrolled k blocks spill NEON vectors (LLVM loads the next blocks' operands early).
  d[3] = closest_int(space.knob(3), target.is_aarch64() ? 0 : 1);
  d[4] = closest_int(space.knob(4), 1);
  d[5] = closest_int(space.knob(5), target.cores > 1 ? 1 : 0);
  return pick_fallback(space, d);
}

Instantiated apply(const Shape& s, const TargetTraits& target, const Config& cfg) {
  Int8Tensors in = int8_inputs(s);
  const te::Tensor a = in.a, b = in.b;
  // A with K padded to whole 4-deep blocks by zeros: what the intrinsic's 4 bytes per row read.
  te::Tensor ap = a;
  if (s.K % 4 != 0) {
    ap = te::compute(
        {s.M, s.KB * 4},
        [&](te::Var i, te::Var k) {
          return te::select(k < te::Expr(s.K), a(i, te::min(k, te::Expr(s.K - 1))),
                            te::cast(te::UInt(8), te::Expr(0)));
        },
        "A_pad");
  }
  const te::IterVar kb = te::reduce_axis({0, s.KB}, "kb"), kl = te::reduce_axis({0, 4}, "kl");
  const te::Tensor acc = te::compute(
      {s.M, s.NB, 16},
      [&](te::Var i, te::Var jb, te::Var jl) {
        return te::sum(widened_product(ap(i, kb.var * te::Expr(4) + kl.var), b(jb, kb, jl, kl)),
                       {kb, kl});
      },
      "C_acc");
  const te::Expr f16(16);
  // The epilogue reads the accumulator tile where it was computed (acc is computed at the tile).
  const te::Tensor c = te::compute(
      {s.M, s.N},
      [&](te::Var i, te::Var j) { return output_value(s, in, acc(i, j / f16, j % f16), j); }, "C");
  in.c = c;

  te::Schedule sch = te::create_schedule({c});
  te::Stage cs = sch[c];
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
  if (target.int8_dot) {
    as.tensorize(as.axis(2), te::dot_16x4_u8s8s32());
  } else {
    // Widening multiply-adds: 16 int32 lanes per block, the 4 k of a block unrolled.
    as.reorder({as.axis(0), as.axis(1), as.reduce_axis(1), as.axis(2)});
    as.unroll(as.reduce_axis(1));
    as.vectorize(as.axis(2));
  }
  if (!ap.same_as(a) && cfg["parallel"].as_int() != 0) sch[ap].parallel(sch[ap].axis(0));
  return Instantiated{sch, in.args()};
}

}  // namespace

void register_matmul_int8_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = "matmul_u8s8s32";
  d.doc =
      "C[M,N] (int32) = A[M,K] (uint8) * B (int8 [N/16][K/4][16][4], padded): VNNI on AVX-512, "
      "sdot/usdot on AArch64 dotprod/i8mm, widening multiply-adds elsewhere; out=u8|s8 requantizes "
      "with bias, scale, zero_point";
  d.args = {int_arg("M", "", "rows of A and C"), int_arg("N", "", "columns of C"),
            int_arg("K", "", "reduction length")};
  for (ArgSpec& a : requant_args("[N]")) d.args.push_back(std::move(a));
  d.check = [](const WorkloadArgs& w) { check_requant("matmul_u8s8s32", w); };
  d.compute = [](const WorkloadArgs& w) {
    const Int8Tensors t = reference_tensors(shape_of(w));
    return ComputeDef{t.args(), {t.c}};
  };
  d.flop = [](const WorkloadArgs& w) {
    return 2.0 * static_cast<double>(w.get_int("M")) * static_cast<double>(w.get_int("N")) *
           static_cast<double>(w.get_int("K"));
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
