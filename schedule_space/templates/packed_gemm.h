// Defines the packed-B GEMM shared by the templates that tensorize with a 16-lane dot intrinsic
// (matmul_u8s8s32, matmul_bf16): its product, knobs, fallback and schedule.
#pragma once

#include <cstdint>
#include <functional>

#include "schedule_space/config.h"
#include "schedule_space/config_space.h"
#include "schedule_space/template_registry.h"
#include "schedule_space/workload.h"
#include "te/schedule.h"
#include "te/tensor.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {

// C[M, N] from A[M, K] and B packed as [NB][KB][16][depth]: element (k, j) of the K x N matrix
// at [j/16][k/depth][j%16][k%depth], so that the 16 columns x depth rows one dot instruction
// reads are contiguous. The last blocks are padded; padding is never read as data (the
// reference sums over k < K only, the tiled kernel pads A's rows with zeros).
struct PackedGemm {
  int64_t M, N, K;
  int64_t depth;   // rows of B per block: the dot's reduction length (4 int8, 2 bfloat16)
  int64_t NB, KB;  // 16-column and depth-deep blocks
  // The product of an element of A and one of B in the accumulator's type.
  std::function<te::Expr(const te::Expr&, const te::Expr&)> product;
  // int8: the product reads A's uint8 as x - 128 (shift_data), so sdot needs no compensation.
  bool shift = false;
};

PackedGemm packed_gemm(int64_t M, int64_t N, int64_t K, int64_t depth,
                       std::function<te::Expr(const te::Expr&, const te::Expr&)> product);

// The reference accumulator C[M, N]: the products summed in k order, named `name`.
te::Tensor packed_reference(const PackedGemm& g, const te::Tensor& a, const te::Tensor& b,
                            const std::string& name);

// The tiled accumulator C_acc[M][NB][16] over A padded to KB * depth columns by `zero` (A_pad,
// a stage of its own when K is not a multiple of depth). Returns {C_acc, A or A_pad}.
std::pair<te::Tensor, te::Tensor> packed_product(const PackedGemm& g, const te::Tensor& a,
                                                 const te::Tensor& b, const te::Expr& zero);

// The arguments such a template starts with: M, N, K.
std::vector<ArgSpec> packed_gemm_args();

// Sets d's define and fallback from the workload's GEMM (`gemm_of`). The knobs: tile_m, tile_nb,
// tile_kb, unroll_k, cols_outer, parallel; the register tile fits the vector registers.
void set_packed_space(TemplateDef& d, PackedGemm (*gemm_of)(const WorkloadArgs&));

// Schedules c (C[M, N], reading acc's element (i, j/16, j%16)): row and 16-column tiles, acc
// computed at the tile with its 16 lanes tensorized with `intrin`, or vectorized (the depth
// unrolled) when intrin is null; A_pad (when ap is not a) parallel with the rest.
void schedule_packed(te::Schedule& sch, const PackedGemm& g, const te::Tensor& c,
                     const te::Tensor& acc, const te::Tensor& a, const te::Tensor& ap,
                     const Config& cfg, const te::TensorIntrin* intrin);

}  // namespace ktune::schedule_space::templates
