// Defines transfer learning: a ranking model trained on the log's other workloads of a template.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include "cost_model/xgboost_model.h"
#include "schedule_space/task.h"
#include "tuner/simulated_annealing.h"
#include "tuning_db/record.h"

namespace ktune::tuner {

struct TransferParams {
  size_t min_workloads = 1;    // other workloads the history must cover
  size_t min_ok_records = 16;  // successful history records needed to train
  size_t pool = 512;  // random unvisited configs of the new space scored for the first plan
  size_t feature_threads = 2;  // threads lowering configs for their features
  cost_model::XGBoostParams model{};
  uint64_t seed = 0;  // the pool's sampling and the model's seed
};

// A rank:pairwise model of the loop-context features only (cost_model/loop_features.h): they
// describe the lowered loop nest (extents, strides, bytes touched), so they mean the same thing
// for every shape of a template, unlike knob features (split factors of different extents).
// Each workload of the history is one query group with labels normalized to its own best, so
// the model learns which loop nests rank high within a shape, not which shape is fastest.
class TransferModel {
 public:
  // Trains on the records of `history` that belong to the task's template and target but to
  // another workload (records of the task's own workload are ignored: the tuner sees those
  // through resume). Records whose config no longer fits its template are skipped.
  // Returns nullptr when fewer than params.min_workloads workloads or params.min_ok_records
  // successful records remain. Throws what lowering or the model throw (ktune::Error).
  static std::unique_ptr<TransferModel> train(const schedule_space::Task& task,
                                              const std::vector<tuning_db::Record>& history,
                                              const TransferParams& params = {});

  // Returns the model's score for each config of `task` (higher = predicted faster).
  // Throws as train.
  std::vector<float> score(const schedule_space::Task& task,
                           const std::vector<uint64_t>& indices) const;

  // The first plan of a new tuning run: scores params.pool random configs of the task's space
  // not in `exclude`, and keeps n of them with the submodular pick (score traded against knob
  // diversity), best first, with their scores. Throws as score.
  std::vector<ScoredIndex> plan(const schedule_space::Task& task, size_t n,
                                const std::unordered_set<uint64_t>& exclude = {}) const;

  size_t rows() const { return rows_; }
  size_t workloads() const { return workloads_; }
  const cost_model::XGBoostModel& model() const { return *model_; }

 private:
  TransferModel() = default;
  TransferParams params_;
  std::unique_ptr<cost_model::XGBoostModel> model_;
  size_t rows_ = 0;
  size_t workloads_ = 0;
};

// The best configs measured for workloads whose config space is the task's (same template, same
// knobs and candidates: e.g. a convolution that differs only in its fused epilogue, or a layer
// repeated with another residual input). A config index means the same schedule in both, so
// these are the likeliest good configs of the task before any of its own is measured. Each
// other workload's successful records best first, interleaved across workloads, at most n, none
// in `exclude`; a record whose config does not denote the same entities here is skipped.
std::vector<uint64_t> same_space_best(const schedule_space::Task& task,
                                      const std::vector<tuning_db::Record>& history, size_t n,
                                      const std::unordered_set<uint64_t>& exclude = {});

}  // namespace ktune::tuner
