// Defines TuningSession: one tuning run's orchestration (tuner, resume, transfer, model log,
// fallback, logging, progress).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schedule_space/task.h"
#include "support/error.h"
#include "tuner/measure.h"
#include "tuner/retime.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"

namespace ktune::tuner {

struct SessionOptions {
  size_t trials = 64;         // new measurements (the budget)
  std::string tuner = "xgb";  // xgb, random, grid, ga
  uint64_t seed = 0;
  size_t batch_size = 16;
  size_t early_stopping = 0;          // 0 = never
  std::string xgb_features = "knob";  // knob or loop
  bool transfer = true;  // xgb: seed the first plan from the template's other workloads in the log
  size_t transfer_history = 20000;  // newest records read for transfer (0 = all)
  bool measure_fallback = true;     // measure and log the fallback config first (speed-up, best)
  std::string device_key;           // stored in every record ("" = unspecified)
  // The measurer times on an emulated device (qemu): every record of the run is marked emulated
  // (besides those whose MeasureResult::emulated is set), and resume, claims and transfer use
  // only emulated records; false: only real ones, so an emulated timing never shapes a real run.
  bool emulated = false;
  // The tuning server's client whose job this run is, stored in every record ("" = none).
  std::string client;
  int64_t run_id =
      0;  // 0: xgb begins a new run; otherwise records and model quality go to this run
  std::function<bool()> should_stop;  // polled before each batch; true ends the run (cancellation)
  // Claim each config in the log before measuring it, so that another run of the same workload on
  // the same log (another process, another job) never measures it too; claims are released once
  // the result is logged and when the run ends. claim_ttl_s bounds the claims of a run that died
  // on another host (a dead process of this host loses its claims at once).
  bool claim_configs = true;
  double claim_ttl_s = 3600;
  // At the end of the run (unless cancelled or emulated), the retime_top best records of the
  // workload on this target and device key are timed again, interleaved, over retime_rounds
  // rounds (retime_best), and their median becomes the figure best() ranks by. 0 = not at all.
  // An emulated run re-times nothing: its timings say nothing about the device anyway.
  int64_t retime_top = 5;
  int retime_rounds = 3;
  // Say at info level that the run resumes from configs already in the log (a model run's
  // allocations resume from each other by design: it says so once, for the whole model).
  bool say_resume = true;
  // Called after each batch is written to the log, with its results and the write's wall time
  // (a server's metrics); may be empty.
  std::function<void(const std::vector<MeasureResult>& logged, double write_s)> on_logged;
};

// Throws Error(kInvalidArgument), one line each, for an unknown tuner or feature kind, 0 trials,
// a batch size of 0, a claim ttl that is not finite and > 0, or a negative retime_top or
// retime_rounds.
void validate(const SessionOptions& options);

struct SessionReport {
  TuneResult result;
  std::optional<MeasureResult> fallback;  // when measured
  std::string tuner;                      // Tuner::name()
  int64_t run_id = 0;
  bool cancelled = false;  // should_stop ended it
  bool model_saved = false;
  size_t refits = 0;                       // xgb plans
  std::optional<double> rank_correlation;  // xgb's latest
  RetimeReport retime;                     // empty when nothing was re-timed
};

// What a progress display needs after each batch (plain data: it also crosses the network).
struct ProgressSnapshot {
  size_t done = 0, total = 0;  // trials of this run so far / the budget
  size_t ok = 0;
  std::map<ErrorKind, size_t> errors;
  double best_gflops = 0;      // best of this run and of the resumed records
  double run_best_gflops = 0;  // best of this run's own measurements
  double elapsed_s = 0, eta_s = 0;
  std::optional<double> rank_correlation;
};

// One run over a task: resumes from the log (configs already measured for the workload on
// the target, by a device of the run's emulated-ness, are never measured again), claims each config
// in the log before measuring it (a config another run claimed or logged meanwhile is skipped),
// seeds xgb's first plan from the template's other workloads in the log (transfer; records of the
// run's emulated-ness only), measures and logs the fallback config (log_fallback; the tuner takes
// it as measured, so the best reported includes it), runs the tuning loop, saves xgb's model, then
// re-times the best records (SessionOptions::retime_top). Every
// batch is written to the log in one transaction BEFORE the tuner (and its cost model) is updated,
// so a failed fit never loses a batch. Used by `ktune tune` and by the tuning server's jobs. One
// thread.
class TuningSession {
 public:
  // task, db and measurer must outlive the session. target: the records' target key. Throws as
  // validate().
  TuningSession(const schedule_space::Task& task, tuning_db::Database& db, Measurer& measurer,
                tuning_db::TargetKey target, SessionOptions options);

  // Runs; on_progress (may be empty) is called after each batch. Returns the report. Throws what
  // the measurer or the log throw (the batches before are in the log).
  SessionReport run(const std::function<void(const ProgressSnapshot&)>& on_progress = {});

 private:
  const schedule_space::Task& task_;
  tuning_db::Database& db_;
  Measurer& measurer_;
  tuning_db::TargetKey target_;
  SessionOptions options_;
};

// The run summary as JSON: workload, target, tuner, measured, ok, errors, resumed, stopped_early,
// space_exhausted, cancelled, wall_s, run_id, model (xgb), best, fallback, speedup_over_fallback,
// retimed (to_json(RetimeReport), when something was re-timed).
nlohmann::json summary_json(const schedule_space::Task& task, const tuning_db::TargetKey& target,
                            const SessionReport& report);

}  // namespace ktune::tuner
