// Defines the shared space and schedule of GEMM-like templates (matmul, dense + bias + relu,
// batch_matmul).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "schedule_space/config.h"
#include "schedule_space/config_space.h"
#include "schedule_space/workload.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::schedule_space::templates {

// Knobs (names are part of the config format, keep them stable):
//   tile_y  split of M in 3: [outer tile, cache block rows, register rows (<= 16)]
//   tile_x  split of N in 3: [outer tile, cache block cols, register cols (whole vectors, <= 4)]
//   tile_k  split of K in 2: [outer, inner]
//   unroll_k  0/1: unroll the inner k loop of the register tile
//   pack_b    0/1: copy (and, for a transposed B, transpose) the B panel of an outer tile into a
//             contiguous local buffer before using it
//   parallel  0/1 (only 0 on one core): run the fused outer tile loop on all cores
// Constraints: the register tile (rows x vectors) fits TargetTraits::accumulator_budget (x86: two
// registers free; AArch64: the row's B vectors and the A scalar free); an unrolled k loop
// unrolls at most 64 copies of the row block.
//   dot_lanes (only with `dot_knob`, M <= 16 and K >= one vector) 0, or the lanes of a dot-product
//             GEMV for a B stored [N,K]: vectors run along k, one horizontal sum per output (see
//             dense_bias_relu); the other knobs but parallel then go unused
//   dot_rows  (with dot_lanes, M >= 2) 1 to 4: rows of A in the dot form's register tile, beside
//             dot_block(rows) rows of B; each k step loads rows + block vectors for rows x block
//             FMAs (1 x 8: 9 loads per 8 FMAs, load-bound; 4 x 4: 8 per 16). 1 without dot_lanes
//   stream_b  (only with `stream_knob`, for a B stored [K,N], M <= 4) 0/1: the row-stream GEMV of
//             OpenBLAS's sgemv_n kernels. 1 accumulates a whole outer tile with k outermost: each
//             step reads tile_k's inner count of B rows side by side along the tile's columns,
//             a register tile of columns at a time, and adds them into the tile's rows (kept in
//             L1 between steps). B is read as a few sequential streams instead of a K-long
//             column walk; unroll_k unrolls the rows of a step; pack_b must be 0
//   rows_parallel (only with `batch_knob`, batch_matmul) 0/1: 0 fuses the batch with the outer
//             row and column tiles into the one parallel loop (as logged before the knob); 1 runs
//             the outer row tiles in parallel and the batch and the column tiles inside, so that
//             the tiles past M and N (197 tokens: no tile divides) are the last iterations of their
//             loops and partition_loops peels them: fused, a tail falls in every batch and keeps
//             its guards around every multiply-add of the register tile
void define_gemm_space(int64_t M, int64_t N, int64_t K, int dtype_bits, const TargetTraits& target,
                       ConfigSpace& space, bool dot_knob = false, bool stream_knob = false,
                       bool batch_knob = false);

// Rows of B stored [N,K] in one block of the dot form (each a vector accumulator per row of A):
// 8, or 4 beside 4 rows of A (32 accumulators would leave no register for the operands).
// Measured on dense 8x1000x512 (bench/config_race, AVX-512): 1 x 8 76, 2 x 8 87 to 90, 4 x 4 97
// to 99 GFLOP/s; 4 x 6 70 and 8 x 2 71 to 88.
inline int64_t dot_block(int64_t rows) { return rows >= 4 ? 4 : 8; }

// The dot_lanes value of a config (0 when the knob is absent, as in configs of older spaces).
int64_t dot_lanes(const Config& cfg);
// The dot_rows value of a config (1 when the knob is absent).
int64_t dot_rows(const Config& cfg);

// A sensible untuned choice: a register tile of up to 8 rows x 2 vectors, cache blocks of
// ~256 rows x one register tile of columns (a K x 2-vector packed B panel), k unrolled by 4,
// B packed, parallel when there are several cores. AArch64 (Cortex-A72/A76 class): 6 rows x 4
// vectors where that tiles exactly, and row blocks sized to the smaller L2 (see gemm.cc).
Config gemm_fallback(int64_t M, int64_t N, int64_t K, int dtype_bits, const TargetTraits& target,
                     const ConfigSpace& space);

// The stages a GEMM schedule works on.
struct GemmStages {
  te::Schedule schedule;
  te::Tensor out;      // the tiled stage: the output, its copy-out stage or a fused epilogue
  te::Tensor acc;      // the reduction, computed per register tile inside `out`
  te::Tensor pack;     // optional packed-B stage, computed per outer tile
  int batch_axes = 0;  // leading batch axes of `out` (fused into the outer parallel loop)
  // One batch axis after the rows: `out` is [M, batch, N] (batch_matmul's c_heads).
  bool rows_first = false;
  // Places stages at `panel`, the loop of `out` over its outer tiles, before the tile's products
  // (batch_matmul's softmax prologue: a tile's probabilities); none when empty.
  std::function<void(te::Schedule&, const te::Stage& out, const te::IterVar& panel)> per_panel;
};

// Schedules `g` by the config (see define_gemm_space). Throws Error(kInstantiation) for entity
// values it cannot realise; te throws kInvalidSchedule for a schedule it rejects.
void schedule_gemm(const GemmStages& g, const Config& cfg, int64_t M, int64_t N, int64_t K);

}  // namespace ktune::schedule_space::templates
