// ModelTuning: a TaskTuner per tunable task (a TuningSession per allocation, resuming from the log)
// under one TaskScheduler.
#include "tuner/model_tuning.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "support/error.h"
#include "support/version.h"
#include "tuner/db_log.h"
#include "tuner/retime.h"

namespace ktune::tuner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

nlohmann::json seconds_or_null(double s) {
  return std::isfinite(s) ? nlohmann::json(s) : nlohmann::json(nullptr);
}

}  // namespace

// Each allocation is a short TuningSession: the log holds the task's state between allocations
// (the session resumes from it), so the xgb model is refit on everything measured so far.
class ModelTuning::SessionTuner final : public TaskTuner {
 public:
  SessionTuner(const schedule_space::Task& task, tuning_db::Database& db, Measurer& measurer,
               tuning_db::TargetKey target, SessionOptions options)
      : task_(task),
        db_(db),
        measurer_(measurer),
        target_(std::move(target)),
        options_(std::move(options)) {
    refresh_best();  // a resumed run starts from the figure the log ranks by
  }

  size_t tune(size_t n) override {
    // Once stopped, every task says it can give no more, which ends the scheduler.
    if (stopped()) return 0;
    SessionOptions o = options_;
    o.trials = n;
    o.measure_fallback = false;  // measured for all tasks at once before the scheduler runs
    o.transfer = first_ && options_.transfer;  // training on the template's history once is enough
    o.run_id = run_id_;
    o.retime_top = 0;      // once per task, when the scheduler is done (retime())
    o.say_resume = false;  // ModelTuning::run says it once
    TuningSession session(task_, db_, measurer_, target_, o);
    const SessionReport report = session.run();
    first_ = false;
    run_id_ = report.run_id;
    cancelled_ = cancelled_ || report.cancelled;
    if (report.result.best_config) best_ = std::min(best_, report.result.best_result.mean_cost());
    trials_ += report.result.n_measured;
    for (const auto& [kind, n] : report.result.errors)
      errors_[std::string(to_string(kind))] += static_cast<int64_t>(n);
    return report.result.n_measured;
  }

  double best_latency() const override { return best_; }
  // The task's best records timed again, interleaved (retime_best), as a TuningSession does at its
  // end; its best latency is then the best re-timed figure, the one a model build is served.
  void retime() {
    if (stopped() || options_.emulated) return;
    const RetimeReport r = retime_best(
        db_, task_, measurer_, target_,
        RetimeOptions{options_.retime_top, options_.retime_rounds, options_.device_key});
    if (r.empty()) return;
    spdlog::info("{}: {}", task_.workload_key(), describe(r));
    // The fallback re-timed beside them: its median, so that best and fallback compare like
    // with like (a first timing of the fallback may be lucky, or cold).
    for (const RetimedConfig& c : r.configs)
      if (c.config_index == static_cast<int64_t>(task_.fallback_config().index()) &&
          c.after_s > 0 && fallback_) {
        fallback_ = c.after_s;
        fallback_noisy_ = c.noisy;
      }
    // Not r.best_after_s: when every re-timed figure rose, a record below the five (never
    // re-timed) may now be the log's best, and the best is what a build is served.
    refresh_best();
  }
  // Whether the timings behind best_latency() and fallback() spread more than
  // tuning_db::kNoisySpread (as of the last look at the log: the start and the re-timing).
  bool best_noisy() const { return best_noisy_; }
  bool fallback_noisy() const { return fallback_noisy_; }
  std::optional<double> fallback() const { return fallback_; }
  // The fallback is a measured config too: a task no allocation reached yet runs it.
  // It goes to the log like every measurement (once per config), so that a resumed run knows
  // the best this run reported even when that best was the fallback.
  void set_fallback(const MeasureResult& r) {
    const auto start = std::chrono::steady_clock::now();
    // Counted like a session's fallback (a server's trial counter counts every record its jobs
    // log).
    if (log_fallback(db_, task_, r,
                     RecordContext{target_, options_.device_key, "", kVersion, 0, options_.emulated,
                                   options_.client}) &&
        options_.on_logged)
      options_.on_logged(
          {r}, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!r.ok()) return;
    fallback_ = r.mean_cost();
    best_ = std::min(best_, *fallback_);
  }
  size_t trials() const { return trials_; }
  const std::map<std::string, int64_t>& errors() const { return errors_; }
  const schedule_space::Task& task() const { return task_; }
  // The log's best figure (Record::cost(): a re-timing's median when re-timed) of this task's
  // workload on this target and device key, as a build looks it up; +inf when none.
  // Sets best_ and best_noisy_ from it.
  void refresh_best() {
    const auto best = db_.best(task_.workload_key(), target_,
                               tuning_db::RecordQuery{options_.device_key, options_.emulated});
    best_ = best ? best->cost() : kInf;
    best_noisy_ = best && best->noisy();
  }
  bool cancelled() const { return cancelled_; }
  // Configs of its workload the log holds (this emulated-ness), and the log's path.
  size_t in_log() const {
    return db_.measured_indices(task_.workload_key(), target_, options_.emulated).size();
  }
  std::string log_path() const { return db_.path(); }
  bool stopped() const { return cancelled_ || (options_.should_stop && options_.should_stop()); }

 private:
  const schedule_space::Task& task_;
  tuning_db::Database& db_;
  Measurer& measurer_;
  tuning_db::TargetKey target_;
  SessionOptions options_;
  bool first_ = true;
  int64_t run_id_ = 0;
  double best_ = kInf;
  bool best_noisy_ = false;
  std::optional<double> fallback_;
  bool fallback_noisy_ = false;
  size_t trials_ = 0;
  std::map<std::string, int64_t> errors_;  // failed new trials per error kind
  bool cancelled_ = false;
};

// The scheduler's view of one task of the model and its alternatives (other algorithms for the
// same layers): its latency is the fastest of them, the one a model build runs. Its allocations
// go to each member once, then to the fastest, except every fourth, which goes to the others in
// turn: an algorithm slower after its first allocation may still overtake with more trials.
class ModelTuning::ChoiceTuner final : public TaskTuner {
 public:
  explicit ChoiceTuner(SessionTuner* task) : members_{task}, exhausted_{false} {}
  void add(SessionTuner* alternative) {
    if (std::find(members_.begin(), members_.end(), alternative) != members_.end()) return;
    members_.push_back(alternative);
    exhausted_.push_back(false);
  }

  size_t tune(size_t n) override {
    ++allocations_;
    while (warmed_ < members_.size()) {
      const size_t k = warmed_++;
      if (const size_t got = try_member(k, n)) return got;
    }
    std::vector<size_t> order(members_.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return members_[a]->best_latency() < members_[b]->best_latency();
    });
    if (order.size() > 1 && allocations_ % 4 == 0)
      std::rotate(order.begin(), order.begin() + 1 + (allocations_ / 4) % (order.size() - 1),
                  order.end());
    for (size_t k : order)
      if (const size_t got = try_member(k, n)) return got;
    return 0;
  }

  double best_latency() const override {
    double best = kInf;
    for (const SessionTuner* m : members_) best = std::min(best, m->best_latency());
    return best;
  }
  const SessionTuner& task() const { return *members_.front(); }
  // The member the last allocation measured (the task itself before any).
  const SessionTuner& last_tuned() const { return *members_[last_]; }
  size_t size() const { return members_.size(); }
  // The scheduler's group (tasks alike in throughput): the members' templates. A task that may
  // run another algorithm is not alike to one that runs its template only: Winograd's latency
  // over the direct convolution's FLOPs would set every direct conv's expected throughput (the
  // gradient's beta bound) far above what it can reach, and the scheduler would pour the budget
  // into the slowest direct conv.
  std::string group() const {
    std::string group = members_.front()->task().template_name();
    std::set<std::string> others;
    for (size_t k = 1; k < members_.size(); ++k) others.insert(members_[k]->task().template_name());
    for (const std::string& name : others) group += "|" + name;
    return group;
  }

 private:
  size_t try_member(size_t k, size_t n) {
    if (exhausted_[k]) return 0;
    const size_t got = members_[k]->tune(n);
    exhausted_[k] = got == 0;
    if (got > 0) last_ = k;
    return got;
  }

  std::vector<SessionTuner*> members_;
  std::vector<bool> exhausted_;
  size_t warmed_ = 0, allocations_ = 0, last_ = 0;
};

ModelTuning::ModelTuning(const frontend::ModelTasks& tasks, tuning_db::Database& db,
                         Measurer& measurer, tuning_db::TargetKey target,
                         ModelTuningOptions options)
    : tasks_(tasks), measurer_(measurer), options_(std::move(options)) {
  options_.session.batch_size = options_.scheduler.batch_size;
  options_.session.trials = options_.scheduler.batch_size;
  validate(options_.session);
  validate(options_.scheduler);
  // Tasks tuned as the same workload (e.g. two epilogues of one conv while the templates take no
  // epilogue) share one tuner: they share the log's records anyway.
  std::map<std::string, size_t> by_workload;
  for (const auto& t : tasks_.tasks) {
    if (!t.tunable) {
      ++not_tuned_;
      continue;
    }
    tunable_.push_back(&t);
    auto [it, fresh] = by_workload.emplace(t.tunable->workload_key(), tuners_.size());
    if (fresh) {
      tuners_.push_back(
          std::make_unique<SessionTuner>(*t.tunable, db, measurer, target, options_.session));
      weights_.push_back(0);
    }
    tuner_of_.push_back(it->second);
    weights_[it->second] += static_cast<double>(t.count);
  }
  if (tunable_.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "no task of the model can be tuned with today's templates");
  // Alternatives join the choice of the task they stand in for (their own when it has no tuner).
  std::map<size_t, size_t> choice_of_tuner;
  auto choice_for = [&](size_t tuner) {
    auto [it, fresh] = choice_of_tuner.emplace(tuner, choices_.size());
    if (fresh) choices_.push_back(std::make_unique<ChoiceTuner>(tuners_[tuner].get()));
    return it->second;
  };
  for (size_t i = 0; i < tunable_.size(); ++i)
    if (!tunable_[i]->alternative_of) choice_for(tuner_of_[i]);
  for (size_t i = 0; i < tunable_.size(); ++i) {
    if (!tunable_[i]->alternative_of) continue;
    const frontend::ModelTask* of = &tasks_.tasks.at(*tunable_[i]->alternative_of);
    const auto primary = std::find(tunable_.begin(), tunable_.end(), of);
    if (primary == tunable_.end()) {
      choice_for(tuner_of_[i]);
    } else {
      const size_t tuner = tuner_of_[static_cast<size_t>(primary - tunable_.begin())];
      choices_[choice_for(tuner)]->add(tuners_[tuner_of_[i]].get());
    }
  }
}

ModelTuning::~ModelTuning() = default;

ModelTuningReport ModelTuning::report() const {
  ModelTuningReport r;
  r.not_tuned = not_tuned_;
  r.out_of_time = out_of_time_;
  r.search_s = search_s_;
  r.retime_s = retime_s_;
  r.steps = steps_;
  if (!steps_.empty())
    r.step_tuned = choices_.at(steps_.back().task)->last_tuned().task().workload_key();
  for (const auto& tuner : tuners_) {
    r.trials += tuner->trials();
    r.cancelled = r.cancelled || tuner->stopped();
  }
  for (const auto& choice : choices_) {
    r.workloads.push_back(choice->task().task().workload_key());
    r.workload_best_s.push_back(choice->best_latency());
  }
  for (size_t i = 0; i < tunable_.size(); ++i) {
    const frontend::ModelTask& t = *tunable_[i];
    const SessionTuner& tuner = *tuners_[tuner_of_[i]];
    TaskProgress p{t.key(),
                   t.tunable->workload_key(),
                   t.count,
                   t.flop,
                   tuner.trials(),
                   tuner.best_latency(),
                   tuner.fallback(),
                   {},
                   {},
                   {},
                   tuner.best_noisy(),
                   tuner.fallback_noisy()};
    if (t.alternative_of) p.alternative_of = tasks_.tasks.at(*t.alternative_of).key();
    p.errors = tuner.errors();
    r.tasks.push_back(std::move(p));
  }
  sum_latencies(r);
  label_layers(r, tasks_);
  return r;
}

void sum_latencies(ModelTuningReport& r) {
  r.tuned_s = r.fallback_s = 0;
  for (const TaskProgress& t : r.tasks) {
    if (!t.alternative_of.empty()) continue;
    double best = t.best_s;  // what a model build runs: the fastest of the task's algorithms
    for (const TaskProgress& a : r.tasks)
      if (a.alternative_of == t.key) best = std::min(best, a.best_s);
    r.tuned_s += static_cast<double>(t.count) * best;
    if (t.fallback_s) r.fallback_s += static_cast<double>(t.count) * *t.fallback_s;
  }
}

ModelTuningReport ModelTuning::run(const std::function<void(const ModelTuningReport&)>& on_step) {
  const auto start = std::chrono::steady_clock::now();
  size_t resumed = 0;
  for (const auto& tuner : tuners_) resumed += tuner->in_log();
  if (resumed > 0 && !tuners_.empty())
    spdlog::info("resuming: {} configs of the model's {} workloads are already in {}", resumed,
                 tuners_.size(), tuners_.front()->log_path());
  // Every task's untuned fallback in one batch (the measurer builds them in parallel), in this
  // run, so the model's fallback latency covers the same tasks as its tuned estimate.
  std::vector<MeasureInput> fallbacks;
  for (const auto& tuner : tuners_)
    fallbacks.push_back({&tuner->task(), tuner->task().fallback_config()});
  const std::vector<MeasureResult> results = measurer_.measure(fallbacks);
  for (size_t k = 0; k < tuners_.size() && k < results.size(); ++k)
    tuners_[k]->set_fallback(results[k]);

  std::vector<ScheduledTask> scheduled;
  for (const auto& choice : choices_) {
    const schedule_space::Task& task = choice->task().task();
    const size_t k = static_cast<size_t>(
        std::find_if(tuners_.begin(), tuners_.end(),
                     [&](const auto& t) { return t.get() == &choice->task(); }) -
        tuners_.begin());
    scheduled.push_back({task.workload_key(), weights_[k], task.flop(), choice->group(),
                         choice.get(), choice->size()});
  }
  // The time budget counts from here: the fallbacks' measurement is part of the search.
  TaskSchedulerOptions scheduler_options = options_.scheduler;
  if (scheduler_options.time_budget_s > 0)
    scheduler_options.time_budget_s = std::max(
        1e-9, scheduler_options.time_budget_s -
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  TaskScheduler scheduler(std::move(scheduled), scheduler_options);
  scheduler.run([&](const SchedulerStep& step) {
    steps_.push_back(step);
    if (on_step) on_step(report());
  });
  out_of_time_ = scheduler.out_of_time();
  const auto searched = std::chrono::steady_clock::now();
  search_s_ = std::chrono::duration<double>(searched - start).count();
  for (const auto& tuner : tuners_) tuner->retime();
  retime_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - searched).count();
  return report();
}

void label_layers(ModelTuningReport& report, const frontend::ModelTasks& tasks) {
  for (auto& p : report.tasks)
    for (size_t i = 0; i < tasks.tasks.size(); ++i)
      if (tasks.tasks[i].key() == p.key) {
        std::vector<std::string> layers = tasks.layers_of(i);
        if (!layers.empty()) p.layers = std::move(layers);
        break;
      }
}

size_t warmup_trials(const frontend::ModelTasks& tasks, size_t batch_size) {
  std::set<std::string> workloads;
  for (const auto& t : tasks.tasks)
    if (t.tunable) workloads.insert(t.tunable->workload_key());
  return workloads.size() * batch_size;
}

size_t auto_trials(const frontend::ModelTasks& tasks, size_t batch_size) {
  return kAutoAllocations * warmup_trials(tasks, batch_size);
}

std::string layers_label(const std::vector<std::string>& layers) {
  if (layers.empty()) return "-";
  return layers.size() == 1 ? layers[0]
                            : layers[0] + " +" + std::to_string(layers.size() - 1) + " more";
}

bool runs_in_model(const ModelTuningReport& r, size_t i) {
  const TaskProgress& t = r.tasks[i];
  const std::string& group = t.alternative_of.empty() ? t.key : t.alternative_of;
  for (size_t k = 0; k < r.tasks.size(); ++k) {
    const TaskProgress& o = r.tasks[k];
    if (k == i || (o.key != group && o.alternative_of != group)) continue;
    const bool o_primary = o.alternative_of.empty();
    if (o.best_s < t.best_s || (!(t.best_s < o.best_s) && o_primary)) return false;
  }
  return true;
}

bool best_noisy_in_sums(const ModelTuningReport& r, size_t i) {
  return r.tasks[i].best_noisy && runs_in_model(r, i);
}

bool fallback_noisy_in_sums(const ModelTuningReport& r, size_t i) {
  return r.tasks[i].fallback_noisy && r.tasks[i].alternative_of.empty() && r.tasks[i].fallback_s;
}

size_t noisy_in_sums(const ModelTuningReport& r) {
  size_t n = 0;
  for (size_t i = 0; i < r.tasks.size(); ++i)
    n += best_noisy_in_sums(r, i) || fallback_noisy_in_sums(r, i);
  return n;
}

nlohmann::json to_json(const ModelTuningReport& r) {
  nlohmann::json j{{"trials", r.trials},         {"tuned_s", seconds_or_null(r.tuned_s)},
                   {"fallback_s", r.fallback_s}, {"not_tuned", r.not_tuned},
                   {"cancelled", r.cancelled},   {"out_of_time", r.out_of_time}};
  j["wall"] = {{"search_s", r.search_s}, {"retime_s", r.retime_s}};
  const size_t noisy = noisy_in_sums(r);
  if (noisy > 0)
    j["noisy_in_sums"] = noisy;
  else if (std::isfinite(r.tuned_s) && r.tuned_s > 0 && r.fallback_s > 0)
    j["speedup_over_fallback"] = r.fallback_s / r.tuned_s;
  j["tasks"] = nlohmann::json::array();
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const TaskProgress& t = r.tasks[i];
    const double time = static_cast<double>(t.count) * t.best_s;
    const bool runs = runs_in_model(r, i);
    j["tasks"].push_back({{"key", t.key},
                          {"tuned_as", t.tuned_as},
                          {"count", t.count},
                          {"gflop", t.flop / 1e9},
                          {"trials", t.trials},
                          {"best_s", seconds_or_null(t.best_s)},
                          {"fallback_s", t.fallback_s ? nlohmann::json(*t.fallback_s) : nullptr},
                          {"runs_in_model", runs},
                          {"share", runs && std::isfinite(time) && std::isfinite(r.tuned_s)
                                        ? nlohmann::json(time / r.tuned_s)
                                        : nullptr},
                          {"layers", t.layers}});
    if (!t.alternative_of.empty()) j["tasks"].back()["alternative_of"] = t.alternative_of;
    if (!t.errors.empty()) j["tasks"].back()["errors"] = t.errors;
    if (t.best_noisy) j["tasks"].back()["best_noisy"] = true;
    if (t.fallback_noisy) j["tasks"].back()["fallback_noisy"] = true;
  }
  j["workloads"] = nlohmann::json::array();
  for (size_t k = 0; k < r.workloads.size(); ++k)
    j["workloads"].push_back(
        {{"key", r.workloads[k]},
         {"best_s", seconds_or_null(k < r.workload_best_s.size() ? r.workload_best_s[k] : kInf)}});
  if (!r.steps.empty())
    j["step"] = {{"task", r.steps.back().task},
                 {"measured", r.steps.back().measured},
                 {"total", r.steps.back().total},
                 {"tuned", r.step_tuned}};
  return j;
}

ModelTuningReport model_report_from_json(const nlohmann::json& j) {
  auto seconds = [](const nlohmann::json& v) { return v.is_number() ? v.get<double>() : kInf; };
  // nlohmann would cast a float or a negative number to size_t (undefined or wrapped).
  auto count = [](const nlohmann::json& v) -> size_t {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
      throw Error(ErrorKind::kInvalidArgument,
                  "model tuning report: a count is not an integer >= 0");
    return v.get<size_t>();
  };
  try {
    ModelTuningReport r;
    r.trials = count(j.at("trials"));
    r.tuned_s = seconds(j.at("tuned_s"));
    r.fallback_s = j.at("fallback_s").get<double>();
    r.not_tuned = count(j.at("not_tuned"));
    r.cancelled = j.value("cancelled", false);
    r.out_of_time = j.value("out_of_time", false);
    if (const auto wall = j.find("wall"); wall != j.end() && wall->is_object()) {
      r.search_s = wall->value("search_s", 0.0);
      r.retime_s = wall->value("retime_s", 0.0);
    }
    for (const auto& t : j.at("tasks")) {
      TaskProgress p{t.at("key").get<std::string>(),
                     t.at("tuned_as").get<std::string>(),
                     static_cast<int64_t>(count(t.at("count"))),
                     t.at("gflop").get<double>() * 1e9,
                     count(t.at("trials")),
                     seconds(t.at("best_s")),
                     std::nullopt,
                     {},
                     {},
                     {},
                     t.value("best_noisy", false),
                     t.value("fallback_noisy", false)};
      if (t.at("fallback_s").is_number()) p.fallback_s = t["fallback_s"].get<double>();
      p.layers = t.value("layers", std::vector<std::string>{});
      p.alternative_of = t.value("alternative_of", "");
      const nlohmann::json errors = t.value("errors", nlohmann::json::object());
      for (const auto& [kind, n] : errors.items()) p.errors[kind] = static_cast<int64_t>(count(n));
      r.tasks.push_back(std::move(p));
    }
    for (const auto& w : j.value("workloads", nlohmann::json::array())) {
      r.workloads.push_back(w.at("key").get<std::string>());
      r.workload_best_s.push_back(seconds(w.at("best_s")));
    }
    if (j.contains("step")) {
      const auto& s = j["step"];
      SchedulerStep step;
      step.task = count(s.at("task"));
      step.measured = count(s.at("measured"));
      step.total = count(s.at("total"));
      step.model_latency = r.tuned_s;
      if (step.task >= r.workloads.size())
        throw Error(ErrorKind::kInvalidArgument, "model tuning report: step of an unknown task");
      r.steps.push_back(step);
      r.step_tuned = s.value("tuned", r.workloads[step.task]);
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument, std::string("model tuning report: ") + e.what());
  }
}

nlohmann::json model_summary_json(const frontend::ModelTasks& tasks,
                                  const ModelTuningReport& report) {
  nlohmann::json j = to_json(report);
  j["model"] = tasks.model;
  j["untuned"] = nlohmann::json::array();
  for (const auto& t : tasks.tasks)
    if (!t.tunable)
      j["untuned"].push_back({{"task", t.key()}, {"count", t.count}, {"reason", t.refused}});
  for (const auto& u : tasks.unsupported)
    j["untuned"].push_back({{"task", u.op}, {"count", u.count}, {"reason", u.reason}});
  return j;
}

}  // namespace ktune::tuner
