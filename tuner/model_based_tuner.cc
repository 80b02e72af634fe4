// ModelBasedTuner: fit, anneal, pick, explore; with rank-correlation telemetry per refit.
#include "tuner/model_based_tuner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "cost_model/loop_features.h"
#include "cost_model/ranking_metrics.h"
#include "support/error.h"
#include "support/seconds_since.h"

namespace ktune::tuner {
namespace {

AnnealingParams seeded(AnnealingParams p, uint64_t seed) {
  p.seed = seed ^ 0x9e3779b97f4a7c15ull;
  return p;
}

}  // namespace

ModelBasedTuner::ModelBasedTuner(const schedule_space::ConfigSpace& space,
                                 cost_model::CostModel& model,
                                 cost_model::FeatureExtractor& features, ModelTunerParams params)
    : space_(space),
      model_(model),
      features_(features),
      params_(params),
      rng_(params.seed),
      visited_(space),
      annealing_(space_moves(space), seeded(params.annealing, params.seed)) {
  if (params_.plan_size == 0) {
    throw Error(ErrorKind::kInvalidArgument, "model-based tuner: plan_size must be positive");
  }
}

bool ModelBasedTuner::has_next() const { return !exhausted_ && visited_.size() < space_.size(); }

uint64_t ModelBasedTuner::random_config() {
  std::vector<uint64_t> one = space_.sample(1, rng_, visited_);
  return one.empty() ? space_.size() : one[0];
}

std::vector<schedule_space::Config> ModelBasedTuner::next_batch(size_t n) {
  std::vector<uint64_t> chosen;
  // Rounded, not truncated: a plan of 16 still keeps one random slot at epsilon 0.05.
  auto random_share =
      static_cast<size_t>(std::lround(params_.epsilon * static_cast<double>(params_.plan_size)));
  size_t model_slots = plan_.size() - std::min(random_share, plan_.size());
  while (chosen.size() < n) {
    uint64_t index = space_.size();
    while (plan_pos_ < model_slots && index == space_.size()) {
      uint64_t c = plan_[plan_pos_++];
      if (!visited_.contains(c)) index = c;
    }
    if (index == space_.size()) {
      if (plan_pos_ < plan_.size()) ++plan_pos_;  // an exploration slot of the plan
      index = random_config();
    }
    if (index == space_.size()) {
      exhausted_ = true;
      break;
    }
    visited_.insert(index);
    chosen.push_back(index);
  }
  track_prediction(chosen);
  std::vector<schedule_space::Config> out;
  out.reserve(chosen.size());
  for (uint64_t index : chosen) out.push_back(space_.get(index));
  return out;
}

void ModelBasedTuner::track_prediction(const std::vector<uint64_t>& indices) {
  if (!model_.fitted() || refits_.empty()) return;
  std::vector<uint64_t> todo;
  for (uint64_t i : indices) {
    if (predicted_.count(i) == 0) todo.push_back(i);
  }
  if (todo.empty()) return;
  std::vector<float> p = model_.predict(features_.extract(todo));
  for (size_t i = 0; i < todo.size(); ++i) predicted_[todo[i]] = p[i];
}

void ModelBasedTuner::update(const std::vector<MeasureInput>& inputs,
                             const std::vector<MeasureResult>& results) {
  if (inputs.size() != results.size()) {
    throw Error(ErrorKind::kInvalidArgument, "update: inputs and results differ in number");
  }
  bool new_pairs = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const schedule_space::Config& config = inputs[i].config;
    uint64_t index = config.index();
    if (index >= space_.size() || !(space_.get(index).entities() == config.entities())) {
      try {
        index = space_.index_of(config);
      } catch (const Error& e) {
        spdlog::debug("xgb tuner: ignoring a result whose config is not in this space: {}",
                      e.what());
        continue;
      }
    }
    double cost =
        results[i].ok() ? results[i].mean_cost() : std::numeric_limits<double>::infinity();
    visited_.insert(index);
    measured_.push_back(index);
    measured_costs_.push_back(cost);
    auto it = predicted_.find(index);
    if (it != predicted_.end()) {
      seen_predicted_.push_back(it->second);
      seen_cost_.push_back(cost);
      predicted_.erase(it);  // a config counts once
      new_pairs = true;
    }
  }
  if (new_pairs && !refits_.empty()) {
    RefitStats& last = refits_.back();
    last.plan_measured = seen_cost_.size();
    if (seen_cost_.size() >= 3) {
      std::vector<double> throughput(seen_cost_.size());
      for (size_t i = 0; i < seen_cost_.size(); ++i) {
        throughput[i] = std::isfinite(seen_cost_[i]) && seen_cost_[i] > 0 ? 1.0 / seen_cost_[i] : 0;
      }
      last.rank_correlation = cost_model::spearman_correlation(seen_predicted_, throughput);
    }
  }
  const size_t first_fit = params_.first_fit > 0 ? params_.first_fit : params_.plan_size;
  if (measured_.size() >= (fitted_at_ == 0 ? first_fit : fitted_at_ + params_.plan_size)) refit();
}

void ModelBasedTuner::seed_plan(const std::vector<ScoredIndex>& plan) {
  plan_.clear();
  predicted_.clear();
  seen_predicted_.clear();
  seen_cost_.clear();
  for (const ScoredIndex& c : plan) {
    if (c.index >= space_.size() || visited_.contains(c.index)) continue;
    if (!predicted_.emplace(c.index, c.score).second) continue;
    plan_.push_back(c.index);
  }
  plan_pos_ = 0;
  RefitStats stats;
  stats.trials = 0;
  stats.transferred = true;
  refits_.push_back(stats);
}

std::optional<double> ModelBasedTuner::last_rank_correlation() const {
  if (refits_.empty()) return std::nullopt;
  return refits_.back().rank_correlation;
}

std::optional<double> ModelBasedTuner::latest_rank_correlation() const {
  for (auto it = refits_.rbegin(); it != refits_.rend(); ++it) {
    if (it->rank_correlation) return it->rank_correlation;
  }
  return std::nullopt;
}

void ModelBasedTuner::refit() {
  bool any_ok = std::any_of(measured_costs_.begin(), measured_costs_.end(),
                            [](double c) { return std::isfinite(c) && c > 0; });
  if (!any_ok) return;  // nothing to rank yet: keep exploring at random

  RefitStats stats;
  stats.trials = measured_.size();
  stats.fit_rows = std::min(measured_.size(),
                            params_.max_fit_rows > 0 ? params_.max_fit_rows : measured_.size());
  auto start = std::chrono::steady_clock::now();
  if (measured_x_.rows < measured_.size()) {
    const std::vector<uint64_t> fresh(measured_.begin() + static_cast<ptrdiff_t>(measured_x_.rows),
                                      measured_.end());
    const cost_model::FeatureMatrix x = features_.extract(fresh);
    measured_x_.cols = x.cols;
    measured_x_.data.insert(measured_x_.data.end(), x.data.begin(), x.data.end());
    measured_x_.rows += x.rows;
  }
  const std::vector<size_t> rows = fit_rows();
  if (rows.size() == measured_.size()) {
    model_.fit(measured_x_, cost_model::throughput_labels(measured_costs_));
  } else {
    cost_model::FeatureMatrix x(rows.size(), measured_x_.cols);
    std::vector<double> costs(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto src = measured_x_.row(rows[r]);
      std::copy(src.begin(), src.end(), x.row(r).begin());
      costs[r] = measured_costs_[rows[r]];
    }
    model_.fit(x, cost_model::throughput_labels(costs));
  }
  stats.fit_s = seconds_since(start);

  start = std::chrono::steady_clock::now();
  BatchScore score = [this](const std::vector<uint64_t>& indices) {
    return model_.predict(features_.extract(indices));
  };
  std::vector<ScoredIndex> candidates = annealing_.find_maximums(
      params_.plan_size * std::max<size_t>(1, params_.candidate_factor), score, visited_.indices());
  std::vector<float> scores;
  std::vector<std::vector<uint64_t>> digits;
  scores.reserve(candidates.size());
  digits.reserve(candidates.size());
  for (const ScoredIndex& c : candidates) {
    scores.push_back(c.score);
    digits.push_back(space_.knob_indices(c.index));
  }
  std::vector<size_t> picked = submodular_pick(scores, digits, params_.plan_size, params_.pick);
  stats.search_s = seconds_since(start);

  plan_.clear();
  predicted_.clear();
  seen_predicted_.clear();
  seen_cost_.clear();
  for (size_t p : picked) {
    plan_.push_back(candidates[p].index);
    predicted_[candidates[p].index] = candidates[p].score;
  }
  plan_pos_ = 0;
  fitted_at_ = measured_.size();
  refits_.push_back(stats);
  spdlog::debug("xgb tuner: refit on {} trials in {:.3f} s, search {:.3f} s, plan of {}",
                stats.trials, stats.fit_s, stats.search_s, plan_.size());
}

std::vector<size_t> ModelBasedTuner::fit_rows() {
  const size_t n = measured_.size();
  std::vector<size_t> rows(n);
  std::iota(rows.begin(), rows.end(), size_t{0});
  const size_t cap = params_.max_fit_rows;
  if (cap == 0 || n <= cap) return rows;
  // The best half of the cap (ties: the earlier result), so the top of the ranking that the
  // plan is drawn from is always learnt; the rest a uniform sample of the others, failures
  // included, so the model still sees the whole space.
  const size_t best = cap / 2;
  auto cost = [&](size_t r) {
    const double c = measured_costs_[r];
    return std::isfinite(c) && c > 0 ? c : std::numeric_limits<double>::infinity();
  };
  std::stable_sort(rows.begin(), rows.end(), [&](size_t a, size_t b) { return cost(a) < cost(b); });
  std::mt19937_64 rng(params_.seed ^ (0x6a09e667f3bcc909ull * (refits_.size() + 1)));
  for (size_t i = best; i < cap; ++i) {
    std::uniform_int_distribution<size_t> pick(i, n - 1);
    std::swap(rows[i], rows[pick(rng)]);
  }
  rows.resize(cap);
  std::sort(rows.begin(), rows.end());
  return rows;
}

XGBTuner::XGBTuner(const schedule_space::Task& task, XGBTunerParams params)
    : task_(task), kind_(params.features) {
  params.model.seed = params.search.seed * 0x2545f4914f6cdd1dull + 1;
  model_ = std::make_unique<cost_model::XGBoostModel>(params.model);
  if (params.features == FeatureKind::kLoop) {
    cost_model::LoopFeatureParams fp;
    fp.cache.threads = std::max<size_t>(1, params.feature_threads);
    features_ = std::make_unique<cost_model::LoopFeatureExtractor>(task_, fp);
  } else {
    features_ = std::make_unique<cost_model::KnobFeatureExtractor>(task_.space());
  }
  search_ = std::make_unique<ModelBasedTuner>(task_.space(), *model_, *features_, params.search);
}

XGBTuner::~XGBTuner() = default;

}  // namespace ktune::tuner
