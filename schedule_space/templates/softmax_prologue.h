// Defines SoftmaxPrologue, batch_matmul's A operand read as the softmax of attention's scores
// (a_softmax): P = softmax(scale * S) @ V in one kernel, the probabilities never written.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule_space/templates/row_reduce.h"
#include "schedule_space/workload.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::schedule_space::templates {

// The stages between the scores S [batch, M, K] and the product: each row's maximum of scale * S,
// e = exp(scale * S - max) (what the product multiplies, as A), and 1 / the row's sum of e (what
// each output row is multiplied by once the product is done: FlashAttention's deferred
// normalization, so the product reads e as it was computed).
struct SoftmaxPrologue {
  RowReduce top, total;  // [batch, M]
  te::Tensor e;          // [batch, M, K]
  te::Tensor inverse;    // [batch, M]
  // Computes every stage at `at`, the loop of `out` over its outer tiles: a tile's rows of e, in
  // vector lanes, before its products read them (they stay in L1 or L2 instead of a pass over
  // memory). Rows of other tiles are not computed there.
  void schedule(te::Schedule& s, const te::Stage& out, const te::IterVar& at) const;
};

SoftmaxPrologue softmax_prologue(const te::Tensor& scores, double scale);

// batch_matmul's arguments a_softmax (0/1) and a_scale (the scores' factor), both left out of the
// workload key at their default (0 and 1).
std::vector<ArgSpec> softmax_prologue_args();
// The resolve hook's part: a_scale in its shortest float32 form ("0.125", "0.25819889"), so one
// scale has one key. Throws Error(kInvalidArgument) for a value that is no finite number.
void resolve_softmax_prologue(WorkloadArgs& w);
// The check hook's part: throws Error(kInvalidArgument) for a_scale without a_softmax, a zero
// scale, a softmax of an operand read from packed heads (a_heads), or another dtype than
// float32.
void check_softmax_prologue(const WorkloadArgs& w);
// a_scale's value.
double softmax_scale(const WorkloadArgs& w);

}  // namespace ktune::schedule_space::templates
