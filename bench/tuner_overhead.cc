// Measures the search overhead of the model-based tuner per batch of 64: XGBoost fit + simulated
// annealing (128 chains x up to 500 steps) + submodular pick, on a space of 10^8 configs with a
// synthetic runtime landscape (measurement itself is free here). Last line: overhead_s <mean>.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "cost_model/features.h"
#include "cost_model/xgboost_model.h"
#include "schedule_space/config_space.h"
#include "tuner/model_based_tuner.h"

namespace {

using namespace ktune;

constexpr int kKnobs = 8;

double synthetic_cost(const schedule_space::Config& c) {
  double cost = 1.0;
  int64_t v[kKnobs];
  for (int k = 0; k < kKnobs; ++k) v[k] = c.entities()[static_cast<size_t>(k)].values[0];
  for (int k = 0; k < kKnobs; ++k) {
    double d = static_cast<double>(v[k] - (3 * k + 2) % 10);
    cost += (0.02 + 0.01 * k) * d * d;
  }
  cost *= 1.0 + 0.05 * std::abs(static_cast<double>(v[0] - v[1]));
  return v[7] == 9 ? -1.0 : cost;
}

}  // namespace

int main() {
  schedule_space::ConfigSpace space("synthetic");
  std::vector<int64_t> values;
  for (int64_t v = 0; v < 10; ++v) values.push_back(v);
  for (int k = 0; k < kKnobs; ++k) space.define_knob("k" + std::to_string(k), values);

  const int kPlans = 12;
  cost_model::XGBoostModel model(cost_model::XGBoostParams{.seed = 1});
  cost_model::KnobFeatureExtractor features(space);
  tuner::ModelBasedTuner tuner(space, model, features,
                               tuner::ModelTunerParams{.plan_size = 64, .seed = 1});

  std::printf("space size %llu, plan 64, chains 128, steps <= 500\n",
              static_cast<unsigned long long>(space.size()));
  std::printf("%6s %7s %8s %9s %9s %9s\n", "batch", "trials", "fit_s", "search_s", "total_s",
              "spearman");
  double best = std::numeric_limits<double>::infinity();
  std::vector<double> totals;
  size_t reported = 0;
  for (int b = 0; b < kPlans + 1; ++b) {
    auto configs = tuner.next_batch(64);
    std::vector<tuner::MeasureInput> inputs;
    std::vector<tuner::MeasureResult> results;
    for (const auto& c : configs) {
      double cost = synthetic_cost(c);
      inputs.push_back({nullptr, c});
      results.push_back(cost > 0 ? tuner::make_ok_result({cost})
                                 : tuner::make_error_result(ErrorKind::kBuild, "synthetic"));
      if (cost > 0) best = std::min(best, cost);
    }
    tuner.update(inputs, results);
    // Print a refit's row once the plan after it was measured (so its correlation is known).
    const auto& refits = tuner.refits();
    while (reported + 1 < refits.size() || (b == kPlans && reported < refits.size())) {
      const tuner::RefitStats& r = refits[reported];
      double total = r.fit_s + r.search_s;
      totals.push_back(total);
      std::printf(
          "%6zu %7zu %8.3f %9.3f %9.3f %9s\n", reported + 1, r.trials, r.fit_s, r.search_s, total,
          r.rank_correlation ? std::to_string(*r.rank_correlation).substr(0, 6).c_str() : "-");
      ++reported;
    }
  }
  std::sort(totals.begin(), totals.end());
  double mean = 0;
  for (double t : totals) mean += t;
  mean /= static_cast<double>(totals.size());
  std::printf("best cost found %.4f (optimum 1.0) after %d trials\n", best, 64 * (kPlans + 1));
  std::printf("per batch of 64: mean %.3f s, median %.3f s, max %.3f s (target <= 0.5 s)\n", mean,
              totals[totals.size() / 2], totals.back());
  std::printf("overhead_s %.3f\n", mean);
  return 0;
}
