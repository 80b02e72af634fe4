// The end-of-run summary as text.
#include "tools/tune_summary.h"

#include <iomanip>
#include <ostream>

#include "support/ms_text.h"
#include "tuner/retime.h"
#include "tuning_db/record.h"

namespace ktune::tools {
namespace {

// "X GFLOP/s (Y ms)", with how it was timed: "re-timed" (the median of interleaved rounds, the
// figure `best` and a build serve), its first timing, NOISY when the rounds spread.
void describe(std::ostream& out, const nlohmann::json& r, bool ok) {
  if (!ok) {
    out << "failed (" << r.value("error", "unknown") << ": " << r.value("error_message", "") << ")";
    return;
  }
  out << std::fixed << std::setprecision(2) << r.value("gflops", 0.0) << " GFLOP/s ("
      << ms_text(r.value("mean_cost_s", 0.0)) << " ms";
  if (r.value("retimed", false)) out << ", re-timed";
  if (r.contains("first_timing_s"))
    out << "; timed " << ms_text(r["first_timing_s"].get<double>()) << " ms first";
  out << ")";
  if (r.value("noisy", false))
    out << " NOISY: its rounds spread more than " << std::setprecision(0)
        << tuning_db::kNoisySpread * 100 << "%";
}

}  // namespace

void print_tune_summary(const nlohmann::json& s, std::ostream& out) {
  out << "workload: " << s.value("workload", "") << "\n"
      << "target:   " << s.value("target", "") << "\n"
      << "measured: " << s.value("measured", 0) << " configs (" << s.value("ok", 0) << " ok";
  // A named copy: items() of the temporary that value() returns would dangle in the loop.
  const nlohmann::json errors = s.value("errors", nlohmann::json::object());
  for (const auto& item : errors.items())
    out << ", " << item.value().get<size_t>() << " " << item.key();
  out << ")";
  // The fallback config is measured first and logged too: a log holds one record more.
  if (s.contains("fallback")) out << " and the fallback config";
  out << " in " << std::fixed << std::setprecision(1) << s.value("wall_s", 0.0) << " s";
  if (s.value("resumed", 0) > 0) out << "; " << s.value("resumed", 0) << " resumed from the log";
  if (s.value("stopped_early", false)) out << "; stopped early";
  if (s.value("space_exhausted", false)) out << "; space exhausted";
  if (s.value("cancelled", false)) out << "; cancelled";
  out << "\n";
  if (s.contains("best")) {
    const auto& best = s["best"];
    out << "best:     ";
    describe(out, best, true);
    out << (best.value("from_this_run", true) ? "" : " [from the log]");
    // The template's own default won: what an untuned build runs anyway.
    const nlohmann::json fallback_config =
        s.value("fallback", nlohmann::json::object()).value("config", nlohmann::json::object());
    if (fallback_config.contains("index") &&
        best["config"].value("index", -1) == fallback_config["index"].get<int64_t>())
      out << " [the fallback config: no trial beat it]";
    out << "\n"
        << "config:   " << best["config"].dump() << "\n";
  } else {
    out << "best:     none (no config succeeded)\n";
  }
  if (s.contains("fallback")) {
    out << "fallback: ";
    describe(out, s["fallback"], s["fallback"].value("ok", false));
    out << "\n";
  }
  if (s.contains("speedup_over_fallback")) {
    // A ratio of a noisy figure is not quoted; one of a single timing says so.
    const auto& f = s["fallback"];
    if (s["best"].value("noisy", false) || f.value("noisy", false))
      out << "speed-up over fallback: not quoted (a noisy figure: run again on a quieter "
             "machine)\n";
    else
      out << "speed-up over fallback: " << std::setprecision(2)
          << s["speedup_over_fallback"].get<double>() << "x"
          << (f.value("retimed", false) ? "" : " (the fallback timed once)") << "\n";
  }
  // Before and after: what the run measured first, and the median it ranks by now; the same
  // line a local run and a job of the server print.
  if (s.contains("retimed"))
    out << tuner::describe(tuner::retime_report_from_json(s["retimed"])) << "\n";
  if (s.contains("model")) {
    const auto& m = s["model"];
    out << "model:    " << (m.value("saved", false) ? "saved" : "not fitted") << ", "
        << m.value("refits", 0) << " plans";
    if (m.contains("rank_correlation") && !m["rank_correlation"].is_null())
      out << ", last rank correlation " << std::setprecision(2)
          << m["rank_correlation"].get<double>();
    out << "\n";
  }
}

}  // namespace ktune::tools
