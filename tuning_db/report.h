// Defines Report: what `ktune report` shows of a tuning log, as plain data (tuning curves, errors
// by kind, top configs, the cost model's rank correlation per plan, model runs).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tuning_db/database.h"
#include "tuning_db/run_store.h"

namespace ktune::tuning_db {

// The tuner name of a model run's row in the runs table (see record_model_run).
inline constexpr const char* kModelRunTuner = "tune-model";

// One point of a tuning curve: after `trial` trials (failures included) the best was `best_gflops`.
struct CurvePoint {
  int64_t trial = 0;
  double best_gflops = 0;
};

// The best GFLOP/s of one tuner on one workload against its trials, in the order measured. Only
// the points where the best rose are kept, plus the last trial (a step curve; a long flat run of
// trials is one segment).
struct TunerCurve {
  std::string tuner;  // "" when the records name none
  int64_t trials = 0;
  double best_gflops = 0;
  std::vector<CurvePoint> points;
};

struct TopConfig {
  int64_t config_index = 0;
  double mean_cost = 0;  // seconds: the record's figure (Record::cost())
  double gflops = 0;
  std::string tuner;
  std::string config;    // the config's JSON, on one line
  bool retimed = false;  // the figure is the median of a re-timing (Record::retimed_costs)
  bool noisy = false;    // Record::noisy(): its timings spread more than kNoisySpread
};

// One (workload, target) of the log; real and emulated records are reported apart.
struct WorkloadReport {
  std::string workload_key;
  std::string template_name;
  TargetKey target;
  bool emulated = false;
  int64_t records = 0;
  int64_t ok_records = 0;
  double best_gflops = 0;
  double best_cost = 0;                           // seconds; 0 when nothing succeeded
  bool best_retimed = false;                      // the best's figure is a re-timing's median
  bool best_noisy = false;                        // the best's timings spread (Record::noisy())
  int64_t noisy_records = 0;                      // successful records flagged noisy
  std::vector<TunerCurve> curves;                 // by tuner name
  std::map<std::string, int64_t> errors_by_kind;  // to_string(ErrorKind) -> count
  std::vector<TopConfig> top;                     // fastest first (real records only)
};

// The cost model's rank correlation (predicted against measured) of one plan of a run.
struct PlanCorrelation {
  int64_t plan = 0;
  int64_t records = 0;  // measured configs of the plan the correlation covers
  std::optional<double> rank_correlation;
};

// A tuning run that stored model quality (the xgb tuner's).
struct RunReport {
  int64_t id = 0;
  std::string tuner;
  std::string workload_key;
  std::string target;
  bool finished = false;
  std::vector<PlanCorrelation> plans;
};

// One layer (task) of a model run: its best latency against the untuned fallback and the library.
struct LayerRow {
  std::string key;       // the task
  std::string tuned_as;  // the workload tuned for it
  // Its ONNX nodes, one '+'-joined label per occurrence (as `ktune run` names its steps).
  std::vector<std::string> layers;
  std::string alternative_of;  // the task this one is another algorithm for, or ""
  // What a model build runs for these layers (the fastest of a task and its alternatives); only
  // such rows have a share. Summaries written before the field: true.
  bool runs_in_model = true;
  int64_t count = 0;
  int64_t trials = 0;
  std::optional<double> best_s, fallback_s, library_s;
  std::string library;          // e.g. "onednn"; "" when none was timed
  std::optional<double> share;  // of the model's estimated time (rows that run in the model)
  // The library race (median of interleaved rounds): its spread (half the range over the
  // median) and tuned / library from the two medians.
  std::optional<double> library_spread, ratio;
  bool noisy = false;  // the race's rounds spread more than kNoisySpread: no ratio is quoted
  // The timings behind best_s (the log's best record) and fallback_s (the fallback's re-timing)
  // spread more than kNoisySpread (the model summary's best_noisy, fallback_noisy).
  bool best_noisy = false, fallback_noisy = false;
};

// A `ktune tune-model` run, from the summary it stored (record_model_run).
struct ModelRunReport {
  int64_t run_id = 0;
  std::string model;
  std::string target;
  int64_t trials = 0;
  std::optional<double> tuned_s, fallback_s, library_s, tuned_s_where_library;
  // The model as built from the log at the run's end: its measured latency and the estimate (its
  // kernels timed one by one in the model's order).
  std::optional<double> measured_s, estimated_s;
  std::vector<LayerRow> layers;
  std::string libraries_note;  // why no library was timed ("" when they were, or not asked for)
  // Tasks whose noisy timings the tuned and fallback sums rest on: no speed-up is quoted then.
  int64_t noisy_in_sums = 0;
  std::vector<std::string> untuned;  // "task xcount (reason)"
};

struct Report {
  std::string log;  // the log's path (or what the caller names it)
  // The log holds records only (a server's export): it knows no cost models or tuning runs, so
  // their counts are unknown rather than 0.
  bool records_only = false;
  Stats stats;
  std::vector<WorkloadReport> workloads;   // ordered by workload key, target, real before emulated
  std::vector<RunReport> runs;             // runs with at least one plan's correlation, by id
  std::vector<ModelRunReport> model_runs;  // by id
};

struct ReportOptions {
  int64_t top_k = 5;  // top configs per workload (0 = none)
};

// Reads the report from the log (a read-only connection is enough). Throws Error(kDatabase).
Report build_report(Database& db, const ReportOptions& options = {});

// Stores a model run's summary (the JSON of `ktune tune-model --json`: trials, tuned_s, tasks
// [{key, tuned_as, count, trials, best_s, fallback_s, share, library, library_s}], ...) as a
// finished run row of tuner kModelRunTuner whose options are {"summary": summary}, so that a
// report finds it in the log. Returns the run id. Throws Error(kDatabase).
int64_t record_model_run(Database& db, const std::string& model, const std::string& target,
                         const nlohmann::json& summary);

}  // namespace ktune::tuning_db
