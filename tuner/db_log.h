// Defines the tuning loop's link to the tuning log: a logging callback and resume from the log.
#pragma once

#include <string>
#include <vector>

#include "schedule_space/task.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"
#include "tuning_db/record.h"

namespace ktune::tuner {

// What a record needs beyond the task, config and result.
struct RecordContext {
  tuning_db::TargetKey target;  // canonical target string + LLVM version
  std::string device_key;       // "" = unspecified
  std::string tuner;            // Tuner::name()
  std::string ktune_version;
  int64_t run_id = 0;     // Database::begin_run id of this run; 0 = none
  bool emulated = false;  // every record is marked emulated (else as each result says)
  std::string client{};   // the tuning server's client whose job it is; "" = none
};

// Returns the record of one measurement (emulated when the result or the context is; the
// context's client, the result's worker). batch is the batch number within the run.
tuning_db::Record make_record(const schedule_space::Task& task,
                              const schedule_space::Config& config, const MeasureResult& result,
                              const RecordContext& context, int64_t batch);

// Logs a measurement of the task's fallback config (Task::fallback_config) as a record of tuner
// "fallback", batch 0 and no run (a job's progress counts its trials only), unless the log holds
// that config already for this emulated-ness. Every run that measures the fallback logs it through
// here, so that best() and build never serve a config slower than the workload's measured fallback
// on that target. Returns whether it added the record. Throws Error(kDatabase).
bool log_fallback(tuning_db::Database& db, const schedule_space::Task& task,
                  const MeasureResult& result, RecordContext context);

// Returns a callback that adds every batch to `db` in one transaction (all or nothing), so
// the log holds exactly what was measured. `db` and `task` must outlive it. The callback
// throws Error(kDatabase) when the write fails, which ends the tuning loop.
Callback database_callback(tuning_db::Database& db, const schedule_space::Task& task,
                           const RecordContext& context);

// Returns the measurements of this workload on this target found in the log (failures
// included, first record per config index; a re-timed one with its re-timed median as its one
// cost, as best ranks it), as configs of the task's space, for
// TuneOptions::resume: only records of this emulated-ness, so that a run on a real device
// measures again what was only measured under emulation (and the reverse). Records whose config
// does not belong to the space (a changed template) are skipped with a warning.
// Throws Error(kDatabase).
std::vector<PastMeasurement> load_past_measurements(tuning_db::Database& db,
                                                    const schedule_space::Task& task,
                                                    const tuning_db::TargetKey& target,
                                                    bool emulated = false);

}  // namespace ktune::tuner
