// Defines the tuning loop: tune(task, tuner, measurer, options) with budget, early stopping,
// resume and callbacks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "schedule_space/task.h"
#include "support/error.h"
#include "tuner/measure.h"
#include "tuner/tuner.h"

namespace ktune::tuner {

// Called after every measured batch with its inputs and results (same order). A callback
// that throws ends the tuning loop with that exception (e.g. the database is gone).
using Callback =
    std::function<void(const std::vector<MeasureInput>&, const std::vector<MeasureResult>&)>;

// A measurement made before this run (from the tuning log), handed to the tuner so that
// the config is never measured again.
struct PastMeasurement {
  schedule_space::Config config;
  MeasureResult result;
};

struct TuneOptions {
  size_t n_trial = 64;        // new measurements to make (the budget); resumed ones don't count
  size_t early_stopping = 0;  // stop after this many trials without a better config; 0 = never
  size_t batch_size = 16;     // configs asked from the tuner and measured together
  // Writes each measured batch to the tuning log (database_callback). Called BEFORE the tuner
  // sees the batch, so a tuner whose model fit fails loses nothing. May be empty (no log).
  Callback log;
  // Called after the tuner's update (model quality, progress); the log belongs in `log`.
  std::vector<Callback> callbacks;
  // Polled before each batch; returning true ends the loop (TuneResult::cancelled). May be empty.
  std::function<bool()> should_stop;
  std::vector<PastMeasurement> resume;  // already measured: told to the tuner, not measured
  // Asked with each batch about to be measured; returns, per input, whether this run may measure
  // it. A config refused (another run measures or measured it) is skipped like a measured one.
  // May be empty (every config may be measured). What it throws ends the loop.
  std::function<std::vector<bool>(const std::vector<MeasureInput>&)> claim;
};

struct TuneResult {
  std::optional<schedule_space::Config> best_config;  // best successful config (incl. resumed)
  MeasureResult best_result;                          // its result (error set when none)
  double best_gflops = 0;                             // task flop / best mean cost / 1e9
  bool best_is_new = false;            // the best was measured in this run (not resumed)
  size_t n_measured = 0;               // new measurements made in this run
  size_t n_ok = 0;                     // of which succeeded
  std::map<ErrorKind, size_t> errors;  // failed new measurements per kind
  size_t n_resumed = 0;                // past measurements handed to the tuner
  size_t n_claimed_elsewhere = 0;      // proposed configs skipped because another run claimed them
  bool stopped_early = false;
  bool space_exhausted = false;   // the tuner had nothing left before the budget was spent
  bool cancelled = false;         // should_stop ended the loop
  double wall_s = 0;              // whole loop
  double tuner_s = 0;             // inside Tuner::next_batch / update
  double measure_s = 0;           // inside Measurer::measure
  double build_s = 0, run_s = 0;  // sums of MeasureResult::build_s / run_s of new results
};

// Runs the loop: ask the tuner for batches, drop configs already measured (resumed or
// proposed twice), measure, call log, update the tuner, call the callbacks, until
// n_trial new measurements are made, early stopping triggers, the tuner runs out, or
// should_stop says so.
// Returns the summary. Throws what the measurer or a callback throws (measurement failures
// of single configs are results, not exceptions).
TuneResult tune(const schedule_space::Task& task, Tuner& tuner, Measurer& measurer,
                const TuneOptions& options);

}  // namespace ktune::tuner
