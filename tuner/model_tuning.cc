// ModelTuning: a TaskTuner per tunable task (a TuningSession per allocation, resuming from the log)
// under one TaskScheduler.
#include "tuner/model_tuning.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "support/error.h"
#include "support/version.h"
#include "tuner/db_log.h"

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
    for (const auto& past : load_past_measurements(db_, task_, target_, options_.emulated))
      if (past.result.ok()) best_ = std::min(best_, past.result.mean_cost());
  }

  size_t tune(size_t n) override {
    // Once stopped, every task says it can give no more, which ends the scheduler.
    if (stopped()) return 0;
    SessionOptions o = options_;
    o.trials = n;
    o.measure_fallback = false;  // measured for all tasks at once before the scheduler runs
    o.transfer = first_ && options_.transfer;  // training on the template's history once is enough
    o.run_id = run_id_;
    TuningSession session(task_, db_, measurer_, target_, o);
    const SessionReport report = session.run();
    first_ = false;
    run_id_ = report.run_id;
    cancelled_ = cancelled_ || report.cancelled;
    if (report.result.best_config) best_ = std::min(best_, report.result.best_result.mean_cost());
    trials_ += report.result.n_measured;
    return report.result.n_measured;
  }

  double best_latency() const override { return best_; }
  std::optional<double> fallback() const { return fallback_; }
  // The fallback is a measured config too: a task no allocation reached yet runs it.
  // It goes to the log like every measurement (once per config), so that a resumed run knows
  // the best this run reported even when that best was the fallback.
  void set_fallback(const MeasureResult& r) {
    log_fallback(db_, task_, r,
                 RecordContext{target_, options_.device_key, "", kVersion, 0, options_.emulated});
    if (!r.ok()) return;
    fallback_ = r.mean_cost();
    best_ = std::min(best_, *fallback_);
  }
  size_t trials() const { return trials_; }
  const schedule_space::Task& task() const { return task_; }
  bool cancelled() const { return cancelled_; }
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
  std::optional<double> fallback_;
  size_t trials_ = 0;
  bool cancelled_ = false;
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
}

ModelTuning::~ModelTuning() = default;

ModelTuningReport ModelTuning::report() const {
  ModelTuningReport r;
  r.not_tuned = not_tuned_;
  r.steps = steps_;
  for (const auto& tuner : tuners_) {
    r.trials += tuner->trials();
    r.workloads.push_back(tuner->task().workload_key());
    r.workload_best_s.push_back(tuner->best_latency());
    r.cancelled = r.cancelled || tuner->stopped();
  }
  for (size_t i = 0; i < tunable_.size(); ++i) {
    const frontend::ModelTask& t = *tunable_[i];
    const SessionTuner& tuner = *tuners_[tuner_of_[i]];
    TaskProgress p{t.key(),        t.tunable->workload_key(), t.count,          t.flop,
                   tuner.trials(), tuner.best_latency(),      tuner.fallback(), {}};
    r.tuned_s += static_cast<double>(t.count) * p.best_s;
    if (p.fallback_s) r.fallback_s += static_cast<double>(t.count) * *p.fallback_s;
    r.tasks.push_back(std::move(p));
  }
  label_layers(r, tasks_);
  return r;
}

ModelTuningReport ModelTuning::run(const std::function<void(const ModelTuningReport&)>& on_step) {
  // Every task's untuned fallback in one batch (the measurer builds them in parallel), in this
  // run, so the model's fallback latency covers the same tasks as its tuned estimate.
  std::vector<MeasureInput> fallbacks;
  for (const auto& tuner : tuners_)
    fallbacks.push_back({&tuner->task(), tuner->task().fallback_config()});
  const std::vector<MeasureResult> results = measurer_.measure(fallbacks);
  for (size_t k = 0; k < tuners_.size() && k < results.size(); ++k)
    tuners_[k]->set_fallback(results[k]);

  std::vector<ScheduledTask> scheduled;
  for (size_t k = 0; k < tuners_.size(); ++k) {
    const schedule_space::Task& task = tuners_[k]->task();
    scheduled.push_back(
        {task.workload_key(), weights_[k], task.flop(), task.template_name(), tuners_[k].get()});
  }
  TaskScheduler scheduler(std::move(scheduled), options_.scheduler);
  scheduler.run([&](const SchedulerStep& step) {
    steps_.push_back(step);
    if (on_step) on_step(report());
  });
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

nlohmann::json to_json(const ModelTuningReport& r) {
  nlohmann::json j{{"trials", r.trials},
                   {"tuned_s", seconds_or_null(r.tuned_s)},
                   {"fallback_s", r.fallback_s},
                   {"not_tuned", r.not_tuned},
                   {"cancelled", r.cancelled}};
  if (std::isfinite(r.tuned_s) && r.tuned_s > 0 && r.fallback_s > 0)
    j["speedup_over_fallback"] = r.fallback_s / r.tuned_s;
  j["tasks"] = nlohmann::json::array();
  for (const auto& t : r.tasks) {
    const double time = static_cast<double>(t.count) * t.best_s;
    j["tasks"].push_back({{"key", t.key},
                          {"tuned_as", t.tuned_as},
                          {"count", t.count},
                          {"gflop", t.flop / 1e9},
                          {"trials", t.trials},
                          {"best_s", seconds_or_null(t.best_s)},
                          {"fallback_s", t.fallback_s ? nlohmann::json(*t.fallback_s) : nullptr},
                          {"share", std::isfinite(time) && std::isfinite(r.tuned_s)
                                        ? nlohmann::json(time / r.tuned_s)
                                        : nullptr},
                          {"layers", t.layers}});
  }
  j["workloads"] = nlohmann::json::array();
  for (size_t k = 0; k < r.workloads.size(); ++k)
    j["workloads"].push_back(
        {{"key", r.workloads[k]},
         {"best_s", seconds_or_null(k < r.workload_best_s.size() ? r.workload_best_s[k] : kInf)}});
  if (!r.steps.empty())
    j["step"] = {{"task", r.steps.back().task},
                 {"measured", r.steps.back().measured},
                 {"total", r.steps.back().total}};
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
    for (const auto& t : j.at("tasks")) {
      TaskProgress p{t.at("key").get<std::string>(),
                     t.at("tuned_as").get<std::string>(),
                     static_cast<int64_t>(count(t.at("count"))),
                     t.at("gflop").get<double>() * 1e9,
                     count(t.at("trials")),
                     seconds(t.at("best_s")),
                     std::nullopt,
                     {}};
      if (t.at("fallback_s").is_number()) p.fallback_s = t["fallback_s"].get<double>();
      p.layers = t.value("layers", std::vector<std::string>{});
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
