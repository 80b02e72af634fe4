// TuningSession: what one tuning run does around the tuning loop.
#include "tuner/tuning_session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "support/version.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/model_based_tuner.h"
#include "tuner/model_log.h"
#include "tuner/transfer.h"
#include "tuning_db/claim_store.h"

namespace ktune::tuner {
namespace {

FeatureKind parse_features(const std::string& name) {
  if (name == "knob") return FeatureKind::kKnob;
  if (name == "loop") return FeatureKind::kLoop;
  throw Error(ErrorKind::kInvalidArgument,
              "unknown xgb features '" + name + "' (known: knob, loop)");
}

std::unique_ptr<Tuner> make_tuner(const SessionOptions& o, const schedule_space::Task& task) {
  if (o.tuner == "xgb") {
    XGBTunerParams p;
    p.search.seed = o.seed;
    p.features = parse_features(o.xgb_features);
    return std::make_unique<XGBTuner>(task, p);
  }
  if (o.tuner == "random") return std::make_unique<RandomTuner>(task.space(), o.seed);
  if (o.tuner == "grid") return std::make_unique<GridSearchTuner>(task.space());
  if (o.tuner == "ga") {
    GAOptions ga;
    ga.seed = o.seed;
    return std::make_unique<GATuner>(task.space(), task.flop(), ga);
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown tuner '" + o.tuner + "' (known: random, grid, ga, xgb)");
}

// Seeds the tuner's first plan from the log's other workloads of the template: first the best
// configs of workloads with this very space (tune-model's same-shape layers that differ in their
// epilogue), then the pick of a model trained on all of them. Does nothing (beyond a log line)
// when the history offers neither.
void seed_from_history(tuning_db::Database& db, const schedule_space::Task& task,
                       const tuning_db::TargetKey& target, const SessionOptions& o, XGBTuner& xgb,
                       const std::vector<PastMeasurement>& resume) {
  const std::vector<tuning_db::Record> history = db.history(
      task.template_name(), target, static_cast<int64_t>(o.transfer_history), o.emulated);
  std::unordered_set<uint64_t> exclude;
  for (const auto& past : resume) exclude.insert(past.config.index());
  const size_t plan_size = xgb.search().params().plan_size;
  // A quarter of the plan at most: the model's pick and exploration keep the rest.
  const std::vector<uint64_t> same =
      same_space_best(task, history, std::max<size_t>(1, plan_size / 4), exclude);
  TransferParams params;
  params.seed = o.seed;
  auto model = TransferModel::train(task, history, params);
  if (!model && same.empty()) return;
  std::vector<ScoredIndex> plan;
  for (uint64_t index : same) {
    plan.push_back({index, std::numeric_limits<float>::max()});
    exclude.insert(index);
  }
  if (model) {
    for (const ScoredIndex& c : model->plan(task, plan_size - plan.size(), exclude))
      plan.push_back(c);
  } else {
    std::mt19937_64 rng(o.seed);
    for (uint64_t index : task.space().sample(plan_size - plan.size(), rng, exclude))
      plan.push_back({index, 0.0f});
  }
  xgb.search().seed_plan(plan);
  if (!same.empty())
    spdlog::info("xgb: first plan starts with the best {} configs of workloads with the same space",
                 same.size());
  if (model)
    spdlog::info("xgb: first plan chosen by a model of {} records of {} other workloads",
                 model->rows(), model->workloads());
}

// The claims of one run: taken per batch, released per logged batch and, for whatever is left
// (a measurer that threw), when the run ends.
class ClaimGuard {
 public:
  ClaimGuard(tuning_db::Database& db, std::string workload_key, tuning_db::TargetKey target,
             double ttl_s, bool emulated)
      : db_(db),
        claims_(db),
        key_(std::move(workload_key)),
        target_(std::move(target)),
        ttl_s_(ttl_s),
        emulated_(emulated),
        owner_(tuning_db::ClaimOwner::this_process()) {}
  ClaimGuard(const ClaimGuard&) = delete;
  ClaimGuard& operator=(const ClaimGuard&) = delete;
  ~ClaimGuard() {
    try {
      claims_.release_all(owner_);
    } catch (const std::exception& e) {
      // They expire, or go with this process; nothing is lost.
      spdlog::warn("could not release the run's claims in {}: {}", db_.path(), e.what());
    }
  }

  std::vector<bool> claim(const std::vector<MeasureInput>& inputs) {
    const std::vector<int64_t> want = indices(inputs);
    const std::vector<int64_t> granted =
        claims_.claim(key_, target_, want, owner_, ttl_s_, emulated_);
    std::unordered_set<int64_t> ok(granted.begin(), granted.end());
    std::vector<bool> out;
    out.reserve(want.size());
    for (int64_t index : want) out.push_back(ok.count(index) > 0);
    if (granted.size() < want.size())
      spdlog::info(
          "{} of {} configs are in the log already or being measured by another run; "
          "skipped",
          want.size() - granted.size(), want.size());
    return out;
  }
  void release(const std::vector<MeasureInput>& inputs) {
    claims_.release(owner_, key_, target_, indices(inputs));
  }

 private:
  static std::vector<int64_t> indices(const std::vector<MeasureInput>& inputs) {
    std::vector<int64_t> out;
    out.reserve(inputs.size());
    for (const auto& input : inputs) out.push_back(static_cast<int64_t>(input.config.index()));
    return out;
  }

  tuning_db::Database& db_;
  tuning_db::ClaimStore claims_;
  std::string key_;
  tuning_db::TargetKey target_;
  double ttl_s_;
  bool emulated_;
  tuning_db::ClaimOwner owner_;
};

nlohmann::json result_json(const schedule_space::Task& task, const MeasureResult& r) {
  return {{"ok", r.ok()},
          {"mean_cost_s", r.ok() ? r.mean_cost() : 0.0},
          {"gflops", r.ok() ? task.flop() / r.mean_cost() / 1e9 : 0.0},
          {"error", r.ok() ? "" : std::string(to_string(r.error.value_or(ErrorKind::kUnknown)))},
          {"error_message", r.error_message}};
}

}  // namespace

void validate(const SessionOptions& o) {
  if (o.tuner != "xgb" && o.tuner != "random" && o.tuner != "grid" && o.tuner != "ga")
    throw Error(ErrorKind::kInvalidArgument,
                "unknown tuner '" + o.tuner + "' (known: random, grid, ga, xgb)");
  parse_features(o.xgb_features);
  if (o.trials == 0) throw Error(ErrorKind::kInvalidArgument, "trials must be at least 1");
  if (o.batch_size == 0)
    throw Error(ErrorKind::kInvalidArgument, "the batch size must be at least 1");
  if (!std::isfinite(o.claim_ttl_s) || o.claim_ttl_s <= 0)
    throw Error(ErrorKind::kInvalidArgument, "the claim ttl must be finite and > 0");
  if (o.retime_top < 0 || o.retime_rounds < 0)
    throw Error(ErrorKind::kInvalidArgument, "retime_top and retime_rounds must not be negative");
}

TuningSession::TuningSession(const schedule_space::Task& task, tuning_db::Database& db,
                             Measurer& measurer, tuning_db::TargetKey target,
                             SessionOptions options)
    : task_(task),
      db_(db),
      measurer_(measurer),
      target_(std::move(target)),
      options_(std::move(options)) {
  validate(options_);
}

SessionReport TuningSession::run(const std::function<void(const ProgressSnapshot&)>& on_progress) {
  const SessionOptions& o = options_;
  std::unique_ptr<Tuner> search = make_tuner(o, task_);
  auto* xgb = dynamic_cast<XGBTuner*>(search.get());

  TuneOptions tune_options;
  tune_options.n_trial = o.trials;
  tune_options.batch_size = o.batch_size;
  tune_options.early_stopping = o.early_stopping;
  tune_options.should_stop = o.should_stop;
  tune_options.resume = load_past_measurements(db_, task_, target_, o.emulated);
  if (!tune_options.resume.empty())
    spdlog::log(o.say_resume ? spdlog::level::info : spdlog::level::debug,
                "resuming: {} configs of {} are already in {}{}", tune_options.resume.size(),
                task_.workload_key(), db_.path(), o.emulated ? " (emulated)" : "");

  RecordContext context;
  context.target = target_;
  context.device_key = o.device_key;
  context.tuner = search->name();
  context.ktune_version = kVersion;
  context.run_id = o.run_id;
  context.emulated = o.emulated;
  context.client = o.client;
  std::unique_ptr<ModelRunLog> model_log;
  if (xgb != nullptr) {
    if (o.transfer) seed_from_history(db_, task_, target_, o, *xgb, tune_options.resume);
    nlohmann::json run_options{{"trials", o.trials},     {"batch_size", o.batch_size},
                               {"seed", o.seed},         {"features", o.xgb_features},
                               {"transfer", o.transfer}, {"emulated", o.emulated}};
    model_log = std::make_unique<ModelRunLog>(db_, task_, target_, *xgb, run_options, o.run_id);
    context.run_id = model_log->run_id();
  }
  std::optional<ClaimGuard> claims;
  if (o.claim_configs) {
    claims.emplace(db_, task_.workload_key(), target_, o.claim_ttl_s, o.emulated);
    tune_options.claim = [&claims](const std::vector<MeasureInput>& inputs) {
      return claims->claim(inputs);
    };
  }
  // The log first: the tuner (and its model fit) sees a batch only once it is recorded. Once
  // logged, a config is known to every run: its claim has done its work.
  tune_options.log = [write = database_callback(db_, task_, context), &claims,
                      on_logged = o.on_logged](const std::vector<MeasureInput>& inputs,
                                               const std::vector<MeasureResult>& results) {
    const auto start = std::chrono::steady_clock::now();
    write(inputs, results);
    if (on_logged)
      on_logged(results,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (claims) claims->release(inputs);
  };
  if (model_log) tune_options.callbacks.push_back(model_log->callback());

  // Progress: counts of this run, best including the resumed records.
  auto progress = std::make_shared<ProgressSnapshot>();
  progress->total = o.trials;
  for (const auto& past : tune_options.resume)
    if (past.result.ok())
      progress->best_gflops =
          std::max(progress->best_gflops, task_.flop() / past.result.mean_cost() / 1e9);
  const auto start = std::chrono::steady_clock::now();
  if (on_progress) {
    tune_options.callbacks.push_back([&, progress, xgb](const std::vector<MeasureInput>&,
                                                        const std::vector<MeasureResult>& results) {
      for (const auto& r : results) {
        ++progress->done;
        if (r.ok()) {
          ++progress->ok;
          const double gflops = task_.flop() / r.mean_cost() / 1e9;
          progress->best_gflops = std::max(progress->best_gflops, gflops);
          progress->run_best_gflops = std::max(progress->run_best_gflops, gflops);
        } else {
          ++progress->errors[r.error.value_or(ErrorKind::kUnknown)];
        }
      }
      progress->elapsed_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      progress->eta_s =
          progress->done > 0 && progress->total > progress->done
              ? progress->elapsed_s / progress->done * (progress->total - progress->done)
              : 0;
      if (xgb != nullptr) progress->rank_correlation = xgb->search().latest_rank_correlation();
      on_progress(*progress);
    });
  }

  SessionReport report;
  report.tuner = search->name();
  // The fallback config, measured in this run so that the speed-up compares like with like, and
  // logged like every measurement, so that best() never serves a config slower than it. It is
  // claimed first like every config (two runs never log it twice), and measured even when another
  // run holds it, for this run's speed-up. A fallback the log holds already (a re-run) is
  // measured but neither claimed nor logged again.
  bool fallback_told = false;  // handed to the tuner with the resumed measurements
  if (o.measure_fallback && !(o.should_stop && o.should_stop())) {
    const MeasureInput fallback{&task_, task_.fallback_config()};
    const bool known = std::any_of(
        tune_options.resume.begin(), tune_options.resume.end(),
        [&](const PastMeasurement& p) { return p.config.index() == fallback.config.index(); });
    const bool mine = !known && (!claims || claims->claim({fallback}).front());
    report.fallback = measurer_.measure({fallback}).front();
    if (mine) {
      const auto start = std::chrono::steady_clock::now();
      // A record like every trial's: whoever counts what is logged (metrics) counts it too.
      if (log_fallback(db_, task_, *report.fallback, context) && o.on_logged)
        o.on_logged(
            {*report.fallback},
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (claims) claims->release({fallback});
    }
    // The tuner knows it as measured: it is not measured again, and the best includes it.
    if (!known) {
      tune_options.resume.push_back({fallback.config, *report.fallback});
      fallback_told = true;
    }
  }
  report.result = tune(task_, *search, measurer_, tune_options);
  if (fallback_told) {
    // This run measured it: it is neither resumed nor, when it is the best, an old best.
    --report.result.n_resumed;
    if (report.result.best_config &&
        report.result.best_config->index() == task_.fallback_config().index())
      report.result.best_is_new = true;
  }
  report.cancelled = report.result.cancelled;
  report.model_saved = model_log && model_log->finish();
  report.run_id = context.run_id;
  if (xgb != nullptr) {
    report.refits = xgb->search().refits().size();
    report.rank_correlation = xgb->search().latest_rank_correlation();
  }
  if (!report.cancelled && !o.emulated && !(o.should_stop && o.should_stop())) {
    report.retime = retime_best(db_, task_, measurer_, target_,
                                RetimeOptions{o.retime_top, o.retime_rounds, o.device_key});
    // Debug, not info: the report carries it, and `tune`'s summary prints it once.
    if (!report.retime.empty())
      spdlog::debug("{}: {}", task_.workload_key(), describe(report.retime));
  }
  return report;
}

nlohmann::json summary_json(const schedule_space::Task& task, const tuning_db::TargetKey& target,
                            const SessionReport& report) {
  const TuneResult& r = report.result;
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& [kind, n] : r.errors) errors[std::string(to_string(kind))] = n;
  nlohmann::json j{{"workload", task.workload_key()},
                   {"target", target.target},
                   {"tuner", report.tuner},
                   {"measured", r.n_measured},
                   {"ok", r.n_ok},
                   {"errors", errors},
                   {"resumed", r.n_resumed},
                   {"claimed_elsewhere", r.n_claimed_elsewhere},
                   {"stopped_early", r.stopped_early},
                   {"space_exhausted", r.space_exhausted},
                   {"cancelled", report.cancelled},
                   {"wall_s", r.wall_s},
                   {"run_id", report.run_id}};
  if (report.tuner == "xgb") {
    j["model"] = {
        {"saved", report.model_saved},
        {"refits", report.refits},
        {"rank_correlation", report.rank_correlation ? nlohmann::json(*report.rank_correlation)
                                                     : nlohmann::json(nullptr)}};
  }
  if (r.best_config) {
    j["best"] = {{"config", r.best_config->to_json()},
                 {"mean_cost_s", r.best_result.mean_cost()},
                 {"gflops", r.best_gflops},
                 {"from_this_run", r.best_is_new},
                 {"retimed", false}};
  }
  // After a re-timing the best is what `ktune best` and a build serve: the re-timed median of the
  // log's best config. The first timing's best stays beside it, for the record.
  const RetimeReport& t = report.retime;
  auto retimed = [&](int64_t index) -> const RetimedConfig* {
    for (const RetimedConfig& c : t.configs)
      if (c.config_index == index && c.after_s > 0) return &c;
    return nullptr;
  };
  if (const RetimedConfig* best = retimed(t.best_after_index); best && j.contains("best")) {
    j["first_timing"] = j["best"];
    j["best"] = {{"config", task.space().get(static_cast<uint64_t>(best->config_index)).to_json()},
                 {"mean_cost_s", best->after_s},
                 {"gflops", task.flop() / best->after_s / 1e9},
                 {"retimed", true},
                 {"noisy", best->noisy}};
    if (r.best_config && static_cast<int64_t>(r.best_config->index()) == best->config_index)
      j["best"]["from_this_run"] = r.best_is_new;
  }
  if (report.fallback) {
    j["fallback"] = result_json(task, *report.fallback);
    j["fallback"]["config"] = task.fallback_config().to_json();
    j["fallback"]["retimed"] = false;
    // Re-timed beside the best: its median, the one timing kept as first_timing_s.
    if (const RetimedConfig* f = retimed(static_cast<int64_t>(task.fallback_config().index()))) {
      j["fallback"]["first_timing_s"] = j["fallback"]["mean_cost_s"];
      j["fallback"]["mean_cost_s"] = f->after_s;
      j["fallback"]["gflops"] = task.flop() / f->after_s / 1e9;
      j["fallback"]["retimed"] = true;
      j["fallback"]["noisy"] = f->noisy;
    }
    if (j.contains("best") && report.fallback->ok())
      j["speedup_over_fallback"] =
          j["fallback"]["mean_cost_s"].get<double>() / j["best"]["mean_cost_s"].get<double>();
  }
  if (!report.retime.empty()) j["retimed"] = to_json(report.retime);
  return j;
}

}  // namespace ktune::tuner
