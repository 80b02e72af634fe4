// `ktune tune <template> key=value...`: tune a workload on this machine (a TuningSession over the
// local runner), or submit it as a job to a tuning server and follow it.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/target.h"
#include "rpc_runner/client/service_client.h"
#include "rpc_runner/runner/local_runner.h"
#include "schedule_space/task.h"
#include "schedule_space/template_registry.h"
#include "tools/commands.h"
#include "tools/job_watch.h"
#include "tools/option_checks.h"
#include "tools/progress_display.h"
#include "tools/service_flags.h"
#include "tools/tune_summary.h"
#include "tuner/measure_options.h"
#include "tuner/tuning_session.h"
#include "tuning_db/database.h"

namespace ktune::tools {
namespace {

struct TuneCommandOptions {
  std::string template_name;
  std::vector<std::string> args;
  std::string target = "host";
  std::string db = "ktune.db";
  tuner::SessionOptions session;
  size_t threads = 0;
  tuner::MeasureOptions measure;
  double timeout_s = 10;
  bool no_check = false;
  bool no_transfer = false;
  bool json = false;
  // A job on a tuning server.
  rpc_runner::ServiceClientOptions server;
  std::string device_key;
  int priority = 1;
  bool priority_given = false;  // --priority on the command line (it needs --server)
  bool detach = false;
};

void run_on_server(const TuneCommandOptions& o) {
  if (o.device_key.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "--server needs --device-key (the devices to tune on)");
  rpc_runner::JobSpec job;
  job.template_name = o.template_name;
  job.args = schedule_space::parse_workload_args(o.template_name, o.args);
  job.target = o.target;
  job.session = o.session;
  job.session.device_key = o.device_key;
  job.measure = o.measure;
  job.measure.data_seed = o.session.seed;
  job.priority = o.priority;
  rpc_runner::ServiceClient client(o.server);
  if (const auto id = submit_job(client, job, o.detach)) watch_job(client, *id, o.json);
}

void run_tune(TuneCommandOptions o) {
  o.measure.build_timeout_s = o.measure.run_timeout_s = o.timeout_s;
  o.measure.check_correctness = !o.no_check;
  o.session.transfer = !o.no_transfer;
  if (!o.server.server.empty()) return run_on_server(o);
  if (!o.device_key.empty() || o.detach || o.priority_given)
    throw Error(ErrorKind::kInvalidArgument, "--device-key, --priority and --detach need --server");
  tuner::validate(o.session);

  // Everything that can be wrong with the request is checked before the log is touched.
  const codegen::Target target = codegen::Target::parse(o.target);
  if (!target.is_host_compatible())
    throw Error(
        ErrorKind::kUnsupported,
        "target '" + target.str() + "' cannot run on this host; tune it on a device with --server");
  const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                         target.vector_bits(), target.cores());
  const auto task = schedule_space::Task::create(
      o.template_name, schedule_space::parse_workload_args(o.template_name, o.args), traits);
  rpc_runner::LocalRunnerOptions local;
  local.build_threads = o.threads;
  local.measure = o.measure;
  local.measure.data_seed = o.session.seed;
  rpc_runner::LocalRunner runner(local);

  auto db = tuning_db::Database::open(o.db);
  tuner::TuningSession session(task, db, runner, {target.str(), codegen::llvm_version()},
                               o.session);
  std::optional<ProgressDisplay> display;
  if (!o.json) display.emplace(stderr);
  const tuner::SessionReport report = session.run([&](const tuner::ProgressSnapshot& p) {
    if (display) display->show(p);
  });
  if (display) display->finish();
  const nlohmann::json summary =
      tuner::summary_json(task, {target.str(), codegen::llvm_version()}, report);
  if (o.json) {
    std::cout << summary.dump(2) << "\n";
  } else {
    print_tune_summary(summary, std::cout);
    std::cout << "log:      " << db.path() << "\n";
  }
  if (!report.result.best_config)
    throw Error(ErrorKind::kRun, "no config succeeded (" + summary["errors"].dump() +
                                     "); every result is in " + db.path());
}

void add_tune(CLI::App& app) {
  auto o = std::make_shared<TuneCommandOptions>();
  tuner::SessionOptions& s = o->session;
  auto* cmd =
      app.add_subcommand("tune", "Tune a workload here, or as a job on a tuning server's devices");
  cmd->add_option("template", o->template_name, "Template name (see `ktune templates`)")
      ->required();
  cmd->add_option("args", o->args,
                  "Workload arguments key=value (omitted ones take their defaults)");
  cmd->add_option("--target", o->target,
                  "Target: host (with --server: the devices' own) or 'llvm -mtriple=... -mcpu=...'")
      ->capture_default_str();
  cmd->add_option("--trials", s.trials, "New configs to measure (1 to 10^7)")
      ->capture_default_str()
      ->check(finite_in(1, 1e7));
  cmd->add_option("--tuner", s.tuner, "Search: random, grid, ga or xgb")->capture_default_str();
  cmd->add_option("--xgb-features", s.xgb_features, "xgb model features: knob or loop")
      ->capture_default_str();
  cmd->add_flag("--no-transfer", o->no_transfer,
                "xgb: do not seed the first plan from other workloads of the template in the log");
  cmd->add_option("--transfer-history", s.transfer_history,
                  "xgb: newest records of the template read for transfer (0 = all)")
      ->capture_default_str()
      ->check(finite_in(0, 1e9));
  cmd->add_option("--db", o->db,
                  "Tuning log (SQLite file or postgresql:// URL); configs already in it are not "
                  "measured again")
      ->capture_default_str();
  cmd->add_option("--seed", s.seed, "Seed of the search and of the generated inputs")
      ->capture_default_str()
      ->check(finite_in(0, 18446744073709551615.0));
  cmd->add_option("--threads", o->threads, "Build threads (0 = all cores; at most 256)")
      ->capture_default_str()
      ->check(finite_in(0, 256));
  cmd->add_option("--batch-size", s.batch_size, "Configs per batch (1 to 4096)")
      ->capture_default_str()
      ->check(finite_in(1, 4096));
  cmd->add_option("--early-stopping", s.early_stopping,
                  "Stop after N trials without improvement (0 = never)")
      ->capture_default_str()
      ->check(finite_in(0, 1e7));
  // The bounds are MeasureOptions' (tuner::validate), which a server holds a job to as well.
  cmd->add_option("--number", o->measure.number, "Runs per timing (1 to 10^6)")
      ->capture_default_str()
      ->check(finite_in(1, tuner::kMaxNumber));
  cmd->add_option("--repeat", o->measure.repeat, "Timings per config (1 to 1000)")
      ->capture_default_str()
      ->check(finite_in(1, tuner::kMaxRepeat));
  cmd->add_option("--min-repeat-ms", o->measure.min_repeat_ms,
                  "Grow --number until a timing lasts this long (0 to 60000)")
      ->capture_default_str()
      ->check(finite_in(0, tuner::kMaxMinRepeatMs));
  cmd->add_option("--timeout", o->timeout_s,
                  "Build and run timeout per config, seconds (0.001 to 86400)")
      ->capture_default_str()
      ->check(finite_in(tuner::kMinTimeoutS, tuner::kMaxTimeoutS));
  cmd->add_flag("--no-check", o->no_check, "Do not compare outputs with the reference");
  cmd->add_flag("--json", o->json, "Print the summary as JSON (no progress bar)");
  add_client_flags(cmd, o->server, false)
      ->description("Submit the run as a job to this tuning server (HOST:PORT) and follow it");
  cmd->add_option("--device-key", o->device_key,
                  "With --server: the key of the devices to tune on");
  CLI::Option* priority =
      cmd->add_option("--priority", o->priority,
                      "With --server: share of the key's devices against other jobs")
          ->capture_default_str()
          ->check(finite_in(1, 100));
  cmd->add_flag("--detach", o->detach,
                "With --server: print the job id and return; `ktune jobs watch ID` follows it");
  cmd->callback([o, priority] {
    o->priority_given = priority->count() > 0;
    run_tune(*o);
  });
}

}  // namespace

KTUNE_REGISTER_COMMAND(tune, add_tune);

}  // namespace ktune::tools
