// The per-task table of a model run, its live redraw, the library times and the closing lines.
#include "tools/model_table.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "deploy/history_best.h"
#include "support/error.h"
#include "support/ms_text.h"
#include "tools/whole_percents.h"
#include "tuning_db/record.h"

namespace ktune::tools {
namespace {

// Rounds that spread more than tuning_db::kNoisySpread: their median is not a usable figure.
bool noisy(const baselines::RoundStats& t) {
  return tuning_db::noisy_range(t.min_s, t.max_s, t.median_s);
}
bool noisy(const baselines::LibraryRace& race) {
  return noisy(race.tuned) || noisy(race.library_time);
}

// The log's best and the race's median of one kernel, both usable, more than kNoisySpread apart.
bool figures_apart(double best_s, const baselines::RoundStats& raced) {
  return std::isfinite(best_s) && best_s > 0 && !noisy(raced) &&
         std::fabs(raced.median_s - best_s) / best_s > tuning_db::kNoisySpread;
}

// A median and its spread over the rounds: "0.1234 ±3%", or "0.1234 noisy".
std::string with_spread(const baselines::RoundStats& t) {
  char buf[48];
  if (noisy(t))
    std::snprintf(buf, sizeof buf, "%s noisy", ms_text(t.median_s).c_str());
  else
    std::snprintf(buf, sizeof buf, "%s ±%.0f%%", ms_text(t.median_s).c_str(), 100 * t.spread());
  return buf;
}

// `text` right-aligned in `width` columns ('±' is two bytes and one column).
std::string right(const std::string& text, size_t width) {
  size_t columns = 0;
  for (unsigned char c : text) columns += (c & 0xC0) != 0x80 ? 1 : 0;
  return std::string(width > columns ? width - columns : 0, ' ') + text;
}

// The layers column: its ONNX nodes, and for an alternative (which may be what ships) the row it
// stands in for.
std::string layers_column(const tuner::ModelTuningReport& r, size_t i) {
  const tuner::TaskProgress& t = r.tasks[i];
  if (!t.alternative_of.empty())
    for (size_t k = 0; k < r.tasks.size(); ++k)
      if (r.tasks[k].key == t.alternative_of)
        return tuner::layers_label(t.layers) + " (other algorithm for #" + std::to_string(k + 1) +
               ")";
  return tuner::layers_label(t.layers);
}

// Each row's share of the estimate in whole percents adding up to 100; none for a row that does
// not run in the model or has no time.
std::vector<std::optional<int>> shares_in_percent(const tuner::ModelTuningReport& r) {
  std::vector<std::optional<double>> fractions(r.tasks.size());
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const double time = static_cast<double>(r.tasks[i].count) * r.tasks[i].best_s;
    if (std::isfinite(time) && std::isfinite(r.tuned_s) && r.tuned_s > 0 &&
        tuner::runs_in_model(r, i))
      fractions[i] = time / r.tuned_s;
  }
  return whole_percents(fractions);
}

}  // namespace

int print_model_table(std::FILE* out, const tuner::ModelTuningReport& r,
                      const LibraryTimes* libraries) {
  size_t layer_width = 5;
  for (size_t i = 0; i < r.tasks.size(); ++i)
    layer_width = std::max(layer_width, layers_column(r, i).size());
  std::string header = "  #" + right("count", 6) + right("trials", 7) + right("best_ms", 11) +
                       right("fallback_ms", 12) + right("share", 7);
  if (libraries) header += right("tuned_ms", 18) + right("library_ms", 18) + right("ratio", 7);
  std::fprintf(out, "%s  %-*s  %s\n", header.c_str(), static_cast<int>(layer_width), "layer",
               "task");
  int lines = 1;
  const std::vector<std::optional<int>> shares = shares_in_percent(r);
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const auto& t = r.tasks[i];
    const std::string share = shares[i] ? std::to_string(*shares[i]) + "%" : "-";
    std::string row =
        right(std::to_string(i + 1), 3) + right(std::to_string(t.count), 6) +
        right(std::to_string(t.trials), 7) +
        right(ms_text(t.best_s) + (t.best_noisy ? "~" : ""), 11) +
        right(t.fallback_s ? ms_text(*t.fallback_s) + (t.fallback_noisy ? "~" : "") : "-", 12) +
        right(share, 7);
    if (libraries) {
      const auto lib = libraries->find(t.tuned_as);
      if (lib == libraries->end()) {
        row += right("-", 18) + right("-", 18) + right("-", 7);
      } else {
        char ratio[32] = "-";  // a ratio of a noisy figure is not quoted
        if (!noisy(lib->second)) std::snprintf(ratio, sizeof ratio, "%.2f", lib->second.ratio());
        // '*': the library ran faster on one thread than on the race's (library_race).
        const bool one_thread = lib->second.library_threads < lib->second.threads;
        const bool apart = figures_apart(t.best_s, lib->second.tuned);
        row += right(with_spread(lib->second.tuned) + (apart ? "!" : ""), 18) +
               right(with_spread(lib->second.library_time) + (one_thread ? "*" : ""), 18) +
               right(ratio, 7);
      }
    }
    std::fprintf(out, "%s  %-*s  %s\n", row.c_str(), static_cast<int>(layer_width),
                 layers_column(r, i).c_str(), t.tuned_as.c_str());
    ++lines;
  }
  // What each kind of "-" means, for the kinds the rows show. (A ktune built without the
  // libraries races nothing, and its summary says so instead.)
  std::vector<std::string> dashes;
  if (std::any_of(shares.begin(), shares.end(), [](const auto& s) { return !s; }))
    dashes.push_back(
        "share: a row a build does not run (a layer runs the fastest of its "
        "algorithms)");
  if (libraries && !libraries->empty()) {
    if (std::any_of(libraries->begin(), libraries->end(),
                    [](const auto& l) { return noisy(l.second); }))
      dashes.push_back("ratio: a noisy race (no ratio is quoted)");
    if (std::any_of(r.tasks.begin(), r.tasks.end(),
                    [&](const tuner::TaskProgress& t) { return !libraries->count(t.tuned_as); }))
      dashes.push_back(
          "tuned_ms, library_ms and ratio: no library race (oneDNN and OpenBLAS have "
          "no operator for the task, e.g. batch_matmul, or its race failed: a warning "
          "above says why)");
  }
  if (!dashes.empty()) {
    std::string line = "  -:";
    for (size_t k = 0; k < dashes.size(); ++k) line += (k == 0 ? " " : "; ") + dashes[k];
    std::fprintf(out, "%s\n", line.c_str());
    ++lines;
  }
  if (libraries && !libraries->empty()) {
    // Two figures of the tuned kernel, each for its own comparison.
    const baselines::LibraryRace& any = libraries->begin()->second;
    std::fprintf(out,
                 "  best_ms: the log's re-timed best, which the sums below use; tuned_ms and "
                 "library_ms: medians of %d rounds in which the two took turns at %d thread%s (± "
                 "half their range), compared by ratio\n",
                 any.tuned.rounds, any.threads, any.threads == 1 ? "" : "s");
    ++lines;
    // An alternative computes the same operator: the library's is raced again against it.
    if (std::any_of(r.tasks.begin(), r.tasks.end(), [&](const tuner::TaskProgress& t) {
          return !t.alternative_of.empty() && libraries->count(t.tuned_as);
        })) {
      std::fprintf(out,
                   "  a task's other algorithms race the same library operator again, each in "
                   "rounds of its own\n");
      ++lines;
    }
    const bool one_thread = std::any_of(libraries->begin(), libraries->end(), [](const auto& l) {
      return l.second.library_threads < l.second.threads;
    });
    if (one_thread) {
      std::fprintf(out,
                   "  *: the library ran faster on one thread (it also took its turns on one); "
                   "its faster median is shown\n");
      ++lines;
    }
    bool apart = false;
    for (const auto& t : r.tasks)
      if (const auto lib = libraries->find(t.tuned_as); lib != libraries->end())
        apart = apart || figures_apart(t.best_s, lib->second.tuned);
    if (apart) {
      std::fprintf(out,
                   "  !: tuned_ms is more than %.0f%% away from best_ms: the same kernel, timed "
                   "at another moment (the race after the re-timing) on a machine whose load "
                   "moved; each figure counts only in its own comparison (a noisy race is not "
                   "compared)\n",
                   100 * tuning_db::kNoisySpread);
      ++lines;
    }
  }
  // Every noisy figure is marked, as `ktune best` calls it NOISY; the summary's speed-up counts
  // only those behind its sums (tuner::noisy_in_sums).
  if (std::any_of(r.tasks.begin(), r.tasks.end(), [](const tuner::TaskProgress& t) {
        return t.best_noisy || (t.fallback_s && t.fallback_noisy);
      })) {
    std::fprintf(out,
                 "  ~: the timings behind that figure spread more than %.0f%% (best_ms: the log's "
                 "best record; fallback_ms: the fallback's re-timing)\n",
                 100 * tuning_db::kNoisySpread);
    ++lines;
  }
  return lines;
}

ModelProgress::ModelProgress(size_t budget, bool quiet)
    : budget_(budget), quiet_(quiet), terminal_(!quiet && ::isatty(::fileno(stderr))) {
  // Each allocation is a short session that logs its resume at info level: on a redrawn table
  // that is noise (and breaks the redraw). --verbose keeps everything.
  if (terminal_ && spdlog::get_level() == spdlog::level::info)
    spdlog::set_level(spdlog::level::warn);
}

void ModelProgress::show(const tuner::ModelTuningReport& r) {
  if (quiet_) return;
  if (terminal_) {
    if (drawn_ > 0) std::fprintf(stderr, "\033[%dA\033[J", drawn_);
    drawn_ = print_model_table(stderr, r);
    std::fprintf(stderr, "trials %zu/%zu  model %s ms (estimated)  fallbacks %s ms\n", r.trials,
                 budget_, ms_text(r.tuned_s).c_str(),
                 r.fallback_s > 0 ? ms_text(r.fallback_s).c_str() : "-");
    ++drawn_;
  } else if (!r.steps.empty()) {
    // The best of the workload the step tuned (a layer's Winograd form has its own).
    const auto& step = r.steps.back();
    double best_s = r.workload_best_s[step.task];
    for (const tuner::TaskProgress& t : r.tasks)
      if (t.tuned_as == r.step_tuned) best_s = t.best_s;
    std::fprintf(stderr, "trials %zu/%zu best_ms %s model_ms %s tuned %s\n", step.total, budget_,
                 ms_text(best_s).c_str(), ms_text(r.tuned_s).c_str(), r.step_tuned.c_str());
  }
}

void ModelProgress::finish() {
  if (terminal_ && drawn_ > 0) std::fprintf(stderr, "\033[%dA\033[J", drawn_);
  drawn_ = 0;
  std::fflush(stderr);
}

LibraryTimes add_library_times(const frontend::ModelTasks& tasks,
                               const tuner::ModelTuningReport& report, const HistorySource& history,
                               int cores, int rounds, nlohmann::json& j) {
  LibraryTimes libraries;
#if KTUNE_HAVE_BASELINES
  std::set<std::string> tried;
  for (const auto& t : report.tasks) {
    if (!tried.insert(t.tuned_as).second) continue;
    for (const auto& mt : tasks.tasks) {
      if (!mt.tunable || mt.tunable->workload_key() != t.tuned_as) continue;
      try {
        const AppliedKernel tuned = apply_history_best(history, *mt.tunable);
        if (auto race = baselines::library_race(*mt.tunable, tuned.kernel, cores, rounds))
          libraries.emplace(t.tuned_as, *race);
      } catch (const Error& e) {
        spdlog::warn("no library time for {}: {}", t.tuned_as, e.what());
      }
      break;
    }
  }
#else
  (void)tasks, (void)history, (void)cores;  // built without baselines/: no library times
  j["libraries_note"] =
      "not timed: this ktune was built without oneDNN and OpenBLAS (scripts/demo leaves them "
      "out); scripts/setup installs them and rebuilds ktune with them";
#endif
  double library_s = 0, tuned_same_s = 0;
  for (size_t i = 0; i < report.tasks.size(); ++i) {
    const auto lib = libraries.find(report.tasks[i].tuned_as);
    if (lib == libraries.end()) continue;
    const baselines::LibraryRace& race = lib->second;
    const double count = static_cast<double>(report.tasks[i].count);
    // The sums count each layer once, with the algorithm a build runs for it, and no noisy one.
    if (tuner::runs_in_model(report, i) && !noisy(race)) {
      library_s += count * race.library_time.median_s;
      tuned_same_s += count * race.tuned.median_s;
    }
    nlohmann::json& t = j["tasks"][i];
    t["library"] = race.library;
    t["library_s"] = race.library_time.median_s;
    t["library_min_s"] = race.library_time.min_s;
    t["library_max_s"] = race.library_time.max_s;
    t["library_spread"] = race.library_time.spread();
    t["tuned_median_s"] = race.tuned.median_s;
    t["tuned_min_s"] = race.tuned.min_s;
    t["tuned_max_s"] = race.tuned.max_s;
    t["tuned_spread"] = race.tuned.spread();
    t["library_threads"] = race.library_threads;
    if (noisy(race))
      t["noisy"] = true;
    else
      t["ratio"] = race.ratio();
  }
  j["library_rounds"] = rounds;
  j["library_s"] = library_s;
  j["tuned_s_where_library"] = tuned_same_s;
  return libraries;
}

namespace {

// The summary's first line: the built model's measured latency when this run built and timed it
// (the figure a build ships), else the tuned tasks' estimate and why there is no measurement.
// A slowest run this many times the median is said, so that the range quoted is not read as the
// model's spread.
constexpr double kOutlier = 3;

void print_lead(std::FILE* out, const tuner::ModelTuningReport& report,
                const nlohmann::json& summary) {
  const std::string model = summary.value("model", "?");
  const nlohmann::json built = summary.value("built_model", nlohmann::json::object());
  if (!built.contains("measured_s")) {
    const std::string why = built.contains("error")
                                ? "not built: " + built["error"].get<std::string>()
                                : "the model was not built and timed in this run";
    // Each layer once, at the faster of its task and the task's other algorithms: the tasks that
    // are no alternative, the rows that ship.
    const auto layers = std::count_if(report.tasks.begin(), report.tasks.end(),
                                      [](const auto& t) { return t.alternative_of.empty(); });
    const size_t others = report.tasks.size() - static_cast<size_t>(layers);
    const std::string over =
        std::to_string(layers) + " tasks" +
        (others > 0 ? ", each at the faster of it and its other algorithms" : "");
    std::fprintf(out, "model %s: %s ms estimated, the sum of count x best over %s (%s)\n",
                 model.c_str(), ms_text(report.tuned_s).c_str(), over.c_str(), why.c_str());
    return;
  }
  const double run = built["measured_s"].get<double>();
  std::fprintf(out,
               "model %s: %s ms end to end, measured on the model as build --model ships it "
               "(median of %d runs at %d thread%s, %s to %s ms; %d kernels)\n",
               model.c_str(), ms_text(run).c_str(), built.value("runs", 0),
               built.value("threads", 1), built.value("threads", 1) == 1 ? "" : "s",
               ms_text(built["min_s"].get<double>()).c_str(),
               ms_text(built["max_s"].get<double>()).c_str(), built.value("kernels", 0));
  if (built.value("noisy", false))
    std::fprintf(out,
                 "  NOISY: the middle half of the runs spread %.0f%% of the median (%s to %s ms): "
                 "not a usable figure; run again on a quieter machine\n",
                 100 * (built["q3_s"].get<double>() - built["q1_s"].get<double>()) / run,
                 ms_text(built["q1_s"].get<double>()).c_str(),
                 ms_text(built["q3_s"].get<double>()).c_str());
  else if (const double slowest = built["max_s"].get<double>(); slowest > kOutlier * run)
    std::fprintf(out,
                 "  the slowest run took %.1fx the median: an outlier (the middle half of the "
                 "runs is tight), which the median leaves out\n",
                 slowest / run);
  // Where that time goes, as shares (the in-order timing is no second latency to quote).
  const double tasks_s = built["task_kernels_s"].get<double>();
  const double other_s = built["other_kernels_s"].get<double>();
  if (tasks_s + other_s > 0)
    std::fprintf(out,
                 "  kernels timed one by one in the model's order: tuned tasks %.0f%%, layout and "
                 "generated kernels %.0f%%; measured / their sum %.2f\n",
                 100 * tasks_s / (tasks_s + other_s), 100 * other_s / (tasks_s + other_s),
                 run / (tasks_s + other_s));
  // The tuned tasks there against the sum below (count x best_ms): tuning times each kernel alone,
  // its inputs warm; in the model its input comes from the layer before and its weights from
  // memory, so the two differ, and the sums below compare like with like.
  if (tasks_s > 0 && std::isfinite(report.tuned_s) && report.tuned_s > 0)
    std::fprintf(out,
                 "  tuned tasks in the model's order: %.2fx their count x best_ms sum (tuning "
                 "times each kernel alone, its data in cache)\n",
                 tasks_s / report.tuned_s);
}

// "0.4s", "42s", "4m21s".
std::string duration(double s) {
  const long total = std::lround(std::max(0.0, s));
  char buf[32];
  if (s < 9.95)
    std::snprintf(buf, sizeof buf, "%.1fs", std::max(0.0, s));
  else if (total < 60)
    std::snprintf(buf, sizeof buf, "%lds", total);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", total / 60, total % 60);
  return buf;
}

// Where the run's wall time went: the time budget bounds the search; the re-timing of the best
// configs, the library races and the built model's timing follow it.
void print_wall_time(std::FILE* out, const nlohmann::json& summary) {
  const nlohmann::json wall = summary.value("wall", nlohmann::json::object());
  const std::vector<std::pair<const char*, const char*>> parts = {
      {"search_s", "search"},
      {"retime_s", "re-timing the best configs"},
      {"libraries_s", "library races"},
      {"model_run_s", "building and timing the model"}};
  double total = 0;
  std::string text;
  for (const auto& [key, what] : parts) {
    if (!wall.contains(key) || !wall[key].is_number()) continue;
    const double s = wall[key].get<double>();
    total += s;
    text += std::string(text.empty() ? "" : ", ") + what + " " + duration(s);
  }
  if (!text.empty())
    std::fprintf(out, "  wall time %s: %s\n", duration(total).c_str(), text.c_str());
}

}  // namespace

void print_model_summary(std::FILE* out, const tuner::ModelTuningReport& report,
                         const nlohmann::json& summary, size_t budget,
                         const LibraryTimes* libraries, const std::string& libraries_note) {
  print_model_table(out, report, libraries);
  std::fputc('\n', out);
  print_lead(out, report, summary);
  const size_t noisy_sums = tuner::noisy_in_sums(report);
  if (report.fallback_s > 0 && std::isfinite(report.tuned_s) && noisy_sums > 0)
    std::fprintf(out,
                 "  tuned tasks: no speed-up over their untuned fallbacks quoted: the timings of "
                 "%zu row%s behind the sums (the best of a row that ships, the fallback of a "
                 "layer's first algorithm) spread more than %.0f%% (marked ~)\n",
                 noisy_sums, noisy_sums == 1 ? "" : "s", 100 * tuning_db::kNoisySpread);
  else if (report.fallback_s > 0 && std::isfinite(report.tuned_s))
    std::fprintf(out,
                 "  tuned tasks: %.2fx faster than their untuned fallbacks (%s against %s ms: "
                 "count x best_ms and x fallback_ms summed)\n",
                 report.fallback_s / report.tuned_s, ms_text(report.tuned_s).c_str(),
                 ms_text(report.fallback_s).c_str());
  const double library_s = summary.value("library_s", 0.0);
  if (library_s > 0) {
    const double tuned_same_s = summary.value("tuned_s_where_library", 0.0);
    // A noisy race is left out of the sums: say on how many races the ratio rests.
    size_t raced = 0, noisy = 0;
    for (const auto& t : summary.value("tasks", nlohmann::json::array())) {
      raced += t.contains("library_s") ? 1 : 0;
      noisy += t.contains("library_s") && t.value("noisy", false) ? 1 : 0;
    }
    const std::string rests = noisy > 0
                                  ? "; " + std::to_string(raced - noisy) + " of " +
                                        std::to_string(raced) + " races, the noisy ones left out"
                                  : "";
    std::fprintf(out,
                 "  libraries: tuned/library %.2f on the same operators (%s against %s ms; medians "
                 "of %d interleaved rounds, in this process%s)\n",
                 tuned_same_s / library_s, ms_text(tuned_same_s).c_str(),
                 ms_text(library_s).c_str(), summary.value("library_rounds", 0), rests.c_str());
  } else if (!libraries_note.empty() || summary.contains("libraries_note")) {
    std::fprintf(out, "  libraries: %s\n",
                 libraries_note.empty() ? summary["libraries_note"].get<std::string>().c_str()
                                        : libraries_note.c_str());
  }
  std::fprintf(out, "  trials: %zu of %zu\n", report.trials, budget);
  size_t noisy_layers = 0;
  for (const auto& t : summary.value("tasks", nlohmann::json::array()))
    noisy_layers += t.value("noisy", false) ? 1 : 0;
  if (noisy_layers > 0)
    std::fprintf(out,
                 "  noisy: %zu task%s library race spread more than %.0f%%: no ratio, and not "
                 "in the tuned/library sums (run again on a quieter machine, or with more "
                 "--library-rounds)\n",
                 noisy_layers, noisy_layers == 1 ? "'s" : "s'", 100 * tuning_db::kNoisySpread);
  // Failed trials, per tuned workload (tasks tuned as one share them): each kind and its count.
  std::set<std::string> said;
  for (const auto& t : report.tasks) {
    if (t.errors.empty() || !said.insert(t.tuned_as).second) continue;
    int64_t failed = 0;
    std::string kinds;
    for (const auto& [kind, n] : t.errors) {
      failed += n;
      kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(n);
    }
    std::fprintf(out, "  failed: %lld of its %zu trials (%s) in %s\n",
                 static_cast<long long>(failed), t.trials, kinds.c_str(), t.tuned_as.c_str());
  }
  if (report.out_of_time)
    std::fprintf(out, "  time budget: the search stopped at it after %zu of %zu trials\n",
                 report.trials, budget);
  print_wall_time(out, summary);
  // Counted per tuned workload, as the budget warning counts them (a task's Winograd form is one
  // of its own; tasks tuned as one workload share its trials).
  std::set<std::string> workloads, unreached;
  for (const auto& t : report.tasks) {
    workloads.insert(t.tuned_as);
    if (t.trials == 0) unreached.insert(t.tuned_as);
  }
  if (!unreached.empty())
    std::fprintf(out,
                 "  budget: %zu of %zu tuned workloads got no trial in this run (a warm-up of "
                 "every one takes %zu x the batch size); each keeps what the log held, else its "
                 "fallback\n",
                 unreached.size(), workloads.size(), workloads.size());
  for (const auto& u : summary.value("untuned", nlohmann::json::array()))
    std::fprintf(out, "  not a tuned task: %s x%lld (%s)\n", u["task"].get<std::string>().c_str(),
                 static_cast<long long>(u["count"].get<int64_t>()),
                 u["reason"].get<std::string>().c_str());
}

}  // namespace ktune::tools
