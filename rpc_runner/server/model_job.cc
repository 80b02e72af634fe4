// A model job in the server: the client's task list rebuilt for the devices, tuned by ModelTuning
// over the fleet.
#include "rpc_runner/server/model_job.h"

#include "frontend/model_tasks.h"
#include "tuner/model_tuning.h"
#include "tuning_db/report.h"

namespace ktune::rpc_runner {

ModelJobResult run_model_job(const JobSpec& spec, const schedule_space::TargetTraits& traits,
                             tuning_db::Database& db, tuner::Measurer& measurer,
                             const tuning_db::TargetKey& target,
                             const tuner::SessionOptions& session, uint64_t done_before,
                             const std::function<void(const nlohmann::json&)>& on_report) {
  // The devices' traits decide the tuned forms (e.g. conv2d_nchwc's blocking), as a local run on
  // the device would: the client's own tuned_as keys are only what its machine would tune.
  const frontend::ModelTasks tasks = frontend::tasks_from_json(spec.model, traits);
  tuner::ModelTuningOptions options;
  options.session = session;
  options.scheduler.strategy = spec.strategy;
  options.scheduler.trials = spec.session.trials - done_before;
  options.scheduler.batch_size = spec.session.batch_size;
  options.scheduler.seed = spec.session.seed;
  tuner::ModelTuning tuning(tasks, db, measurer, target, options);
  auto summary = [&](const tuner::ModelTuningReport& r) {
    nlohmann::json j = tuner::model_summary_json(tasks, r);
    j["done"] = done_before + r.trials;
    // What `jobs watch` and the server's report say under the library columns.
    j["libraries_note"] =
        "not timed by the server: its devices time the tuned kernels only (`ktune tune-model "
        "--server` races oneDNN and OpenBLAS where it runs, on a machine of the devices' target)";
    return j;
  };
  const tuner::ModelTuningReport report = tuning.run([&](const tuner::ModelTuningReport& r) {
    if (on_report) on_report(summary(r));
  });
  ModelJobResult result{summary(report), report.cancelled};
  if (!result.cancelled)
    tuning_db::record_model_run(db, tasks.model, target.target, result.summary);
  return result;
}

}  // namespace ktune::rpc_runner
