// Defines row_reduce, a sum or maximum along each row of [rows, n] in vector lanes, then a tree
// over the lanes: what a softmax or a normalization reads once per row (deploy's generated
// Softmax and LayerNorm kernels, batch_matmul's softmax prologue).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::schedule_space::templates {

enum class Combine { kSum, kMax };

// a + b or max(a, b).
te::Expr combine(Combine c, const te::Expr& a, const te::Expr& b);

// The stages of one row reduction. `result` (shaped like the rows) is what consumers read;
// schedule() places the other stages at its innermost row loop, so that wherever the caller
// computes `result` (at its consumer's row, or a tile of rows) a row is reduced where it is read.
struct RowReduce {
  te::Tensor result;
  te::Tensor partial;              // rows x [lanes]: lanes independent chains of n / lanes steps
  std::vector<te::Tensor> halves;  // rows x [lanes / 2], ..., rows x [1]
  te::Tensor over_lanes, rest;     // rows: the tree's last value; the n % lanes tail
  void schedule(te::Schedule& s) const;
};

// The reduction of value(row, j) over j in [0, n) for each row index of `rows` (its extents: one
// axis, or several, such as [batch, M], indexed as they are so that the rows a consumer reads are
// the rows computed). From 2 x `lanes` elements per row it runs in `lanes` partial results kept in
// vector lanes (a plain reduction is one chain of n dependent steps: 768 per LayerNorm row of
// BERT, a quarter of its generated-kernel time), then in halves over the lanes (a chain of
// `lanes` scalar steps was the critical path of a short row), then the remainder; below, one
// plain reduction.
RowReduce row_reduce(
    Combine c, const std::vector<int64_t>& rows, int64_t n, int64_t lanes,
    const std::function<te::Expr(const std::vector<te::Var>&, const te::Expr&)>& value,
    const std::string& name);

}  // namespace ktune::schedule_space::templates
