// Implements the packed-B GEMM of the dot-intrinsic templates.
#include "schedule_space/templates/packed_gemm.h"

#include "schedule_space/templates/common.h"

namespace ktune::schedule_space::templates {
namespace {

// Rows x 16-column blocks of the register tile: accumulators of 16 lanes each.
constexpr int64_t kMaxRows = 8;
constexpr int64_t kMaxBlocks = 4;
// k of one inner reduction tile at most (tile_kb's innermost factor times depth), and in the
// fallback's.
constexpr int64_t kMaxInnerK = 32;
constexpr int64_t kFallbackInnerK = 16;

// Whether a rows x blocks register tile fits the vector registers. x86-64 counts one register
// per block (AVX-512; B is read from memory by the multiply-add). On AArch64 a block is four
// NEON registers, its B operand four more that every row of the tile reads, and for int8 with
// sdot on unshifted data four more for B's compensation (codegen/llvm_dot.cc), also shared by
// the rows.
bool tile_fits(const PackedGemm& g, const TargetTraits& t, int64_t rows, int64_t blocks) {
  if (!t.is_aarch64()) return rows * blocks <= t.accumulator_budget(1);
  const int64_t per_block = 16 / t.vector_lanes(32);
  const bool compensated = g.depth == 4 && !g.shift && t.int8_dot_insn == "sdot";
  const int64_t operands = blocks * per_block * (compensated ? 2 : 1);
  return rows * blocks * per_block <= t.accumulator_budget(operands);
}

}  // namespace

PackedGemm packed_gemm(int64_t M, int64_t N, int64_t K, int64_t depth,
                       std::function<te::Expr(const te::Expr&, const te::Expr&)> product) {
  return {M, N, K, depth, ceil_div(N, 16), ceil_div(K, depth), std::move(product)};
}

te::Tensor packed_reference(const PackedGemm& g, const te::Tensor& a, const te::Tensor& b,
                            const std::string& name) {
  const te::IterVar k = te::reduce_axis({0, g.K}, "k");
  const te::Expr f16(16), fd(g.depth);
  return te::compute(
      {g.M, g.N},
      [&](te::Var i, te::Var j) {
        return te::sum(g.product(a(i, k), b(j / f16, k.var / fd, j % f16, k.var % fd)), k);
      },
      name);
}

std::pair<te::Tensor, te::Tensor> packed_product(const PackedGemm& g, const te::Tensor& a,
                                                 const te::Tensor& b, const te::Expr& zero) {
  te::Tensor ap = a;
  if (g.K % g.depth != 0) {
    ap = te::compute(
        {g.M, g.KB * g.depth},
        [&](te::Var i, te::Var k) {
          return te::select(k < te::Expr(g.K), a(i, te::min(k, te::Expr(g.K - 1))), zero);
        },
        "A_pad");
  }
  const te::IterVar kb = te::reduce_axis({0, g.KB}, "kb");
  const te::IterVar kl = te::reduce_axis({0, g.depth}, "kl");
  const te::Tensor acc = te::compute(
      {g.M, g.NB, 16},
      [&](te::Var i, te::Var jb, te::Var jl) {
        return te::sum(g.product(ap(i, kb.var * te::Expr(g.depth) + kl.var), b(jb, kb, jl, kl)),
                       {kb, kl});
      },
      "C_acc");
  return {acc, ap};
}

namespace {

void define_packed_space(const PackedGemm& g, const TargetTraits& target, ConfigSpace& space) {
  space.define_split("tile_m", {.extent = g.M, .num_outputs = 2, .max_innermost = kMaxRows});
  space.define_split("tile_nb", {.extent = g.NB, .num_outputs = 2, .max_innermost = kMaxBlocks});
  space.define_split("tile_kb",
                     {.extent = g.KB, .num_outputs = 2, .max_innermost = kMaxInnerK / g.depth});
  space.define_knob("unroll_k", std::vector<int64_t>{0, 1});
  // 0: row tiles outside (an A row block meets every B panel), 1: column tiles outside (a B
  // panel stays in L2 for every row block).
  space.define_knob("cols_outer", std::vector<int64_t>{0, 1});
  define_parallel(space);
  space.add_constraint("register tile fits the vector registers", [g, target](const EntityView& v) {
    return tile_fits(g, target, v["tile_m"].values.back(), v["tile_nb"].values.back());
  });
}

Config packed_fallback(const PackedGemm& g, const TargetTraits& target, const ConfigSpace& space) {
  std::vector<uint64_t> d(space.num_knobs(), 0);
  d[0] = closest_split(space.knob(0), {largest_divisor_at_most(g.M, 4)});
  // One block per row on AArch64: 4 rows x 4 NEON accumulators with their operands fit.
  d[1] = closest_split(space.knob(1), {largest_divisor_at_most(g.NB, target.is_aarch64() ? 1 : 4)});
  d[2] = closest_split(space.knob(2), {largest_divisor_at_most(g.KB, kFallbackInnerK / g.depth)});
  // Unrolled k blocks spill NEON vectors (LLVM loads the next blocks' operands early).
  d[3] = closest_int(space.knob(3), target.is_aarch64() ? 0 : 1);
  d[4] = closest_int(space.knob(4), 1);
  d[5] = closest_int(space.knob(5), target.cores > 1 ? 1 : 0);
  return pick_fallback(space, d);
}

}  // namespace

std::vector<ArgSpec> packed_gemm_args() {
  return {int_arg("M", "", "rows of A and C"), int_arg("N", "", "columns of C"),
          int_arg("K", "", "reduction length")};
}

void set_packed_space(TemplateDef& d, PackedGemm (*gemm_of)(const WorkloadArgs&)) {
  d.define = [gemm_of](const WorkloadArgs& w, const TargetTraits& target, ConfigSpace& space) {
    define_packed_space(gemm_of(w), target, space);
  };
  d.fallback = [gemm_of](const WorkloadArgs& w, const TargetTraits& target,
                         const ConfigSpace& space) {
    return packed_fallback(gemm_of(w), target, space);
  };
}

void schedule_packed(te::Schedule& sch, const PackedGemm& g, const te::Tensor& c,
                     const te::Tensor& acc, const te::Tensor& a, const te::Tensor& ap,
                     const Config& cfg, const te::TensorIntrin* intrin) {
  te::Stage cs = sch[c];
  const int64_t rows = cfg["tile_m"].split_factors(g.M).back();
  const int64_t blocks = cfg["tile_nb"].split_factors(g.NB).back();
  auto [io, ii] = cs.split(cs.axis(0), rows);
  auto [jo, ji] = cs.split(cs.axis(1), blocks * 16);
  // One 16-lane vector per block: the accumulator's element (i, j/16, j%16) is then a plain
  // vector load (a vector over several blocks indexes it through j/16 and j%16, which LLVM
  // turns into gathers).
  auto [jb, jl] = cs.split(ji, 16);
  const bool cols_outer = cfg["cols_outer"].as_int() != 0;
  if (cols_outer)
    cs.reorder({jo, io, ii, jb, jl});
  else
    cs.reorder({io, jo, ii, jb, jl});
  const te::IterVar outer = cols_outer ? jo : io, inner = cols_outer ? io : jo;
  if (cfg["parallel"].as_int() != 0) cs.parallel(outer);
  cs.unroll(jb);
  cs.vectorize(jl);

  te::Stage as = sch[acc];
  as.compute_at(cs, inner);
  const auto kbs = apply_split(as, as.reduce_axis(0), cfg["tile_kb"], g.KB);
  as.reorder({kbs[0], kbs[1], as.axis(0), as.axis(1), as.axis(2), as.reduce_axis(1)});
  unroll_if(as, kbs[1], cfg["unroll_k"].as_int() != 0);
  as.unroll(as.axis(0));
  as.unroll(as.axis(1));
  if (intrin) {
    as.tensorize(as.axis(2), *intrin);
  } else {
    // Widened multiply-adds: 16 lanes per block, the depth of a block unrolled.
    as.reorder({as.axis(0), as.axis(1), as.reduce_axis(1), as.axis(2)});
    as.unroll(as.reduce_axis(1));
    as.vectorize(as.axis(2));
  }
  if (!ap.same_as(a) && cfg["parallel"].as_int() != 0) sch[ap].parallel(sch[ap].axis(0));
}

}  // namespace ktune::schedule_space::templates
