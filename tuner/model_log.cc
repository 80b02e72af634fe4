// ModelRunLog: run row, batch quality and model persistence of the xgb tuner.
#include "tuner/model_log.h"

#include <vector>

#include "cost_model/loop_features.h"
#include "tuning_db/model_store.h"
#include "tuning_db/run_store.h"

namespace ktune::tuner {

struct ModelRunLog::State {
  tuning_db::Database* db;
  const schedule_space::Task* task;
  tuning_db::TargetKey target;
  const XGBTuner* tuner;
  int64_t run_id = 0;
  bool emulated = false;
  std::vector<size_t> written;  // plan_measured last stored, per plan

  void store_quality() {
    const auto& refits = tuner->search().refits();
    written.resize(refits.size(), 0);
    for (size_t i = 0; i < refits.size(); ++i) {
      const RefitStats& r = refits[i];
      if (r.plan_measured == written[i]) continue;
      tuning_db::BatchQuality q;
      q.batch = static_cast<int64_t>(i);
      q.records = static_cast<int64_t>(r.plan_measured);
      q.rank_correlation = r.rank_correlation;
      tuning_db::RunStore(*db).add_batch_quality(run_id, q);
      written[i] = r.plan_measured;
    }
  }
};

ModelRunLog::ModelRunLog(tuning_db::Database& db, const schedule_space::Task& task,
                         const tuning_db::TargetKey& target, const XGBTuner& tuner,
                         nlohmann::json options, int64_t existing_run_id)
    : state_(std::make_shared<State>()) {
  state_->db = &db;
  state_->task = &task;
  state_->target = target;
  state_->tuner = &tuner;
  state_->emulated = options.is_object() && options.value("emulated", false);
  if (existing_run_id != 0) {
    state_->run_id = existing_run_id;
    return;
  }
  tuning_db::RunInfo run;
  run.tuner = tuner.name();
  run.workload_key = task.workload_key();
  run.target = target.target;
  run.options = std::move(options);
  state_->run_id = tuning_db::RunStore(db).begin(run);
}

int64_t ModelRunLog::run_id() const { return state_->run_id; }

Callback ModelRunLog::callback() {
  auto state = state_;
  return [state](const std::vector<MeasureInput>&, const std::vector<MeasureResult>&) {
    state->store_quality();
  };
}

bool ModelRunLog::finish() {
  State& s = *state_;
  s.store_quality();
  bool saved = false;
  if (s.tuner->model().fitted()) {
    const ModelBasedTuner& search = s.tuner->search();
    const bool loop = s.tuner->feature_kind() == FeatureKind::kLoop;
    tuning_db::ModelInfo info;
    info.name = s.emulated ? kXgbEmulatedModelName : kXgbModelName;
    info.scope = s.task->template_name();
    info.target = s.target;
    size_t own_refits = 0;
    for (const RefitStats& r : search.refits()) own_refits += r.transferred ? 0 : 1;
    info.metadata = {
        {"workload_key", s.task->workload_key()},
        {"trials", search.measured()},
        {"features", loop ? "loop" : "knob"},
        {"feature_version", loop ? cost_model::kLoopFeatureVersion : kKnobFeatureVersion},
        {"feature_length", s.tuner->feature_length()},
        {"refits", own_refits},
        {"run_id", s.run_id},
        {"emulated", s.emulated}};
    std::optional<double> rho = search.latest_rank_correlation();
    info.metadata["rank_correlation"] = rho ? nlohmann::json(*rho) : nlohmann::json(nullptr);
    std::vector<uint8_t> blob = s.tuner->model().save();
    tuning_db::ModelStore(*s.db).save(info, blob);
    saved = true;
  }
  tuning_db::RunStore(*s.db).finish(s.run_id);
  return saved;
}

}  // namespace ktune::tuner
