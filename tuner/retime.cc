// retime_best: the best configs of a workload timed again side by side.
#include "tuner/retime.h"

#include "support/ms_text.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace ktune::tuner {
namespace {

// The records to re-time: the best real ones of exactly this device key, with their configs as
// this ktune builds them, and the fallback config's record wherever it ranks. Disputed records
// that rank among them are taken too (up to as many again), so that a device other than theirs
// may settle them; they do not count towards `top`.
struct Candidate {
  tuning_db::Record record;
  schedule_space::Config config;
};

std::vector<Candidate> candidates(tuning_db::Database& db, const schedule_space::Task& task,
                                  const tuning_db::TargetKey& target,
                                  const RetimeOptions& options) {
  // top_k with an empty device key serves every device: ask for more and keep this key's.
  tuning_db::RecordQuery query;
  query.device_key = options.device_key;
  query.include_disputed = true;
  const int64_t wanted = options.top * 4 + 16;
  const auto& space = task.space();
  const int64_t fallback = static_cast<int64_t>(task.fallback_config().index());
  std::vector<Candidate> out;
  const auto take = [&](tuning_db::Record& r) {
    try {
      schedule_space::Config config =
          space.get(space.index_of(schedule_space::Config::from_json(r.config)));
      out.push_back({std::move(r), std::move(config)});
      return true;
    } catch (const Error& e) {
      spdlog::warn("record {} of {} is not re-timed: its config does not fit ({})", r.id,
                   r.workload_key, e.what());
      return false;
    }
  };
  int64_t served = 0, disputed = 0;
  for (tuning_db::Record& r : db.top_k(task.workload_key(), target, wanted, query)) {
    if (r.device_key != options.device_key) continue;
    if (served >= options.top) break;
    if (r.disputed) {
      if (disputed < options.top && take(r)) ++disputed;
    } else if (take(r)) {
      ++served;
    }
  }
  const bool fallback_chosen = std::any_of(out.begin(), out.end(), [&](const Candidate& c) {
    return c.record.config_index == fallback;
  });
  if (!fallback_chosen && options.top > 0)
    if (auto r = db.config_best(task.workload_key(), target, fallback, query);
        r && r->device_key == options.device_key)
      take(*r);
  return out;
}

// The best a build is served among the candidates (ordered by figure): the first not disputed.
const Candidate* served_best(const std::vector<Candidate>& chosen) {
  for (const Candidate& c : chosen)
    if (!c.record.disputed) return &c;
  return nullptr;
}

// A record's re-timing rounds: those of its own device (the worker that measured it; every round
// when the measurer has one device) and those of other devices of its key.
struct Rounds {
  std::vector<double> own, others;
};

// Stores a record's rounds and settles whether another device disputes it. Rounds of another
// device count only where they agree with the record's own figure (its own rounds, else its
// figure before): a device that disagrees never rewrites another's measurement, and the record
// is disputed (not served) until a device other than its own agrees.
void store(tuning_db::Database& db, tuning_db::Record& r, const Rounds& rounds) {
  std::vector<double> kept = rounds.own;
  bool disputed = r.disputed;
  if (!rounds.others.empty()) {
    const double mine = rounds.own.empty() ? r.cost() : tuning_db::median(rounds.own);
    const double theirs = tuning_db::median(rounds.others);
    disputed = tuning_db::disagree(mine, theirs);
    if (disputed)
      spdlog::warn(
          "config {} of {} (measured by {}) timed {} ms on another device of its key against "
          "{} ms: disputed, not served until a device other than its own agrees",
          r.config_index, r.workload_key, r.worker.empty() ? "this host" : r.worker,
          ms_text(theirs), ms_text(mine));
    else
      kept.insert(kept.end(), rounds.others.begin(), rounds.others.end());
  }
  if (!kept.empty()) {
    db.retime(r.id, kept);
    r.retimed_costs = kept;
  }
  if (disputed != r.disputed) {
    db.set_disputed(r.id, disputed);
    r.disputed = disputed;
  }
}

// One pass: every chosen record timed `rounds` times, interleaved; each record's rounds stored.
// Returns what each one was before and after.
std::vector<RetimedConfig> retime_pass(tuning_db::Database& db, const schedule_space::Task& task,
                                       Measurer& measurer, std::vector<Candidate>& chosen,
                                       int rounds) {
  const size_t n = chosen.size();
  std::vector<Rounds> figures(n);
  std::vector<int> failed(n, 0);
  for (int round = 0; round < rounds; ++round) {
    std::vector<MeasureInput> inputs;
    std::vector<size_t> order;
    for (size_t i = 0; i < n; ++i) {
      const size_t at = (i + static_cast<size_t>(round)) % n;
      order.push_back(at);
      inputs.push_back({&task, chosen[at].config});
    }
    const std::vector<MeasureResult> results = measurer.measure(inputs);
    for (size_t i = 0; i < n && i < results.size(); ++i) {
      const tuning_db::Record& r = chosen[order[i]].record;
      if (results[i].ok()) {
        Rounds& f = figures[order[i]];
        (results[i].worker == r.worker ? f.own : f.others).push_back(results[i].mean_cost());
      } else {
        ++failed[order[i]];
        spdlog::warn("re-timing config {} of {}: round {} failed ({})", r.config_index,
                     task.workload_key(), round + 1, results[i].error_message);
      }
    }
  }
  std::vector<RetimedConfig> out;
  for (size_t i = 0; i < n; ++i) {
    tuning_db::Record& r = chosen[i].record;
    RetimedConfig c{r.id, r.config_index, r.cost(), 0, failed[i], false, false};
    if (!figures[i].own.empty() || !figures[i].others.empty()) {
      store(db, r, figures[i]);
      c.after_s = r.cost();
      c.noisy = r.noisy();
      c.disputed = r.disputed;
    } else {
      spdlog::warn("config {} of {} failed every re-timing round; it keeps its first figure",
                   r.config_index, task.workload_key());
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

RetimeReport retime_best(tuning_db::Database& db, const schedule_space::Task& task,
                         Measurer& measurer, const tuning_db::TargetKey& target,
                         const RetimeOptions& options) {
  RetimeReport report;
  if (options.top <= 0 || options.rounds <= 0) return report;
  std::set<int64_t> timed;  // records this re-timing measured (or tried to)
  for (int pass = 0; pass < kMaxRetimePasses; ++pass) {
    std::vector<Candidate> chosen = candidates(db, task, target, options);
    // A disputed record is timed once per re-timing: a later pass would only ask again.
    std::erase_if(chosen, [&](const Candidate& c) {
      return c.record.disputed && timed.count(c.record.id) > 0;
    });
    const Candidate* best = served_best(chosen);
    // Done once the best is a record this re-timing measured. When the first timings of all
    // the chosen were lucky (or another device disputed them), re-timing demotes them all and an
    // untimed one takes the lead: the next pass times it (with the new top), so that what a
    // build is served was re-timed. With none served, the disputed ones are timed, once.
    if (chosen.empty() || (best != nullptr && timed.count(best->record.id))) break;
    if (pass == 0 && best != nullptr) {
      report.best_before_s = best->record.cost();
      report.best_before_index = best->record.config_index;
    }
    report.rounds = options.rounds;
    report.passes = pass + 1;
    report.with_fallback =
        report.with_fallback || static_cast<int64_t>(chosen.size()) > options.top;
    report.measured += static_cast<int64_t>(chosen.size()) * options.rounds;
    for (RetimedConfig& c : retime_pass(db, task, measurer, chosen, options.rounds)) {
      timed.insert(c.record_id);
      // A record re-timed again keeps the figure it had before this re-timing began.
      const auto earlier =
          std::find_if(report.configs.begin(), report.configs.end(),
                       [&](const RetimedConfig& e) { return e.record_id == c.record_id; });
      if (earlier == report.configs.end()) {
        report.configs.push_back(c);
      } else {
        c.before_s = earlier->before_s;
        *earlier = c;
      }
    }
  }
  if (report.configs.empty()) return report;
  // The best after: the log's, as a build is served (a config that failed every round keeps its
  // old figure, as best() does).
  const std::vector<Candidate> now = candidates(db, task, target, options);
  if (const Candidate* best = served_best(now)) {
    report.best_after_s = best->record.cost();
    report.best_after_index = best->record.config_index;
    report.best_after_retimed = timed.count(best->record.id) > 0;
  }
  return report;
}

nlohmann::json to_json(const RetimeReport& report) {
  nlohmann::json configs = nlohmann::json::array();
  for (const RetimedConfig& c : report.configs)
    configs.push_back({{"record", c.record_id},
                       {"config", c.config_index},
                       {"before_s", c.before_s},
                       {"after_s", c.after_s},
                       {"failed_rounds", c.failed_rounds},
                       {"noisy", c.noisy},
                       {"disputed", c.disputed}});
  return {{"rounds", report.rounds},
          {"passes", report.passes},
          {"measured", report.measured},
          {"best_before_s", report.best_before_s},
          {"best_after_s", report.best_after_s},
          {"best_before_config", report.best_before_index},
          {"best_after_config", report.best_after_index},
          {"best_after_retimed", report.best_after_retimed},
          {"with_fallback", report.with_fallback},
          {"configs", configs}};
}

RetimeReport retime_report_from_json(const nlohmann::json& j) {
  RetimeReport report;
  report.rounds = j.value("rounds", 0);
  report.passes = j.value("passes", 0);
  report.measured = j.value("measured", int64_t{0});
  report.best_before_s = j.value("best_before_s", 0.0);
  report.best_after_s = j.value("best_after_s", 0.0);
  report.best_before_index = j.value("best_before_config", int64_t{-1});
  report.best_after_index = j.value("best_after_config", int64_t{-1});
  report.best_after_retimed = j.value("best_after_retimed", true);
  report.with_fallback = j.value("with_fallback", false);
  for (const nlohmann::json& c : j.value("configs", nlohmann::json::array()))
    report.configs.push_back({.record_id = c.value("record", int64_t{0}),
                              .config_index = c.value("config", int64_t{-1}),
                              .before_s = c.value("before_s", 0.0),
                              .after_s = c.value("after_s", 0.0),
                              .failed_rounds = c.value("failed_rounds", 0),
                              .noisy = c.value("noisy", false),
                              .disputed = c.value("disputed", false)});
  return report;
}

std::string describe(const RetimeReport& report) {
  if (report.empty()) return "nothing to re-time";
  const size_t best = report.configs.size() - (report.with_fallback ? 1 : 0);
  // A log whose records were all disputed serves no best (before or after).
  const auto figure = [](int64_t index, double s) {
    return index < 0 ? std::string("none served") : ms_text(s) + " ms";
  };
  std::string line =
      fmt::format("re-timed the {} best config{}{} over {} interleaved rounds: best {} -> {}", best,
                  best == 1 ? "" : "s", report.with_fallback ? " and the fallback" : "",
                  report.rounds, figure(report.best_before_index, report.best_before_s),
                  figure(report.best_after_index, report.best_after_s));
  if (report.passes > 1)
    line +=
        fmt::format(" in {} passes (the first demoted every config it re-timed)", report.passes);
  if (report.best_after_index >= 0 && report.best_before_index >= 0 &&
      report.best_after_index != report.best_before_index)
    line += fmt::format(" (config #{} is now the best, was #{})", report.best_after_index,
                        report.best_before_index);
  // Every pass demoted what it timed: the timings moved (a machine whose load changed), and what
  // a build is served is a first timing.
  if (report.best_after_index >= 0 && !report.best_after_retimed)
    line += fmt::format(
        "; the best, config #{}, is a first timing, not re-timed: each of the {} passes demoted "
        "every config it re-timed (timings that moved with the machine's load)",
        report.best_after_index, report.passes);
  const auto noisy = std::count_if(report.configs.begin(), report.configs.end(),
                                   [](const RetimedConfig& c) { return c.noisy; });
  if (noisy > 0)
    line += fmt::format("; {} noisy (rounds spread more than {:.0f}%)", noisy,
                        100 * tuning_db::kNoisySpread);
  const auto disputed = std::count_if(report.configs.begin(), report.configs.end(),
                                      [](const RetimedConfig& c) { return c.disputed; });
  if (disputed > 0)
    line += fmt::format(
        "; {} disputed (another device of the key timed them more than {:.0f}x away: not served "
        "until a device other than theirs agrees)",
        disputed, tuning_db::kDisputeFactor);
  return line;
}

}  // namespace ktune::tuner
