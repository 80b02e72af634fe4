// build_report: the tuning log read into a Report (curves, errors, top configs, plan correlations,
// model runs).
#include "tuning_db/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

namespace ktune::tuning_db {
namespace {

using nlohmann::json;

std::optional<double> number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::string text(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// A boolean field, or `absent` when it is missing or not a boolean.
bool flag(const json& j, const char* key, bool absent) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : absent;
}

int64_t integer(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}

// The step curve of one tuner's records (oldest first).
TunerCurve curve_of(const std::string& tuner, const std::vector<const Record*>& records) {
  TunerCurve c;
  c.tuner = tuner;
  for (const Record* r : records) {
    ++c.trials;
    const double g = r->gflops();
    if (g > c.best_gflops) {
      c.best_gflops = g;
      c.points.push_back({c.trials, g});
    }
  }
  if (c.trials > 0 && (c.points.empty() || c.points.back().trial != c.trials))
    c.points.push_back({c.trials, c.best_gflops});
  return c;
}

WorkloadReport workload_report(const WorkloadSummary& s, bool emulated,
                               const std::vector<const Record*>& records, int64_t top_k) {
  WorkloadReport w;
  w.workload_key = s.workload_key;
  w.template_name = s.template_name;
  w.target = s.target;
  w.emulated = emulated;
  std::map<std::string, std::vector<const Record*>> by_tuner;
  std::vector<const Record*> ok;
  for (const Record* r : records) {
    ++w.records;
    by_tuner[r->tuner].push_back(r);
    if (r->ok()) {
      ++w.ok_records;
      if (r->noisy()) ++w.noisy_records;
      // A disputed record is never the best a build is served, nor the report's.
      if (!r->disputed) ok.push_back(r);
    } else {
      ++w.errors_by_kind[std::string(to_string(*r->error))];
    }
  }
  for (const auto& [tuner, rs] : by_tuner) w.curves.push_back(curve_of(tuner, rs));
  std::stable_sort(ok.begin(), ok.end(),
                   [](const Record* a, const Record* b) { return a->cost() < b->cost(); });
  if (!ok.empty()) {
    w.best_cost = ok.front()->cost();
    w.best_gflops = ok.front()->gflops();
    w.best_retimed = !ok.front()->retimed_costs.empty();
    w.best_noisy = ok.front()->noisy();
  }
  for (size_t i = 0; i < ok.size() && static_cast<int64_t>(i) < top_k; ++i)
    w.top.push_back({ok[i]->config_index, ok[i]->cost(), ok[i]->gflops(), ok[i]->tuner,
                     ok[i]->config.dump(), !ok[i]->retimed_costs.empty(), ok[i]->noisy()});
  return w;
}

ModelRunReport model_run_report(const RunRow& run) {
  ModelRunReport m;
  m.run_id = run.id;
  m.model = run.info.workload_key;
  m.target = run.info.target;
  const json summary = run.info.options.value("summary", json::object());
  if (!summary.is_object()) return m;
  m.trials = integer(summary, "trials");
  m.tuned_s = number(summary, "tuned_s");
  m.fallback_s = number(summary, "fallback_s");
  m.library_s = number(summary, "library_s");
  m.tuned_s_where_library = number(summary, "tuned_s_where_library");
  m.libraries_note = summary.value("libraries_note", "");
  m.noisy_in_sums = integer(summary, "noisy_in_sums");
  m.estimated_s = number(summary, "estimated_s");
  const json built = summary.value("built_model", json::object());
  if (built.is_object()) m.measured_s = number(built, "measured_s");
  for (const json& t : summary.value("tasks", json::array())) {
    if (!t.is_object()) continue;
    LayerRow l;
    l.key = text(t, "key");
    l.tuned_as = text(t, "tuned_as");
    for (const json& layer : t.value("layers", json::array()))
      if (layer.is_string()) l.layers.push_back(layer.get<std::string>());
    l.alternative_of = text(t, "alternative_of");
    l.runs_in_model = flag(t, "runs_in_model", true);
    l.count = integer(t, "count");
    l.trials = integer(t, "trials");
    l.best_s = number(t, "best_s");
    l.fallback_s = number(t, "fallback_s");
    l.library_s = number(t, "library_s");
    l.library = text(t, "library");
    if (l.runs_in_model) l.share = number(t, "share");
    l.library_spread = number(t, "library_spread");
    l.ratio = number(t, "ratio");
    // Summaries written before the flag: the library's own spread (half its range) decides.
    l.noisy = flag(t, "noisy", false) ||
              (l.library_spread && 2 * *l.library_spread > kNoisySpread && l.library_s);
    if (l.noisy) l.ratio.reset();
    l.best_noisy = flag(t, "best_noisy", false);
    l.fallback_noisy = flag(t, "fallback_noisy", false);
    m.layers.push_back(std::move(l));
  }
  // Summaries written before runs_in_model: the fastest of a task and its alternatives runs.
  bool stated = false;
  for (const json& t : summary.value("tasks", json::array()))
    stated = stated || (t.is_object() && t.contains("runs_in_model"));
  if (!stated) {
    for (LayerRow& l : m.layers) {
      const std::string& group = l.alternative_of.empty() ? l.key : l.alternative_of;
      for (const LayerRow& o : m.layers) {
        if (&o == &l || (o.key != group && o.alternative_of != group)) continue;
        constexpr double kNone = std::numeric_limits<double>::infinity();
        const double mine = l.best_s.value_or(kNone), theirs = o.best_s.value_or(kNone);
        if (theirs < mine || (!(mine < theirs) && o.alternative_of.empty()))
          l.runs_in_model = false;
      }
      if (!l.runs_in_model) l.share.reset();
    }
  }
  for (const json& u : summary.value("untuned", json::array()))
    if (u.is_object())
      m.untuned.push_back(text(u, "task") + " x" + std::to_string(integer(u, "count")) + " (" +
                          text(u, "reason") + ")");
  return m;
}

}  // namespace

Report build_report(Database& db, const ReportOptions& options) {
  Report report;
  report.log = db.path();
  report.stats = db.stats();
  // The records of each (template, target, emulated) are read once and split by workload.
  std::map<std::tuple<std::string, std::string, std::string, bool>, std::vector<Record>> history;
  for (const WorkloadSummary& s : db.summaries()) {
    for (bool emulated : {false, true}) {
      if ((emulated ? s.emulated_records : s.records - s.emulated_records) == 0) continue;
      auto key = std::make_tuple(s.template_name, s.target.target, s.target.llvm_version, emulated);
      auto it = history.find(key);
      if (it == history.end())
        it = history.emplace(key, db.history(s.template_name, s.target, 0, emulated)).first;
      std::vector<const Record*> records;
      for (const Record& r : it->second)
        if (r.workload_key == s.workload_key) records.push_back(&r);
      report.workloads.push_back(
          workload_report(s, emulated, records, std::max<int64_t>(0, options.top_k)));
    }
  }
  RunStore runs(db);
  for (const RunRow& run : runs.all()) {
    if (run.info.tuner == kModelRunTuner) {
      report.model_runs.push_back(model_run_report(run));
      continue;
    }
    RunReport r;
    r.id = run.id;
    r.tuner = run.info.tuner;
    r.workload_key = run.info.workload_key;
    r.target = run.info.target;
    r.finished = run.finished_at.has_value();
    for (const BatchQuality& q : runs.batch_quality(run.id))
      r.plans.push_back({q.batch, q.records, q.rank_correlation});
    if (!r.plans.empty()) report.runs.push_back(std::move(r));
  }
  return report;
}

int64_t record_model_run(Database& db, const std::string& model, const std::string& target,
                         const nlohmann::json& summary) {
  RunInfo run;
  run.tuner = kModelRunTuner;
  run.workload_key = model;
  run.target = target;
  run.options = {{"summary", summary}};
  RunStore runs(db);
  const int64_t id = runs.begin(run);
  runs.finish(id);
  return id;
}

}  // namespace ktune::tuning_db
