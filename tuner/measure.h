// Defines the measurement contract of the tuner: MeasureOptions, MeasureInput, MeasureResult, Measurer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schedule_space/config.h"
#include "support/error.h"

namespace ktune::schedule_space {
class Task;
}  // namespace ktune::schedule_space

namespace ktune::tuner {

// How a candidate kernel is timed and checked. Defaults follow AutoTVM's (number 4, repeat 3,
// min_repeat_ms 0, 10 s timeouts) except cooldown (0: the tuner does not sleep by default) and
// check_correctness (on: a wrong kernel must never be recorded as fast).
struct MeasureOptions {
  int number = 4;                  // kernel runs per timing; the timing is their mean
  int repeat = 3;                  // timings per candidate; MeasureResult::costs has this many
  double min_repeat_ms = 0;        // grow `number` until one timing lasts at least this long
  double build_timeout_s = 10;     // the candidate's own lower+codegen time, never queue time
  double run_timeout_s = 10;       // the candidate's own run time (incl. its check), never queue time
  double cooldown_s = 0;           // sleep between repeats
  bool flush_cache = false;        // evict the caches (write a large buffer) before each run
  bool check_correctness = true;   // compare outputs with the task's reference schedule
  // |out - ref| <= atol + rtol * (|ref| + rms(ref)) element-wise: the rms term lets a reduction
  // summed in another order round differently without failing where the output is near zero.
  double rtol = 1e-4, atol = 1e-5;
};

// One candidate: a task (not owned; must outlive the measurement) and a config of its space.
struct MeasureInput {
  const schedule_space::Task* task = nullptr;
  schedule_space::Config config;
};

// The outcome of one candidate. `error` is std::nullopt on success; otherwise one of the
// measurement kinds of ErrorKind (kInstantiation, kBuild, kBuildTimeout, kRun, kRunTimeout,
// kWrongAnswer, kWorkerLost, kUnknown) and `costs` is empty.
struct MeasureResult {
  std::vector<double> costs;            // seconds per kernel run, one per repeat; empty on error
  std::optional<ErrorKind> error;       // nullopt = ok
  std::string error_message;            // human-readable detail when !ok()
  double build_s = 0;                   // wall time spent lowering + compiling this candidate
  double run_s = 0;                     // wall time spent running + checking this candidate
  int64_t timestamp = 0;                // unix seconds when the result was produced
  // Timed on an emulated device (qemu): the record is marked (tuning_db::Record::emulated) and
  // never served as a real timing. A session whose whole measurer is emulated says so once
  // instead (SessionOptions::emulated); a measurer over mixed devices marks each result.
  bool emulated = false;

  // Returns true when the candidate built, ran and matched the reference.
  bool ok() const { return !error.has_value() && !costs.empty(); }
  // Returns the mean of `costs` in seconds, or +infinity when !ok().
  double mean_cost() const;
};

// Returns a successful result with the given costs (timestamp = now).
MeasureResult make_ok_result(std::vector<double> costs, double build_s = 0, double run_s = 0);
// Returns a failed result of `kind` with `message` (timestamp = now).
MeasureResult make_error_result(ErrorKind kind, std::string message, double build_s = 0,
                                double run_s = 0);

// Measures batches of candidates. Implementations (the local runner, the remote runner, test
// fakes) return exactly one result per input, in the same order; a failing candidate is a
// result with an error, never an exception. They throw ktune::Error only when the measurer
// itself cannot work (e.g. kIo: the runner executable cannot be started).
// A Measurer is used by one tuning loop at a time (not required to be thread-safe).
class Measurer {
 public:
  virtual ~Measurer() = default;
  virtual std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) = 0;
};

}  // namespace ktune::tuner
