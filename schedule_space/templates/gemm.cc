// The GEMM schedule shared by matmul, dense + bias + relu and batch_matmul: outer tiles (parallel),
// cache blocks, a register tile accumulated in a local buffer with vectorized columns, packed B.
#include "schedule_space/templates/gemm.h"

#include <algorithm>

#include "schedule_space/templates/common.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr int64_t kMaxRegisterRows = 16;
constexpr int64_t kMaxRegisterVectors = 4;
constexpr int64_t kMaxUnrolledRows = 64;

// The register tile and row block of the AArch64 fallback (M >= 4), chosen for Cortex-A72/A76-
// class cores, which no one here could time (qemu timings say nothing): by counting. Per k step
// an r x v tile issues r*v FMLAs against v vector loads of B and r scalar loads of A (used by
// element), and needs r*v + v + 1 of the 32 registers. 6 rows x 4 vectors (the 6x16 shape of ARM
// Compute Library's a64_hybrid_fp32_mla_6x16) does 24 FMLAs per 10 loads in 29 registers;
// 8 x 2 does 16 per 10 in 19. A72 issues one load per cycle, so 8 x 2 is nearly load-bound
// there and 6 x 4 is not; A76 (two loads, two FMLA pipes) is FMA-bound with both. 6 x 4 is taken
// where it tiles the matrix exactly (M a multiple of 6, N of 16), K is at least 32 (below, LLVM
// unrolls the whole k loop and spills 9 to 21 vectors in the innermost loop at K = 8 and 16)
// and its K x 16 packed B panel, re-read by every row block, still fits the L1D; otherwise the
// generic choice stays (x86's 8 x 2 vectors). Not 8 x 3 (ACL's 8x12): three vectors are a <12 x
// float> in the IR, which LLVM widens and shuffles through the stack (hundreds of q-register spills
// in an 8 x 12 tile). Rows per panel: the A block read against one panel (rows x K) takes at most
// half the L2 share, as x86's 256 rows do on Zen 4 at K = 512 (512 KiB of 1 MiB); on A72/A76-class
// cores that is 64 rows at K = 512. At least four row blocks, though, so that each packed panel is
// used four times per copy (for large K no row count fits: the template has no K blocking of
// the panel).
void aarch64_gemm_tile(int64_t M, int64_t N, int64_t K, int dtype_bits, const TargetTraits& target,
                       int64_t& xi, int64_t& yi, int64_t& rows_per_panel) {
  const int64_t lanes = target.vector_lanes(dtype_bits);
  const int64_t bytes = dtype_bits / 8;
  if (M % 6 == 0 && N % (4 * lanes) == 0 && K >= 32 &&
      K * 4 * lanes * bytes <= target.l1d_bytes()) {
    xi = 4 * lanes;
    yi = 6;
  }
  rows_per_panel = std::clamp<int64_t>(target.l2_bytes() / 2 / (K * bytes), 4 * yi, 256);
}

constexpr int64_t kMaxStreamRows = 4;

bool stream_b(const Config& cfg) {
  const Entity* e = cfg.find("stream_b");
  return e && e->as_int() != 0;
}

bool rows_parallel(const Config& cfg) {
  const Entity* e = cfg.find("rows_parallel");
  return e && e->as_int() != 0;
}

}  // namespace

int64_t dot_lanes(const Config& cfg) {
  const Entity* e = cfg.find("dot_lanes");
  return e ? e->as_int() : 0;
}

int64_t dot_rows(const Config& cfg) {
  const Entity* e = cfg.find("dot_rows");
  return e ? e->as_int() : 1;
}

void define_gemm_space(int64_t M, int64_t N, int64_t K, int dtype_bits, const TargetTraits& target,
                       ConfigSpace& space, bool dot_knob, bool stream_knob, bool batch_knob) {
  const int64_t lanes = target.vector_lanes(dtype_bits);
  space.define_split("tile_y", {.extent = M, .num_outputs = 3, .max_innermost = kMaxRegisterRows});
  space.define_split("tile_x", {.extent = N,
                                .num_outputs = 3,
                                .innermost_multiple = lanes,
                                .max_innermost = lanes * kMaxRegisterVectors});
  space.define_split("tile_k", {.extent = K, .num_outputs = 2});
  space.define_knob("unroll_k", std::vector<int64_t>{0, 1});
  space.define_knob("pack_b", std::vector<int64_t>{0, 1});
  define_parallel(space);
  if (dot_knob && M <= 16 && K >= lanes) {
    space.define_knob("dot_lanes", std::vector<int64_t>{0, lanes});
    space.set_legacy_value("dot_lanes",
                           0);  // logged before the knob (or before it reached M <= 16)
    if (M >= 2) {
      space.define_knob("dot_rows", std::vector<int64_t>{1, 2, 3, 4});
      space.set_legacy_value("dot_rows", 1);  // logged before the knob
      space.add_constraint(
          "dot rows only in the dot form, in the registers", [target](const EntityView& v) {
            const int64_t rows = v["dot_rows"].as_int();
            if (v["dot_lanes"].as_int() == 0) return rows == 1;
            return rows * dot_block(rows) <=
                   target.accumulator_budget(rows + 1);  // X's row vectors and a W vector live
          });
    }
  }
  if (stream_knob && M <= kMaxStreamRows) {
    space.define_knob("stream_b", std::vector<int64_t>{0, 1});
    space.set_legacy_value("stream_b", 0);  // logged before the knob
    // The row stream reads B where it lies; a packed copy would only double the traffic.
    space.add_constraint("a streamed B is not packed", [](const EntityView& v) {
      return v["stream_b"].as_int() == 0 || v["pack_b"].as_int() == 0;
    });
  }
  if (batch_knob) {
    space.define_knob("rows_parallel", std::vector<int64_t>{0, 1});
    space.set_legacy_value("rows_parallel", 0);  // logged before the knob
  }
  space.add_constraint("register tile fits the vector registers", [lanes,
                                                                   target](const EntityView& v) {
    const int64_t rows = v["tile_y"].values.back();
    const int64_t vectors = (v["tile_x"].values.back() + lanes - 1) / lanes;
    return rows * vectors <= target.accumulator_budget(vectors);  // the row's B vectors stay live
  });
  space.add_constraint("unrolled k loop stays small", [](const EntityView& v) {
    return v["unroll_k"].as_int() == 0 ||
           v["tile_k"].values.back() * v["tile_y"].values.back() <= kMaxUnrolledRows;
  });
}

Config gemm_fallback(int64_t M, int64_t N, int64_t K, int dtype_bits, const TargetTraits& target,
                     const ConfigSpace& space) {
  const int64_t lanes = target.vector_lanes(dtype_bits);
  // A few rows (GEMV, small batches): up to 4 vectors of columns, so that independent
  // accumulators hide the FMA latency that a 1 x 1-vector tile is bound by.
  const int64_t wide = M < 4 ? 4 * lanes : 2 * lanes;
  int64_t xi = N % wide == 0 || (M < 4 && N > wide) ? wide
               : N % (2 * lanes) == 0               ? 2 * lanes
                                                    : std::min<int64_t>(lanes, N);
  const int64_t vectors = std::max<int64_t>(1, xi / lanes);
  const int64_t max_rows = std::min<int64_t>(8, (target.vector_registers() - 4) / vectors);
  int64_t yi = largest_divisor_at_most(M, max_rows);
  // M without a divisor of 4 or more up to the register rows (ViT's 197 tokens, a prime): a full
  // register tile of a power-of-two rows and a tail, not one row per tile (a 1 x 2-vector tile
  // is FMA-latency bound: ViT-Tiny's untuned fc1, 197 x 768 x 192, took 1.2 ms at one thread).
  if (yi < 4 && M >= 2 * max_rows) yi = max_rows >= 8 ? 8 : 4;
  int64_t rows_per_panel = 256;
  if (target.is_aarch64() && M >= 4)
    aarch64_gemm_tile(M, N, K, dtype_bits, target, xi, yi, rows_per_panel);
  // The B panel of an outer tile is one register tile wide (K x xi, L2-sized for K up to a few
  // thousand) and every row block of A streams past it: the packed panel is reused M / yi times
  // from L2 while only the A rows and the register tile move (the dense_pack shape that reaches
  // ~0.9 of OpenBLAS in bench/matmul_hand). Rows stay blocked by up to 256 so that the A block
  // read against one panel stays L2-resident too.
  int64_t yo = std::max<int64_t>(
      1, largest_divisor_at_most(M / yi, std::max<int64_t>(1, rows_per_panel / yi)));
  // A batch whose rows leave a tail runs its row tiles in parallel (rows_parallel), the tail
  // peeled: one register tile per outer tile, so that there are outer tiles for every core.
  const bool peel_rows = M % yi != 0 && space.knob_position("rows_parallel") >= 0;
  if (peel_rows) yo = 1;
  const int64_t xo = 1;
  const int64_t ki = largest_divisor_at_most(K, 4);
  std::vector<uint64_t> d(space.num_knobs(), 0);
  d[0] = closest_split(space.knob(0), {yo, yi});
  d[1] = closest_split(space.knob(1), {xo, xi});
  d[2] = closest_split(space.knob(2), {ki});
  d[3] = closest_int(space.knob(3), 1);
  // A packed panel pays off when several row blocks reuse it; with one (GEMV, M <= a register
  // tile) the copy only doubles the traffic on B.
  d[4] = closest_int(space.knob(4), M / yi >= 2 ? 1 : 0);
  // Threads cost microseconds to wake: a product under ~2^20 multiply-adds runs on one.
  const bool tiny =
      static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < 1048576.0;
  d[5] = closest_int(space.knob(5), target.cores > 1 && !tiny ? 1 : 0);
  // The dot-product GEMV where the template offers it (B stored [N,K]): it reads B's rows as
  // vectors where the tile above would gather them (dense M=1 N=1000 K=512: 41 against 5 GFLOP/s).
  // Small batches (4 to 16 rows) keep the tile above unless tuning finds the dot form faster.
  if (const int64_t p = space.knob_position("dot_lanes"); p >= 0)
    d[p] = closest_int(space.knob(p), M < 4 ? lanes : 0);
  if (const int64_t p = space.knob_position("rows_parallel"); p >= 0)
    d[p] = closest_int(space.knob(p), peel_rows ? 1 : 0);
  return pick_fallback(space, d);
}

void schedule_gemm(const GemmStages& g, const Config& cfg, int64_t M, int64_t N, int64_t K) {
  te::Schedule s = g.schedule;
  te::Stage out = s[g.out];
  const int nb = g.batch_axes;
  // The axes of `out` and of the register tile: the batch, the rows, the columns.
  const int row_axis = g.rows_first ? 0 : nb, col_axis = nb + 1;
  const auto batch_axis = [&](int b) { return g.rows_first ? 1 + b : b; };
  std::vector<te::IterVar> batch;
  for (int b = 0; b < nb; ++b) batch.push_back(out.axis(batch_axis(b)));
  const auto ys = apply_split(out, out.axis(row_axis), cfg["tile_y"], M);
  const auto xs = apply_split(out, out.axis(col_axis), cfg["tile_x"], N);
  if (ys.size() != 3 || xs.size() != 3)
    throw Error(ErrorKind::kInstantiation, "tile_y and tile_x must split in 3");
  // The outer tiles: one parallel loop of the batch, row and column tiles fused, or (with
  // rows_parallel) the row tiles in parallel with the batch and column tiles inside.
  te::IterVar outer, panel;  // the parallel loop; the loop one packed B panel serves
  if (nb > 0 && rows_parallel(cfg)) {
    std::vector<te::IterVar> order = {ys[0]};
    order.insert(order.end(), batch.begin(), batch.end());
    order.insert(order.end(), {xs[0], ys[1], xs[1], ys[2], xs[2]});
    out.reorder(order);
    outer = ys[0];
    panel = xs[0];
  } else {
    std::vector<te::IterVar> order = batch;
    order.insert(order.end(), {ys[0], xs[0], ys[1], xs[1], ys[2], xs[2]});
    out.reorder(order);
    outer = nb > 0 ? batch[0] : ys[0];
    for (int b = 1; b < nb; ++b) outer = out.fuse(outer, batch[b]);
    if (nb > 0) outer = out.fuse(outer, ys[0]);
    outer = panel = out.fuse(outer, xs[0]);
  }
  if (cfg["parallel"].as_int() != 0) out.parallel(outer);
  out.vectorize(xs[2]);
  if (g.per_panel) g.per_panel(s, out, panel);

  te::Stage acc = s[g.acc];
  const auto ks = apply_split(acc, acc.reduce_axis(0), cfg["tile_k"], K);
  if (ks.size() != 2) throw Error(ErrorKind::kInstantiation, "tile_k must split in 2");
  std::vector<te::IterVar> acc_order;
  for (int b = 0; b < nb; ++b) acc_order.push_back(acc.axis(batch_axis(b)));
  if (stream_b(cfg)) {
    // The row stream: per outer tile, k steps of tile_k's inner rows; in a step, a register tile
    // of columns at a time, each B vector loaded once and used by every row of the tile.
    acc.compute_at(out, panel);
    const int64_t xi = cfg["tile_x"].split_factors(N).back();
    auto [cols, lanes] = acc.split(acc.axis(col_axis), xi);
    acc_order.insert(acc_order.end(), {ks[0], cols, ks[1], acc.axis(row_axis), lanes});
    acc.reorder(acc_order);
    acc.vectorize(lanes);
  } else {
    acc.compute_at(out, xs[1]);
    acc_order.insert(acc_order.end(), {ks[0], ks[1], acc.axis(row_axis), acc.axis(col_axis)});
    acc.reorder(acc_order);
    acc.vectorize(acc.axis(col_axis));
  }
  acc.unroll(acc.axis(row_axis));
  unroll_if(acc, ks[1], cfg["unroll_k"].as_int() != 0);

  if (g.pack.defined()) {
    // The panel's columns come in whole register tiles (multiples of the vector lanes): copy
    // them a tile at a time with vector loads and stores.
    te::Stage pack = s[g.pack];
    pack.compute_at(out, panel);
    const te::IterVar cols = pack.axis(static_cast<int>(pack.node().axes.size()) - 1);
    const int64_t xi = cfg["tile_x"].split_factors(N).back();
    auto [co, ci] = pack.split(cols, xi);
    (void)co;
    pack.vectorize(ci);
  }
}

}  // namespace ktune::schedule_space::templates
