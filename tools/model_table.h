// Declares the terminal output of a model run, local or a server's job: the per-task table and its live redraw, the libraries' times on the same operators, the closing summary.
#pragma once

#include <cstddef>
#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "frontend/model_tasks.h"
#include "baselines/library_baseline.h"
#include "tuner/model_tuning.h"

namespace ktune::tools {

// Library time per tuned workload key.
using LibraryTimes = std::map<std::string, baselines::LibraryTime>;

// The per-task table: trials, best and fallback latency, share of the model's estimated time (and
// the libraries' time when given). Returns the number of lines printed (for a redraw).
int print_model_table(std::FILE* out, const tuner::ModelTuningReport& r, size_t budget,
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

// Times the libraries in this process on the operators of the report's tasks (found in `tasks`
// by their tuned workload, with `cores` threads) and adds them to the run's summary `j`
// (tasks[i].library, tasks[i].library_s, library_s, tuned_s_where_library). Returns the times.
LibraryTimes add_library_times(const frontend::ModelTasks& tasks, const tuner::ModelTuningReport& report, int cores,
                               nlohmann::json& j);

// The final table on `out` and the lines under it: estimated latency, against the fallbacks,
// against the libraries (or `libraries_note` when they were not measured), the operators left out.
// `summary` is tuner::model_summary_json (with add_library_times' fields when measured).
void print_model_summary(std::FILE* out, const tuner::ModelTuningReport& report, const nlohmann::json& summary,
                         size_t budget, const LibraryTimes* libraries, const std::string& libraries_note);

}  // namespace ktune::tools
