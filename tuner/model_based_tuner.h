// Defines ModelBasedTuner (fit, anneal, pick, explore; AutoTVM's XGBTuner in C++) and XGBTuner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cost_model/cost_model.h"
#include "cost_model/features.h"
#include "cost_model/xgboost_model.h"
#include "schedule_space/config_space.h"
#include "schedule_space/task.h"
#include "tuner/simulated_annealing.h"
#include "tuner/submodular_pick.h"
#include "tuner/tuner.h"

namespace ktune::tuner {

// Defaults follow AutoTVM's XGBTuner (128 chains x 500 steps, 5% random) except the plan: AutoTVM
// refits every 64 results; refitting after every batch of 16 (`ktune tune`'s batch size) uses
// each result as soon as it arrives, and on bench/tuner_replay's landscapes it reached 95% of
// the best in about half the trials of plan 64 (a refit costs ~0.1 s, a batch ~2 s to measure).
struct ModelTunerParams {
  size_t plan_size = 16;        // configs per plan; the model is refit every plan_size results
  size_t first_fit = 0;         // random results before the first fit (0 = plan_size)
  double epsilon = 0.05;        // share of each plan taken at random (exploration), rounded
  size_t candidate_factor = 2;  // annealing keeps plan_size * this; the pick keeps plan_size
  // Rows a fit sees at most (0 = every result): beyond, the best half of them and a seeded
  // uniform sample of the other results. A fit's cost grows with its rows, and a job that
  // resumes a workload's long random phase would otherwise refit on every logged record after
  // every batch.
  size_t max_fit_rows = 4096;
  AnnealingParams annealing{};  // its seed is replaced by one derived from `seed`
  PickParams pick{};
  uint64_t seed = 0;
};

// One refit, for telemetry: the model's quality on the configs measured after it.
struct RefitStats {
  size_t trials = 0;                       // measurements received by the time of the fit
  size_t fit_rows = 0;                     // of them, the rows the model was fitted on
  double fit_s = 0;                        // wall time of the fit
  double search_s = 0;                     // wall time of annealing + pick
  std::optional<double> rank_correlation;  // Spearman(predicted, measured throughput) on the
                                           // plan that followed; nullopt until >= 3 measured
  size_t plan_measured = 0;  // measured configs that rank_correlation is computed over
  bool transferred = false;  // the plan came from seed_plan (a history model), not from a fit
};

// The tuner proposes random configs until the first fit (after plan_size results with at least
// one success), then the plan: the annealing's best candidates not measured yet, narrowed by the
// submodular pick, its last epsilon share replaced by random configs.
// Keeps references to the space, model and extractor: they must outlive the tuner. One thread.
class ModelBasedTuner final : public Tuner {
 public:
  ModelBasedTuner(const schedule_space::ConfigSpace& space, cost_model::CostModel& model,
                  cost_model::FeatureExtractor& features, ModelTunerParams params = {});

  std::string name() const override { return "xgb"; }
  bool has_next() const override;
  // Throws what the model or the extractor throw (ktune::Error).
  std::vector<schedule_space::Config> next_batch(size_t n) override;
  // Refits when plan_size new results arrived since the last fit. Throws as next_batch.
  void update(const std::vector<MeasureInput>& inputs,
              const std::vector<MeasureResult>& results) override;

  // Makes `plan` (best first, with the scores of the model that chose it, e.g. a transfer model
  // trained on other workloads) the current plan, as if a refit had produced it: its configs
  // are proposed first (less the epsilon share of random ones) and its rank correlation is
  // tracked as a RefitStats entry with transferred = true. Configs already visited are dropped.
  // The first own refit replaces it.
  void seed_plan(const std::vector<ScoredIndex>& plan);

  // Spearman correlation between the latest model's predictions and the measured throughput
  // of the configs measured since that fit (failed = 0); nullopt before 3 such results.
  std::optional<double> last_rank_correlation() const;
  // The rank correlation of the newest plan that has one (the current plan's once 3 of its
  // configs are measured, else the one before): what progress output shows. nullopt before any.
  std::optional<double> latest_rank_correlation() const;
  // One entry per refit, oldest first.
  const std::vector<RefitStats>& refits() const { return refits_; }
  const ModelTunerParams& params() const { return params_; }
  // Results received so far (resumed ones included).
  size_t measured() const { return measured_.size(); }
  // Configs proposed or measured so far.
  const std::unordered_set<uint64_t>& visited() const { return visited_.indices(); }

 private:
  void refit();
  // Positions in measured_ of the rows the next fit sees (all of them up to max_fit_rows).
  std::vector<size_t> fit_rows();
  uint64_t random_config();  // a valid unvisited config, or space size when none is left
  void track_prediction(const std::vector<uint64_t>& indices);

  const schedule_space::ConfigSpace& space_;
  cost_model::CostModel& model_;
  cost_model::FeatureExtractor& features_;
  ModelTunerParams params_;
  std::mt19937_64 rng_;
  schedule_space::ConfigSet visited_;  // proposed or measured
  SimulatedAnnealing annealing_;

  std::vector<uint64_t> measured_;        // measured indices, in arrival order
  std::vector<double> measured_costs_;    // mean cost, +inf when failed
  cost_model::FeatureMatrix measured_x_;  // features of measured_'s first rows, extracted once
  size_t fitted_at_ = 0;                  // measured_.size() at the last fit
  std::vector<uint64_t> plan_;
  size_t plan_pos_ = 0;
  bool exhausted_ = false;

  // Predictions of the latest model for configs it proposed, and what came back for them.
  std::unordered_map<uint64_t, float> predicted_;
  std::vector<double> seen_predicted_, seen_cost_;
  std::vector<RefitStats> refits_;
};

// Which features the XGBoost model of make_xgb_tuner sees.
enum class FeatureKind {
  kKnob,  // ConfigSpace::knob_features only: microseconds per config
  kLoop,  // loop-context features of the lowered IR + knob features (cost_model/loop_features.h):
          // ~1-2 ms per new config (cached), more informative across schedules
};

struct XGBTunerParams {
  ModelTunerParams search{};
  cost_model::XGBoostParams model{};  // its seed is replaced by one derived from search.seed
  // Knob features by default: loop features lower every candidate before a refit, which on matmul
  // 256 (a 15,120-config space) costs seconds on a 2-core machine, against well under 1 s for
  // knobs.
  FeatureKind features = FeatureKind::kKnob;
  size_t feature_threads = 2;  // threads extracting loop features (kLoop only)
};

// A ModelBasedTuner that owns its XGBoost model and feature extractor: what `--tuner xgb` uses.
// Keeps a copy of the task (which shares its space). One thread.
class XGBTuner final : public Tuner {
 public:
  explicit XGBTuner(const schedule_space::Task& task, XGBTunerParams params = {});
  ~XGBTuner() override;

  std::string name() const override { return "xgb"; }
  bool has_next() const override { return search_->has_next(); }
  std::vector<schedule_space::Config> next_batch(size_t n) override {
    return search_->next_batch(n);
  }
  void update(const std::vector<MeasureInput>& inputs,
              const std::vector<MeasureResult>& results) override {
    search_->update(inputs, results);
  }

  // The model (for tuning_db::save_model once fitted) and the search (for telemetry).
  const cost_model::XGBoostModel& model() const { return *model_; }
  const ModelBasedTuner& search() const { return *search_; }
  ModelBasedTuner& search() { return *search_; }
  FeatureKind feature_kind() const { return kind_; }
  // Features per row of the model's input.
  size_t feature_length() const { return features_->length(); }

 private:
  schedule_space::Task task_;
  FeatureKind kind_;
  std::unique_ptr<cost_model::XGBoostModel> model_;
  std::unique_ptr<cost_model::FeatureExtractor> features_;
  std::unique_ptr<ModelBasedTuner> search_;
};

}  // namespace ktune::tuner
