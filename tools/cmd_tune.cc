// `ktune tune <template> key=value...`: tune a workload on this machine or on a device leased from a
// tuning server, and log every measurement.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "rpc_runner/local_runner.h"
#include "rpc_runner/remote_runner.h"
#include "schedule_space/task.h"
#include "tools/commands.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/model_based_tuner.h"
#include "tuner/model_log.h"
#include "tuner/progress.h"
#include "tuner/transfer.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"

namespace ktune::tools {
namespace {

struct TuneCommandOptions {
  std::string template_name;
  std::vector<std::string> args;
  std::string target = "host";
  size_t trials = 64;
  std::string tuner = "xgb";
  std::string db = "ktune.db";
  uint64_t seed = 0;
  size_t threads = 0;
  size_t batch_size = 16;
  size_t early_stopping = 0;
  int number = 4;
  int repeat = 3;
  double min_repeat_ms = 0;
  double timeout_s = 10;
  bool no_check = false;
  bool json = false;
  std::string xgb_features = "knob";
  bool no_transfer = false;
  size_t transfer_history = 20000;
  std::string server;          // "" = measure on this machine
  std::string device_key;      // with --server: the device to lease
  double lease_timeout_s = 10;
  size_t devices = 1;          // with --server: devices of the key measured at once
};

// Fills the options every runner shares.
void set_runner_options(const TuneCommandOptions& o, rpc_runner::ChannelRunnerOptions& r) {
  r.build_threads = o.threads;
  r.data_seed = o.seed;
  r.measure.number = o.number;
  r.measure.repeat = o.repeat;
  r.measure.min_repeat_ms = o.min_repeat_ms;
  r.measure.build_timeout_s = o.timeout_s;
  r.measure.run_timeout_s = o.timeout_s;
  r.measure.check_correctness = !o.no_check;
}

tuner::FeatureKind parse_features(const std::string& name) {
  if (name == "knob") return tuner::FeatureKind::kKnob;
  if (name == "loop") return tuner::FeatureKind::kLoop;
  throw Error(ErrorKind::kInvalidArgument, "unknown --xgb-features '" + name + "' (known: knob, loop)");
}

std::unique_ptr<tuner::Tuner> make_tuner(const TuneCommandOptions& o, const schedule_space::Task& task) {
  const std::string& name = o.tuner;
  const uint64_t seed = o.seed;
  if (name == "xgb") {
    tuner::XGBTunerParams p;
    p.search.seed = seed;
    p.features = parse_features(o.xgb_features);
    return std::make_unique<tuner::XGBTuner>(task, p);
  }
  if (name == "random") return std::make_unique<tuner::RandomTuner>(task.space(), seed);
  if (name == "grid") return std::make_unique<tuner::GridSearchTuner>(task.space());
  if (name == "ga") {
    tuner::GAOptions ga;
    ga.seed = seed;
    return std::make_unique<tuner::GATuner>(task.space(), task.flop(), ga);
  }
  throw Error(ErrorKind::kInvalidArgument, "unknown tuner '" + name + "' (known: random, grid, ga, xgb)");
}

std::string describe(const tuner::MeasureResult& r, double flop) {
  std::ostringstream s;
  if (!r.ok()) {
    s << "failed (" << to_string(r.error.value_or(ErrorKind::kUnknown)) << ": " << r.error_message << ")";
    return s.str();
  }
  s << std::fixed << std::setprecision(2) << flop / r.mean_cost() / 1e9 << " GFLOP/s ("
    << std::setprecision(4) << r.mean_cost() * 1e3 << " ms)";
  return s.str();
}

// Trains a model on the log's other workloads of the template and makes its pick the tuner's
// first plan; does nothing (beyond a log line) when the history is too thin.
void seed_from_history(tuning_db::Database& db, const schedule_space::Task& task,
                       const tuning_db::TargetKey& target, const TuneCommandOptions& o,
                       tuner::XGBTuner& xgb, const std::vector<tuner::PastMeasurement>& resume) {
  tuner::TransferParams params;
  params.seed = o.seed;
  auto model = tuner::TransferModel::train(
      task, db.history(task.template_name(), target, static_cast<int64_t>(o.transfer_history)), params);
  if (!model) return;
  std::unordered_set<uint64_t> exclude;
  for (const auto& past : resume) exclude.insert(past.config.index());
  xgb.search().seed_plan(model->plan(task, xgb.search().params().plan_size, exclude));
  spdlog::info("xgb: first plan chosen by a model of {} records of {} other workloads", model->rows(),
               model->workloads());
}

void run_tune(const TuneCommandOptions& o) {
  // Everything that can be wrong with the request (including an unreachable server or no free
  // device) is checked before the log is touched.
  std::unique_ptr<tuner::Measurer> measurer;
  std::optional<codegen::Target> device_target;
  int device_cores = 0;
  if (!o.server.empty()) {
    if (o.device_key.empty()) throw Error(ErrorKind::kInvalidArgument, "--server needs --device-key");
    rpc_runner::RemoteRunnerOptions remote;
    set_runner_options(o, remote);
    remote.session.server = o.server;
    remote.session.device_key = o.device_key;
    remote.session.lease_timeout_s = o.lease_timeout_s;
    remote.devices = o.devices;
    auto runner = std::make_unique<rpc_runner::RemoteRunner>(remote);
    device_target = codegen::Target::parse(runner->device().target);
    device_cores = runner->device().cores;
    measurer = std::move(runner);
  } else if (!o.device_key.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "--device-key needs --server");
  } else if (o.devices != 1) {
    throw Error(ErrorKind::kInvalidArgument, "--devices needs --server");
  }
  // On a device, "host" means the device's own target; code is built here for it.
  const codegen::Target target =
      device_target && o.target == "host" ? *device_target : codegen::Target::parse(o.target);
  if (device_target && target.str() != device_target->str())
    throw Error(ErrorKind::kUnsupported, "target '" + target.str() + "' differs from the device's target '" +
                                             device_target->str() + "'");
  if (!device_target && !target.is_host_compatible())
    throw Error(ErrorKind::kUnsupported,
                "target '" + target.str() + "' cannot run on this host; measure it on a device with --server");
  const auto traits = schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(),
                                                         device_cores > 0 ? device_cores : target.cores());
  const auto task = schedule_space::Task::create(
      o.template_name, schedule_space::parse_workload_args(o.template_name, o.args), traits);
  std::unique_ptr<tuner::Tuner> search = make_tuner(o, task);
  auto* xgb = dynamic_cast<tuner::XGBTuner*>(search.get());
  if (o.trials == 0) throw Error(ErrorKind::kInvalidArgument, "--trials must be at least 1");

  if (!measurer) {
    rpc_runner::LocalRunnerOptions local;
    set_runner_options(o, local);
    measurer = std::make_unique<rpc_runner::LocalRunner>(local);
  }
  tuner::Measurer& runner = *measurer;

  auto db = tuning_db::Database::open(o.db);
  tuner::RecordContext context;
  context.target = {target.str(), codegen::llvm_version()};
  context.tuner = search->name();
  context.ktune_version = KTUNE_VERSION;

  tuner::TuneOptions options;
  options.n_trial = o.trials;
  options.batch_size = o.batch_size;
  options.early_stopping = o.early_stopping;
  options.resume = tuner::load_past_measurements(db, task, context.target);
  if (!options.resume.empty())
    spdlog::info("resuming: {} configs of {} are already in {}", options.resume.size(),
                 task.workload_key(), o.db);
  std::unique_ptr<tuner::ModelRunLog> model_log;
  if (xgb != nullptr) {
    // Transfer: other shapes of this template measured on this target seed the first plan.
    if (!o.no_transfer) seed_from_history(db, task, context.target, o, *xgb, options.resume);
    nlohmann::json run_options{{"trials", o.trials}, {"batch_size", o.batch_size}, {"seed", o.seed},
                               {"features", o.xgb_features}, {"transfer", !o.no_transfer}};
    model_log = std::make_unique<tuner::ModelRunLog>(db, task, context.target, *xgb, run_options);
    context.run_id = model_log->run_id();
  }
  options.callbacks.push_back(tuner::database_callback(db, task, context));
  if (model_log) options.callbacks.push_back(model_log->callback());
  if (!o.json) {
    tuner::ProgressOptions progress;
    progress.done_before = 0;
    if (xgb != nullptr)
      progress.rank_correlation = [xgb] { return xgb->search().latest_rank_correlation(); };
    options.callbacks.push_back(tuner::progress_callback(task, o.trials, progress));
  }

  // The fallback config, measured in this run so that the speed-up compares like with like.
  tuner::MeasureResult fallback = runner.measure({{&task, task.fallback_config()}}).front();
  tuner::TuneResult result = tuner::tune(task, *search, runner, options);
  const bool model_saved = model_log && model_log->finish();
  if (!o.json && isatty(STDERR_FILENO) && result.n_measured < o.trials) std::fputc('\n', stderr);

  nlohmann::json errors = nlohmann::json::object();
  for (const auto& [kind, n] : result.errors) errors[std::string(to_string(kind))] = n;
  const bool have_best = result.best_config.has_value();
  const double speedup = have_best && fallback.ok() ? fallback.mean_cost() / result.best_result.mean_cost() : 0;
  if (o.json) {
    nlohmann::json j{{"workload", task.workload_key()},
                     {"target", target.str()},
                     {"tuner", search->name()},
                     {"measured", result.n_measured},
                     {"ok", result.n_ok},
                     {"errors", errors},
                     {"resumed", result.n_resumed},
                     {"stopped_early", result.stopped_early},
                     {"space_exhausted", result.space_exhausted},
                     {"wall_s", result.wall_s}};
    if (xgb != nullptr) {
      std::optional<double> rho = xgb->search().latest_rank_correlation();
      j["model"] = {{"saved", model_saved},
                    {"refits", xgb->search().refits().size()},
                    {"rank_correlation", rho ? nlohmann::json(*rho) : nlohmann::json(nullptr)}};
    }
    if (have_best) {
      j["best"] = {{"config", result.best_config->to_json()},
                   {"mean_cost_s", result.best_result.mean_cost()},
                   {"gflops", result.best_gflops},
                   {"from_this_run", result.best_is_new}};
    }
    j["fallback"] = {{"config", task.fallback_config().to_json()},
                     {"ok", fallback.ok()},
                     {"mean_cost_s", fallback.ok() ? fallback.mean_cost() : 0.0},
                     {"gflops", fallback.ok() ? task.flop() / fallback.mean_cost() / 1e9 : 0.0}};
    if (speedup > 0) j["speedup_over_fallback"] = speedup;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "workload: " << task.workload_key() << "\n"
              << "target:   " << target.str() << "\n"
              << "measured: " << result.n_measured << " configs (" << result.n_ok << " ok";
    for (const auto& [kind, n] : result.errors) std::cout << ", " << n << " " << to_string(kind);
    std::cout << ") in " << std::fixed << std::setprecision(1) << result.wall_s << " s";
    if (result.n_resumed) std::cout << "; " << result.n_resumed << " resumed from the log";
    if (result.stopped_early) std::cout << "; stopped early";
    if (result.space_exhausted) std::cout << "; space exhausted";
    std::cout << "\n";
    if (have_best) {
      std::cout << "best:     " << describe(result.best_result, task.flop())
                << (result.best_is_new ? "" : " [from the log]") << "\n"
                << "config:   " << result.best_config->to_json_string() << "\n";
    } else {
      std::cout << "best:     none (no config succeeded)\n";
    }
    std::cout << "fallback: " << describe(fallback, task.flop()) << "\n";
    if (speedup > 0)
      std::cout << "speed-up over fallback: " << std::setprecision(2) << speedup << "x\n";
    if (xgb != nullptr) {
      std::optional<double> rho = xgb->search().latest_rank_correlation();
      std::cout << "model:    " << (model_saved ? "saved" : "not fitted") << ", "
                << xgb->search().refits().size() << " plans";
      if (rho) std::cout << ", last rank correlation " << std::setprecision(2) << *rho;
      std::cout << "\n";
    }
    std::cout << "log:      " << o.db << "\n";
  }
  if (!have_best)
    throw Error(ErrorKind::kRun, "no config succeeded (" + errors.dump() + "); every result is in " + o.db);
}

void add_tune(CLI::App& app) {
  auto o = std::make_shared<TuneCommandOptions>();
  auto* cmd = app.add_subcommand("tune", "Tune a workload on this machine or a leased device; log every measurement");
  cmd->add_option("template", o->template_name, "Template name (see `ktune templates`)")->required();
  cmd->add_option("args", o->args, "Workload arguments key=value (omitted ones take their defaults)");
  cmd->add_option("--target", o->target, "Target: host or 'llvm -mtriple=... -mcpu=...' (must run here, or be the device's)")
      ->capture_default_str();
  cmd->add_option("--trials", o->trials, "New configs to measure")->capture_default_str();
  cmd->add_option("--tuner", o->tuner, "Search: random, grid, ga or xgb")->capture_default_str();
  cmd->add_option("--xgb-features", o->xgb_features, "xgb model features: knob or loop")->capture_default_str();
  cmd->add_flag("--no-transfer", o->no_transfer,
                "xgb: do not seed the first plan from other workloads of the template in the log");
  cmd->add_option("--transfer-history", o->transfer_history,
                  "xgb: newest records of the template read for transfer (0 = all)")->capture_default_str();
  cmd->add_option("--db", o->db, "Tuning log (SQLite); configs already in it are not measured again")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the search and of the generated inputs")->capture_default_str();
  cmd->add_option("--threads", o->threads, "Build threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Configs per batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--early-stopping", o->early_stopping, "Stop after N trials without improvement (0 = never)")
      ->capture_default_str();
  cmd->add_option("--number", o->number, "Runs per timing")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--repeat", o->repeat, "Timings per config")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--min-repeat-ms", o->min_repeat_ms, "Grow --number until a timing lasts this long")
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Build and run timeout per config, seconds")->capture_default_str();
  cmd->add_flag("--no-check", o->no_check, "Do not compare outputs with the reference");
  cmd->add_flag("--json", o->json, "Print the summary as JSON (no progress bar)");
  cmd->add_option("--server", o->server, "Measure on a device leased from this tuning server (HOST:PORT)");
  cmd->add_option("--device-key", o->device_key, "With --server: the key of the device to lease");
  cmd->add_option("--lease-timeout", o->lease_timeout_s, "With --server: wait this long for a free device, s")
      ->capture_default_str();
  cmd->add_option("--devices", o->devices, "With --server: lease this many devices of the key and measure on all at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([o] { run_tune(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(tune, add_tune);

}  // namespace ktune::tools
