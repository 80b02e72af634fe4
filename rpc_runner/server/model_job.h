// Declares run_model_job: a model job's tuning in the server (tuner::ModelTuning over the fleet, a
// model report after each allocation).
#pragma once

#include <cstdint>
#include <functional>

#include <nlohmann/json.hpp>

#include "rpc_runner/protocol/job_types.h"
#include "schedule_space/task.h"
#include "tuner/measure.h"
#include "tuner/tuning_session.h"
#include "tuning_db/database.h"

namespace ktune::rpc_runner {

// What run_model_job returns.
struct ModelJobResult {
  nlohmann::json
      summary;  // tuner::model_summary_json plus "done" (trials of the job, restarts included)
  bool cancelled = false;  // session.should_stop ended it
};

// Rebuilds the model's tasks (spec.model) for `traits` (the devices' target), measures every
// tuned workload's untuned fallback on `measurer` and spends the budget left (spec.session.trials -
// done_before) with a task scheduler, each allocation a TuningSession resuming from `db` (so a
// second job of the same model, or this one after a restart, measures no config twice).
// `session` carries what every allocation shares (tuner, seed, transfer, device key, emulated,
// should_stop). on_report (may be empty) sees tuner::model_summary_json after every allocation,
// with "done" = done_before + trials of this call. When the run was not cancelled, its summary
// is stored as a model run of the log (tuning_db::record_model_run) for `ktune report`.
// Throws Error(kInvalidArgument) when no task can be tuned on the target, what the sessions throw.
ModelJobResult run_model_job(const JobSpec& spec, const schedule_space::TargetTraits& traits,
                             tuning_db::Database& db, tuner::Measurer& measurer,
                             const tuning_db::TargetKey& target,
                             const tuner::SessionOptions& session, uint64_t done_before,
                             const std::function<void(const nlohmann::json&)>& on_report);

}  // namespace ktune::rpc_runner
