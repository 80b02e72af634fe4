// Defines whole_percents: shares of a whole rounded to whole percents that add up to 100, as the
// model table and the HTML report both print them.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

namespace ktune::tools {

// Each fraction (of 1) in whole percents, rounded so that they add up to 100 when the fractions
// add up to 1: each is rounded down, then the largest remainders round up. A row without a
// fraction (nullopt) stays nullopt.
inline std::vector<std::optional<int>> whole_percents(
    const std::vector<std::optional<double>>& fractions) {
  std::vector<std::optional<int>> out(fractions.size());
  std::vector<std::pair<double, size_t>> remainders;
  int given = 0;
  for (size_t i = 0; i < fractions.size(); ++i) {
    if (!fractions[i] || !std::isfinite(*fractions[i])) continue;
    const double exact = 100 * *fractions[i];
    out[i] = static_cast<int>(std::floor(exact));
    given += *out[i];
    remainders.emplace_back(exact - *out[i], i);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; k < remainders.size() && given < 100; ++k, ++given)
    ++*out[remainders[k].second];
  return out;
}

}  // namespace ktune::tools
