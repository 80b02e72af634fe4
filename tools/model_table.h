// Declares the terminal output of a model run, local or a server's job: the per-task table and its
// live redraw, the libraries' times on the same operators, the closing summary.
#pragma once

#include <cstddef>
#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "baselines/library_baseline.h"
#include "frontend/model_tasks.h"
#include "tuner/model_tuning.h"

namespace ktune {
struct HistorySource;  // deploy/config_choice.h
}  // namespace ktune

namespace ktune::tools {

// The race of each tuned workload's kernel against its library, per tuned workload key.
using LibraryTimes = std::map<std::string, baselines::LibraryRace>;

// The per-task table: trials, best and fallback latency, share of the model's estimated time, the
// task's layers (its first ONNX layer, "+k more" for the others) and its workload; with
// `libraries`, the medians of the tuned kernel and the library over the rounds, each with its
// spread, and their ratio. Returns the number of lines printed.
int print_model_table(std::FILE* out, const tuner::ModelTuningReport& r,
                      const LibraryTimes* libraries = nullptr);

// The live view of a model run on stderr: the table redrawn after every allocation on a
// terminal, else one line per allocation; nothing when `quiet` (--json). On a terminal, info
// logs (each allocation's session says it resumes) are lowered to warnings unless --verbose.
class ModelProgress {
 public:
  ModelProgress(size_t budget, bool quiet);
  void show(const tuner::ModelTuningReport& r);
  // Erases the live table (the final one goes to stdout).
  void finish();

 private:
  size_t budget_;
  bool quiet_;
  bool terminal_;
  int drawn_ = 0;
};

// Races each tuned workload's kernel (its best config in `history`, JIT-loaded) against the
// library's operator on the same task in this process (baselines::library_race, `cores` threads,
// `rounds` rounds) and adds the result to the run's summary `j`: per task library, library_s,
// library_min_s, library_max_s, library_spread, tuned_median_s, tuned_min_s, tuned_max_s,
// tuned_spread, ratio (tuned / library medians); library_rounds, library_s (sum of count x library
// median) and tuned_s_where_library (sum of count x tuned median); libraries_note (why there are
// none) when this ktune was built without them. A workload whose kernel or library cannot run
// here is left out with a warning. Returns the races.
LibraryTimes add_library_times(const frontend::ModelTasks& tasks,
                               const tuner::ModelTuningReport& report, const HistorySource& history,
                               int cores, int rounds, nlohmann::json& j);

// The final table on `out` and one summary under it, led by the figure a build ships: the built
// model's measured latency (`summary`'s built_model, with where its time goes as shares), else
// the tuned tasks' estimate and why the model was not timed; then the tuned tasks against their
// fallbacks, against the libraries (or `libraries_note` when they were not measured), the trials,
// what is noisy or untuned. `summary` is tuner::model_summary_json (with add_library_times'
// fields when measured, and the built model's when built).
void print_model_summary(std::FILE* out, const tuner::ModelTuningReport& report,
                         const nlohmann::json& summary, size_t budget,
                         const LibraryTimes* libraries, const std::string& libraries_note);

}  // namespace ktune::tools
