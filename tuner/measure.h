// Defines the measurement contract of the tuner: MeasureInput, MeasureResult, Measurer
// (MeasureOptions: measure_options.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schedule_space/config.h"
#include "support/error.h"
#include "tuner/measure_options.h"

namespace ktune::schedule_space {
class Task;
}  // namespace ktune::schedule_space

namespace ktune::tuner {

// One candidate: a task (not owned; must outlive the measurement) and a config of its space.
struct MeasureInput {
  const schedule_space::Task* task = nullptr;
  schedule_space::Config config;
};

// The outcome of one candidate. `error` is std::nullopt on success; otherwise one of the
// measurement kinds of ErrorKind (kInstantiation, kBuild, kBuildTimeout, kRun, kRunTimeout,
// kWrongAnswer, kWorkerLost, kUnknown) and `costs` is empty.
struct MeasureResult {
  std::vector<double> costs;       // seconds per kernel run, one per repeat; empty on error
  std::optional<ErrorKind> error;  // nullopt = ok
  std::string error_message;       // human-readable detail when !ok()
  double build_s = 0;              // wall time spent lowering + compiling this candidate
  double run_s = 0;                // wall time spent running + checking this candidate
  int64_t timestamp = 0;           // unix seconds when the result was produced
  // Timed on an emulated device (qemu): the record is marked (tuning_db::Record::emulated) and
  // never served as a real timing. A session whose whole measurer is emulated says so once
  // instead (SessionOptions::emulated); a measurer over mixed devices marks each result.
  bool emulated = false;
  // The device that measured it when the measurer has several (a tuning server's worker id, e.g.
  // "w3"); "" = the measurer's only device. Kept in the record (tuning_db::Record::worker).
  std::string worker;
  // With MeasureOptions::return_outputs: the kernel's output buffers, concatenated in argument
  // order, after its run.
  std::string outputs;

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
