// submodular_pick: greedy score + knob-diversity selection.
#include "tuner/submodular_pick.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "support/error.h"

namespace ktune::tuner {

std::vector<size_t> submodular_pick(std::span<const float> scores,
                                    const std::vector<std::vector<uint64_t>>& knob_values, size_t n,
                                    const PickParams& params) {
  size_t m = scores.size();
  if (knob_values.size() != m) {
    throw Error(ErrorKind::kInvalidArgument, "submodular pick: scores and knob values differ");
  }
  size_t dims = m == 0 ? 0 : knob_values[0].size();
  for (const auto& v : knob_values) {
    if (v.size() != dims) {
      throw Error(ErrorKind::kInvalidArgument, "submodular pick: knob value rows differ in length");
    }
  }
  // Rank-normalize: equal scores share a rank.
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  std::vector<double> norm(m, 1.0);
  for (size_t i = 0; i < m;) {
    size_t j = i;
    while (j + 1 < m && scores[order[j + 1]] == scores[order[i]]) ++j;
    double r = m > 1 ? static_cast<double>(i) / static_cast<double>(m - 1) : 1.0;
    for (size_t t = i; t <= j; ++t) norm[order[t]] = r;
    i = j + 1;
  }

  std::vector<std::unordered_set<uint64_t>> used(dims);
  std::vector<bool> taken(m, false);
  std::vector<size_t> picked;
  n = std::min(n, m);
  picked.reserve(n);
  while (picked.size() < n) {
    size_t best = m;
    double best_value = 0.0;
    for (size_t i = 0; i < m; ++i) {
      if (taken[i]) continue;
      size_t fresh = 0;
      for (size_t d = 0; d < dims; ++d) fresh += used[d].count(knob_values[i][d]) == 0 ? 1 : 0;
      double value = norm[i] + params.knob_weight * static_cast<double>(fresh);
      if (best == m || value > best_value) {
        best = i;
        best_value = value;
      }
    }
    taken[best] = true;
    picked.push_back(best);
    for (size_t d = 0; d < dims; ++d) used[d].insert(knob_values[best][d]);
  }
  return picked;
}

}  // namespace ktune::tuner
