// Defines the ranking metrics used for early stopping and model-quality telemetry.
#pragma once

#include <cstddef>
#include <span>

namespace ktune::cost_model {

// Returns NDCG@k of scores against relevance labels (linear gain, log2 discount): 1 when the
// top k by score carry the gain of the k best labels. Returns 1 when every label is 0.
// Ties in scores keep index order. Throws Error(kInvalidArgument) when sizes differ.
double ndcg_at_k(std::span<const float> scores, std::span<const float> labels, size_t k);

// Returns Spearman's rank correlation of a and b (Pearson on average ranks, so ties count as
// half-way), in [-1, 1]; 0 when either side is constant or there are fewer than 2 values.
// Throws Error(kInvalidArgument) when sizes differ.
double spearman_correlation(std::span<const double> a, std::span<const double> b);

// Returns the fraction of pairs (i, j) with labels[i] != labels[j] that scores order the same
// way (score ties count half); 1 when there is no such pair. Throws Error(kInvalidArgument)
// when sizes differ.
double pairwise_accuracy(std::span<const float> scores, std::span<const float> labels);

}  // namespace ktune::cost_model
