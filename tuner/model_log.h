// Defines ModelRunLog: the xgb tuner's run row, per-refit model quality and saved model in the log.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "schedule_space/task.h"
#include "tuner/model_based_tuner.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"

namespace ktune::tuner {

// Name under which the xgb tuner's model is saved (scope = template name, plus the target).
inline constexpr const char* kXgbModelName = "xgb-rank";
// The name for a model fitted on emulated timings (a run with options {"emulated": true}), so that
// it never replaces the model of real timings.
inline constexpr const char* kXgbEmulatedModelName = "xgb-rank-emulated";
// Layout version of knob features (ConfigSpace::knob_features); loop features use
// cost_model::kLoopFeatureVersion.
inline constexpr int kKnobFeatureVersion = 1;

// Ties one XGBTuner run to the tuning log. The log, task and tuner must outlive it (and its
// callback). One thread.
class ModelRunLog {
 public:
  // Starts a run row (Database::begin_run) for the tuner on the task's workload, or continues
  // the run `existing_run_id` when it is not 0 (a server-side job resumed after a restart).
  // options: the run's options, stored with the run; {"emulated": true} marks a run on an
  // emulated device, whose model is saved under kXgbEmulatedModelName. Throws Error(kDatabase).
  ModelRunLog(tuning_db::Database& db, const schedule_space::Task& task,
              const tuning_db::TargetKey& target, const XGBTuner& tuner,
              nlohmann::json options = nlohmann::json::object(), int64_t existing_run_id = 0);

  // The run id, for RecordContext::run_id.
  int64_t run_id() const;

  // Returns a callback for TuneOptions::callbacks (it must run after the tuner's update, which
  // tune() guarantees): it stores one BatchQuality per plan (batch = plan number, 0 = the first
  // plan, records = measured configs of the plan the correlation covers) whenever a plan got new
  // measurements. Throws Error(kDatabase) from inside the loop when the write fails.
  Callback callback();

  // Saves the tuner's model when it was fitted (save_model under kXgbModelName, or
  // kXgbEmulatedModelName for an emulated run, scope = the
  // template, with metadata: workload, trials, features, feature_version, feature_length,
  // rank_correlation = the newest measured plan's, refits) and marks the run finished.
  // Returns whether a model was saved. Throws Error(kDatabase).
  bool finish();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace ktune::tuner
