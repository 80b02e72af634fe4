// Ranking metrics: NDCG@k, Spearman correlation, pairwise accuracy.
#include "cost_model/ranking_metrics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "support/error.h"

namespace ktune::cost_model {
namespace {

void check_sizes(size_t a, size_t b, const char* what) {
  if (a != b) throw Error(ErrorKind::kInvalidArgument, std::string(what) + ": sizes differ");
}

// Average ranks (1-based), ties sharing the mean of their positions.
std::vector<double> average_ranks(std::span<const double> v) {
  size_t n = v.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(n);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && v[order[j + 1]] == v[order[i]]) ++j;
    double r = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t t = i; t <= j; ++t) ranks[order[t]] = r;
    i = j + 1;
  }
  return ranks;
}

}  // namespace

double ndcg_at_k(std::span<const float> scores, std::span<const float> labels, size_t k) {
  check_sizes(scores.size(), labels.size(), "ndcg");
  size_t n = scores.size();
  k = std::min(k, n);
  std::vector<size_t> by_score(n);
  std::iota(by_score.begin(), by_score.end(), size_t{0});
  std::stable_sort(by_score.begin(), by_score.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  std::vector<float> ideal(labels.begin(), labels.end());
  std::sort(ideal.begin(), ideal.end(), std::greater<>());
  double dcg = 0.0, idcg = 0.0;
  for (size_t i = 0; i < k; ++i) {
    double discount = 1.0 / std::log2(static_cast<double>(i) + 2.0);
    dcg += labels[by_score[i]] * discount;
    idcg += ideal[i] * discount;
  }
  return idcg > 0.0 ? dcg / idcg : 1.0;
}

double spearman_correlation(std::span<const double> a, std::span<const double> b) {
  check_sizes(a.size(), b.size(), "spearman");
  size_t n = a.size();
  if (n < 2) return 0.0;
  std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  double mean = (static_cast<double>(n) + 1.0) / 2.0;
  double cov = 0.0, va = 0.0, vb = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double da = ra[i] - mean, db = rb[i] - mean;
    cov += da * db;
    va += da * da;
    vb += db * db;
  }
  if (va <= 0.0 || vb <= 0.0) return 0.0;
  return cov / std::sqrt(va * vb);
}

double pairwise_accuracy(std::span<const float> scores, std::span<const float> labels) {
  check_sizes(scores.size(), labels.size(), "pairwise accuracy");
  double right = 0.0;
  size_t pairs = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    for (size_t j = i + 1; j < scores.size(); ++j) {
      if (labels[i] == labels[j]) continue;
      ++pairs;
      if (scores[i] == scores[j]) {
        right += 0.5;
      } else if ((labels[i] > labels[j]) == (scores[i] > scores[j])) {
        right += 1.0;
      }
    }
  }
  return pairs == 0 ? 1.0 : right / static_cast<double>(pairs);
}

}  // namespace ktune::cost_model
