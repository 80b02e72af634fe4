// Defines XGBoostModel: the CostModel on XGBoost's C API (rank:pairwise), behind RAII handles.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "cost_model/cost_model.h"

namespace ktune::cost_model {

// Training parameters. The booster defaults are AutoTVM's XGBoostCostModel ones.
struct XGBoostParams {
  int max_depth = 3;
  double gamma = 1e-4;
  double min_child_weight = 1.0;
  double eta = 0.3;
  double lambda = 1.0;
  double alpha = 0.0;
  std::string objective = "rank:pairwise";
  int max_rounds = 8000;                // upper bound on boosting rounds
  int early_stopping_rounds = 20;       // stop after this many rounds without a better metric
  int eval_top_k = 64;                  // the metric is NDCG@k (linear gain) on the held-out slice
  double validation_fraction = 0.2;     // share of each group held out for early stopping
  size_t min_rows_for_validation = 40;  // below this, train fixed_rounds without a hold-out
  int fixed_rounds = 50;
  bool refit_on_all_rows = true;  // after early stopping, retrain on every row for the best count
  // XGBoost's nthread. 1 by default: its OpenMP threads spin-wait, and on a loaded 2-core
  // machine nthread=2 made a 1000-row fit 100x slower (7 s instead of 0.07 s).
  int threads = 1;
  std::string tree_method = "exact";  // "hist" scales better to many rows or threads
  uint64_t seed = 0;                  // row split and XGBoost's own seed
};

// What the last fit did, for telemetry and tests.
struct FitReport {
  int rounds = 0;             // boosting rounds of the final booster
  double best_metric = -1.0;  // held-out NDCG@k at the chosen round; -1 without a hold-out
  size_t train_rows = 0;
  size_t validation_rows = 0;
};

// A rank:pairwise XGBoost booster. Thread-safety: as CostModel (predict serializes on a mutex,
// since XGBoost's DMatrix prediction is not documented as reentrant).
class XGBoostModel final : public CostModel {
 public:
  explicit XGBoostModel(XGBoostParams params = {});
  ~XGBoostModel() override;
  XGBoostModel(const XGBoostModel&) = delete;
  XGBoostModel& operator=(const XGBoostModel&) = delete;

  std::string name() const override { return "xgb"; }
  void fit(const FeatureMatrix& x, std::span<const float> labels,
           std::span<const uint32_t> groups = {}) override;
  std::vector<float> predict(const FeatureMatrix& x) const override;
  bool fitted() const override;
  std::vector<uint8_t> save() const override;
  void load(std::span<const uint8_t> bytes) override;

  const XGBoostParams& params() const { return params_; }
  const FitReport& last_fit() const { return last_fit_; }

 private:
  struct Booster;  // RAII owner of a BoosterHandle (xgboost_model.cc)

  XGBoostParams params_;
  FitReport last_fit_;
  std::unique_ptr<Booster> booster_;
  size_t num_features_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace ktune::cost_model
