// The per-task table of a model run, its live redraw, the library times and the closing lines.
#include "tools/model_table.h"

#include <unistd.h>

#include <cmath>

#include <spdlog/spdlog.h>

namespace ktune::tools {
namespace {

std::string ms(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", seconds * 1e3);
  return buf;
}

}  // namespace

int print_model_table(std::FILE* out, const tuner::ModelTuningReport& r, size_t budget, const LibraryTimes* libraries) {
  int lines = 0;
  std::fprintf(out, "%3s %5s %6s %10s %11s %10s %6s  %s\n", "#", "count", "trials", "best_ms", "fallback_ms",
               "library_ms", "share", "task");
  ++lines;
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const auto& t = r.tasks[i];
    const double time = static_cast<double>(t.count) * t.best_s;
    const std::string share =
        std::isfinite(time) && std::isfinite(r.tuned_s) ? std::to_string(static_cast<int>(std::lround(100 * time / r.tuned_s))) + "%" : "-";
    const auto lib = libraries ? libraries->find(t.tuned_as) : LibraryTimes::const_iterator{};
    const std::string lib_ms = libraries && lib != libraries->end() ? ms(lib->second.seconds) : "-";
    std::fprintf(out, "%3zu %5lld %6zu %10s %11s %10s %6s  %s\n", i + 1, static_cast<long long>(t.count), t.trials,
                 ms(t.best_s).c_str(), t.fallback_s ? ms(*t.fallback_s).c_str() : "-", lib_ms.c_str(), share.c_str(),
                 t.tuned_as.c_str());
    ++lines;
  }
  std::fprintf(out, "trials %zu/%zu  model %s ms (estimated)  fallbacks %s ms\n", r.trials, budget, ms(r.tuned_s).c_str(),
               r.fallback_s > 0 ? ms(r.fallback_s).c_str() : "-");
  return lines + 1;
}

ModelProgress::ModelProgress(size_t budget, bool quiet)
    : budget_(budget), quiet_(quiet), terminal_(!quiet && ::isatty(::fileno(stderr))) {
  // Each allocation is a short session that logs its resume at info level: on a redrawn table
  // that is noise (and breaks the redraw). --verbose keeps everything.
  if (terminal_ && spdlog::get_level() == spdlog::level::info) spdlog::set_level(spdlog::level::warn);
}

void ModelProgress::show(const tuner::ModelTuningReport& r) {
  if (quiet_) return;
  if (terminal_) {
    if (drawn_ > 0) std::fprintf(stderr, "\033[%dA\033[J", drawn_);
    drawn_ = print_model_table(stderr, r, budget_);
  } else if (!r.steps.empty()) {
    const auto& step = r.steps.back();
    std::fprintf(stderr, "trials %zu/%zu best_ms %s model_ms %s tuned %s\n", step.total, budget_,
                 ms(r.workload_best_s[step.task]).c_str(), ms(r.tuned_s).c_str(), r.workloads[step.task].c_str());
  }
}

void ModelProgress::finish() {
  if (terminal_ && drawn_ > 0) std::fprintf(stderr, "\033[%dA\033[J", drawn_);
  drawn_ = 0;
  std::fflush(stderr);
}

LibraryTimes add_library_times(const frontend::ModelTasks& tasks, const tuner::ModelTuningReport& report, int cores,
                               nlohmann::json& j) {
  LibraryTimes libraries;
  double library_s = 0, tuned_same_s = 0;
  for (const auto& t : report.tasks) {
    if (!libraries.count(t.tuned_as))
      for (const auto& mt : tasks.tasks)
        if (mt.tunable && mt.tunable->workload_key() == t.tuned_as) {
#if KTUNE_HAVE_BASELINES
          if (auto lib = baselines::library_latency(*mt.tunable, cores)) libraries[t.tuned_as] = *lib;
#else
          (void)cores;  // built without baselines/: no library times
#endif
          break;
        }
    if (auto lib = libraries.find(t.tuned_as); lib != libraries.end() && std::isfinite(t.best_s)) {
      library_s += static_cast<double>(t.count) * lib->second.seconds;
      tuned_same_s += static_cast<double>(t.count) * t.best_s;
    }
  }
  for (size_t i = 0; i < report.tasks.size(); ++i)
    if (auto lib = libraries.find(report.tasks[i].tuned_as); lib != libraries.end()) {
      j["tasks"][i]["library"] = lib->second.library;
      j["tasks"][i]["library_s"] = lib->second.seconds;
    }
  j["library_s"] = library_s;
  j["tuned_s_where_library"] = tuned_same_s;
  return libraries;
}

void print_model_summary(std::FILE* out, const tuner::ModelTuningReport& report, const nlohmann::json& summary,
                         size_t budget, const LibraryTimes* libraries, const std::string& libraries_note) {
  print_model_table(out, report, budget, libraries);
  std::fprintf(out, "\nmodel %s: estimated latency %s ms (sum of count x best over %zu tasks)\n",
               summary.value("model", "?").c_str(), ms(report.tuned_s).c_str(), report.tasks.size());
  if (report.fallback_s > 0 && std::isfinite(report.tuned_s))
    std::fprintf(out, "untuned fallbacks:  %s ms  -> %.2fx faster\n", ms(report.fallback_s).c_str(),
                 report.fallback_s / report.tuned_s);
  const double library_s = summary.value("library_s", 0.0);
  if (library_s > 0) {
    const double tuned_same_s = summary.value("tuned_s_where_library", 0.0);
    std::fprintf(out, "libraries:          %s ms for the same operators (tuned: %s ms) -> tuned/library %.2f\n",
                 ms(library_s).c_str(), ms(tuned_same_s).c_str(), tuned_same_s / library_s);
  } else if (!libraries_note.empty()) {
    std::fprintf(out, "libraries: %s\n", libraries_note.c_str());
  }
  size_t unreached = 0;
  for (const auto& t : report.tasks) unreached += t.trials == 0 ? 1 : 0;
  if (unreached > 0)
    std::fprintf(out, "budget: %zu of %zu tasks got no trial in this run (a warm-up of every task takes %zu x the batch "
                      "size); each keeps what the log held, else its fallback\n", unreached, report.tasks.size(), report.tasks.size());
  for (const auto& u : summary.value("untuned", nlohmann::json::array()))
    std::fprintf(out, "not in the estimate: %s x%lld (%s)\n", u["task"].get<std::string>().c_str(),
                 static_cast<long long>(u["count"].get<int64_t>()), u["reason"].get<std::string>().c_str());
}

}  // namespace ktune::tools
