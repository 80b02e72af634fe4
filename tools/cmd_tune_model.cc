// `ktune tune-model model.onnx [--trials N] [--time-budget MIN] [--db PATH | --server HOST:PORT
// --device-key K] [--input name=DIMS]`: tune every task of a model under one budget (ModelTuning
// here, or a model job of a tuning server), with a live table by layer and the estimated model
// latency against the untuned fallbacks and the libraries.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "codegen/runtime.h"
#include "codegen/target.h"
#include "deploy/model_build.h"
#include "deploy/model_plan.h"
#include "deploy/model_timing.h"
#include "frontend/graph_passes.h"
#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"
#include "rpc_runner/client/service_client.h"
#include "rpc_runner/runner/local_runner.h"
#include "support/seconds_since.h"
#include "tools/commands.h"
#include "tools/job_watch.h"
#include "tools/model_table.h"
#include "tools/option_checks.h"
#include "tools/service_flags.h"
#include "tuner/measure_options.h"
#include "tuner/model_tuning.h"
#include "tuning_db/database.h"
#include "tuning_db/report.h"
#include "tuning_db/step_threads_store.h"

namespace ktune::tools {
namespace {

struct TuneModelOptions {
  std::string model;
  std::vector<std::string> inputs;
  std::string target = "host";
  std::string db = "ktune.db";
  tuner::ModelTuningOptions tuning;
  std::string trials = "auto";  // --trials: auto (tuner::auto_trials) or a count
  size_t threads = 0;
  int model_threads = 0;  // the built model's run; 0 = the CPUs of this process
  double timeout_s = 10;
  bool no_check = false;
  bool flush_cache = false;
  bool no_transfer = false;
  bool json = false;
  bool no_libraries = false;
  int library_rounds = 5;
  bool no_model_run = false;
  // A model job on a tuning server.
  rpc_runner::ServiceClientOptions server;
  int priority = 1;
  bool detach = false;
  bool db_given = false;
  bool model_threads_given = false;
  double time_budget_min = 0;
};

// Where a server-tuned model's steps get their thread counts.
constexpr const char* kServerStepThreads =
    "`ktune build --model MODEL --server ... --device-key KEY --threads N --measure-steps` "
    "measures them on a machine of the devices' target and ships them";

// Prints the run's end: the summary as JSON, or the final table and its closing lines.
void print_end(const TuneModelOptions& o, const tuner::ModelTuningReport& report,
               const nlohmann::json& j, const LibraryTimes* libraries,
               const std::string& libraries_note) {
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return;
  }
  print_model_summary(stdout, report, j, o.tuning.scheduler.trials, libraries, libraries_note);
}

// --trials: "auto" (tuner::auto_trials for these tasks) or a count from 1 to 10^7.
size_t trial_budget(const std::string& text, const frontend::ModelTasks& tasks, size_t batch) {
  if (text == "auto") return tuner::auto_trials(tasks, batch);
  size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || text[0] == '-' || n < 1 || n > 10'000'000)
    throw Error(ErrorKind::kInvalidArgument,
                "--trials takes auto or a count from 1 to 10000000, not '" + text + "'");
  return static_cast<size_t>(n);
}

// Says what the budget is, and when it cannot give every tuned workload its warm-up allocation
// (said once the run has started, so that a request that fails stays one line).
void say_budget(const TuneModelOptions& o, const frontend::ModelTasks& tasks) {
  const size_t batch = o.tuning.scheduler.batch_size, trials = o.tuning.scheduler.trials;
  const size_t warm_up = tuner::warmup_trials(tasks, batch);
  if (o.trials == "auto" && !o.json)
    std::printf("trials: auto, %zu (%zu allocations of %zu per tuned workload, %zu workloads)\n",
                trials, tuner::kAutoAllocations, batch, warm_up / batch);
  std::fflush(stdout);  // before the progress on stderr
  // The first ceil(trials / batch) workloads get an allocation (the last maybe a partial one).
  if (trials < warm_up)
    spdlog::warn(
        "--trials {} cannot warm up every tuned workload: {} x --batch-size {} = {} trials; {} "
        "get no trial in this run and keep what the log holds, else their fallback config "
        "(--trials auto gives {})",
        trials, warm_up / batch, batch, warm_up, warm_up / batch - (trials + batch - 1) / batch,
        tuner::auto_trials(tasks, batch));
}

// Why a run has no library times when it was asked for none.
constexpr const char* kNotAsked = "not timed (--no-libraries)";

// The model as a job of the server: the server rebuilds the tasks for its devices and tunes them
// with its own log; this process follows the job and times the libraries only when it is a
// machine of the devices' target. The job does not run the model (the server has its tasks, not
// its graph and weights): its steps' thread counts are measured where it is built, on a machine
// of the devices' target (`ktune build --model --threads N --measure-steps`).
void run_on_server(const TuneModelOptions& o, const frontend::ModelTasks& tasks) {
  if (o.tuning.session.device_key.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "--server needs --device-key (the devices to tune on)");
  if (o.db_given)
    throw Error(ErrorKind::kInvalidArgument,
                "--db and --server exclude each other (the server owns its log)");
  if (o.time_budget_min > 0)
    throw Error(ErrorKind::kInvalidArgument,
                "--time-budget applies to a local run: a server's job is bounded by --trials");
  if (o.model_threads_given)
    throw Error(ErrorKind::kInvalidArgument,
                "--model-threads applies to a local run: a server's model job does not run the "
                "model; measure its steps' threads on a machine of the devices' target with "
                "`ktune build --model ... --server ... --device-key ... --threads N "
                "--measure-steps`");
  rpc_runner::JobSpec job;
  job.model = frontend::to_json(tasks);
  job.target = o.target;
  // The session as a local run has it (seed and transfer set by run_tune_model); the job's
  // trials and batch size are the scheduler's budget and allocation.
  job.session = o.tuning.session;
  job.session.trials = o.tuning.scheduler.trials;
  job.session.batch_size = o.tuning.scheduler.batch_size;
  job.strategy = o.tuning.scheduler.strategy;
  job.measure.data_seed = o.tuning.scheduler.seed;
  job.measure.build_timeout_s = job.measure.run_timeout_s = o.timeout_s;
  job.measure.check_correctness = !o.no_check;
  job.measure.flush_cache = o.flush_cache;
  job.priority = o.priority;
  rpc_runner::ServiceClient client(o.server);
  const std::optional<uint64_t> id = submit_job(client, job, o.detach);
  if (!id) return;
  say_budget(o, tasks);
  ModelProgress progress(job.session.trials, o.json);
  // The server's tasks come without their graph: the layers are named from this process's.
  const rpc_runner::JobEvent last =
      follow_model_job(client, *id, o.json, [&](tuner::ModelTuningReport r) {
        tuner::label_layers(r, tasks);
        progress.show(r);
      });
  progress.finish();
  nlohmann::json j = nlohmann::json::parse(last.summary_json);
  j.erase("libraries_note");  // the server's; this process races the libraries or says why not
  tuner::ModelTuningReport report = tuner::model_report_from_json(j);
  tuner::label_layers(report, tasks);
  for (size_t i = 0; i < report.tasks.size(); ++i) j["tasks"][i]["layers"] = report.tasks[i].layers;
  j["job"] = *id;
  j["device_key"] = job.session.device_key;
  j["target"] = last.job.target;
  // The devices' timings compare with the libraries' only on a machine of their target.
  const codegen::Target here = codegen::Target::parse("host");
  std::optional<LibraryTimes> libraries;
  std::string note;
  if (o.no_libraries) {
    note = kNotAsked;
  } else if (last.job.target == here.str()) {
    // Raced here after the job: the wall time line counts them beside the job's own parts.
    const auto races = std::chrono::steady_clock::now();
    libraries =
        add_library_times(tasks, report, HistorySource::server(o.server, job.session.device_key),
                          here.cores(), o.library_rounds, j);
    j["wall"]["libraries_s"] = seconds_since(races);
  } else {
    note = "not measured (the devices are " + last.job.target + ")";
  }
  j["step_threads"] = {{"measured", false}, {"how", kServerStepThreads}};
  print_end(o, report, j, libraries ? &*libraries : nullptr, note);
  if (!o.json) {
    std::printf(
        "job: %llu (%s) on key %s; log: the server's\n", static_cast<unsigned long long>(*id),
        std::string(tuning_db::to_string(last.job.state)).c_str(), job.session.device_key.c_str());
    std::printf("step threads: not measured by the job; %s\n", kServerStepThreads);
  }
}

// The model as `build --model` ships it from this log, built and timed here end to end and
// kernel by kernel in the model's order. The estimate is the sum of those kernel times: each task
// kernel timed where the model runs it, its weights coming from memory and its input from the
// layer before, plus the layout and generated kernels the tasks do not cover. (Timed alone, as
// tuning times it, a kernel keeps its weights in cache: ResNet-18's 512-channel convolutions ran
// 1.3x their tuned time in the model.) The tuned kernels' own sum is kept beside it. A model that
// cannot be built says why.
//
// At a count above one the steps' thread counts are chosen first (measure_step_threads: each step
// timed in the model's order at that count and at one) and stored in the log, where `build
// --model` and `ktune run` find them; the timing is then of the model with that choice, the one
// a build ships. That choice is returned.
// Runs of the built model's timing: its estimate is a sum of per-step medians, and with ten
// the sum of a two-thread BERT layer moved by 8% between runs a minute apart.
constexpr int kModelRuns = 30;

std::optional<tuning_db::StepThreadsRow> add_built_model(
    const TuneModelOptions& o, const std::vector<frontend::InputShape>& inputs,
    const tuner::ModelTuningReport& report, tuning_db::Database& db, nlohmann::json& j) {
  std::optional<tuning_db::StepThreadsRow> chosen;
  j["estimated_s"] = report.tuned_s;
  try {
    deploy::ModelRequest r;
    r.model_path = o.model;
    r.inputs = inputs;
    r.name = "ktune_tuned_model";
    r.plan.target = o.target;
    r.plan.history = HistorySource::log(o.db);
    if (o.model_threads > 0) codegen::set_num_threads(o.model_threads);
    const int threads = codegen::num_threads();
    r.step_threads = threads;
    deploy::BuiltModel m = deploy::build_model(r);
    const deploy::ModelBuffers buffers(m.plan, o.tuning.scheduler.seed);
    // The steps' thread counts first, so that the estimate is of the model a build ships.
    if (threads > 1) {
      deploy::StepThreadsOptions how;
      how.threads = threads;
      const tuning_db::StepThreadsRow row = deploy::measure_step_threads(m, buffers, how);
      tuning_db::StepThreadsStore(db).save(row);
      m = deploy::with_step_threads(m, row);
      nlohmann::json one = nlohmann::json::array();
      for (const auto& s : row.steps)
        if (s.max_threads == 1)
          one.push_back({{"layer", s.layer}, {"all_s", s.all_s}, {"one_s", s.one_s}});
      j["step_threads"] = {{"threads", threads},
                           {"one_thread", one},
                           {"capped_s", row.capped_s},
                           {"uncapped_s", row.uncapped_s},
                           {"margin", how.margin}};
      chosen = row;
    }
    deploy::ModelRunner runner(m);
    const deploy::ModelTiming t = deploy::time_model(runner, m.plan, buffers, 2, kModelRuns);
    j["estimated_s"] = t.task_s() + t.other_s();
    j["built_model"] = {{"measured_s", t.median_s},
                        {"runs", t.runs},
                        {"min_s", t.min_s},
                        {"max_s", t.max_s},
                        {"q1_s", t.q1_s},
                        {"q3_s", t.q3_s},
                        {"noisy", t.noisy()},
                        {"kernels", m.plan.steps.size()},
                        {"task_kernels_s", t.task_s()},
                        {"other_kernels_s", t.other_s()},
                        {"tuned_kernels_s", report.tuned_s + t.other_s()},
                        {"threads", threads},
                        {"step_threads_measured_at", threads > 1 ? threads : m.step_threads_at}};
  } catch (const Error& e) {
    j["built_model"] = {{"error", e.what()}};
  }
  return chosen;
}

// The closing line on the steps' thread counts when they were measured.
void print_step_threads(const std::optional<tuning_db::StepThreadsRow>& step_threads) {
  if (step_threads)
    std::printf("step threads: measured %s; stored in the log for build --model and run\n",
                deploy::step_threads_summary(*step_threads).c_str());
}

void run_tune_model(TuneModelOptions o) {
  // Everything that can be wrong with the request is checked before the log is touched.
  std::vector<frontend::InputShape> inputs;
  for (const auto& text : o.inputs) inputs.push_back(frontend::parse_input_shape(text));
  const bool remote = !o.server.server.empty();
  if (!remote && (o.detach || o.priority != 1))
    throw Error(ErrorKind::kInvalidArgument, "--priority and --detach need --server");
  const codegen::Target target =
      codegen::Target::parse(o.target == "host" || remote ? "host" : o.target);
  if (!remote && !target.is_host_compatible())
    throw Error(
        ErrorKind::kUnsupported,
        "target '" + target.str() + "' cannot run on this host; tune it on a device with --server");
  const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                         target.vector_bits(), target.cores());
  const frontend::Model model = frontend::load_model(o.model, inputs);
  // Nothing is measured for a model that cannot be built: every refusal at once, before tuning.
  if (const auto blocked = deploy::plan_verdict(model.graph, model.constants, target.str());
      !blocked.empty())
    throw Error(ErrorKind::kUnsupported,
                o.model + " cannot be tuned as a model: " + deploy::blocked_text(blocked) +
                    " (ktune tasks lists them)");
  frontend::ModelTasks tasks = frontend::extract_tasks(model.graph, traits);
  // Only what a build runs from its template is tuned (a pool on blocked data runs generated).
  deploy::untune_generated_tasks(tasks, model.graph, model.constants, target.str());
  o.tuning.scheduler.trials = trial_budget(o.trials, tasks, o.tuning.scheduler.batch_size);
  o.tuning.session.seed = o.tuning.scheduler.seed;
  o.tuning.session.transfer = !o.no_transfer;
  o.tuning.scheduler.time_budget_s = o.time_budget_min * 60;
  tuner::validate(o.tuning.scheduler);
  if (remote) return run_on_server(o, tasks);

  rpc_runner::LocalRunnerOptions local;
  local.build_threads = o.threads;
  local.measure.data_seed = o.tuning.scheduler.seed;
  local.measure.build_timeout_s = local.measure.run_timeout_s = o.timeout_s;
  local.measure.check_correctness = !o.no_check;
  local.measure.flush_cache = o.flush_cache;
  rpc_runner::LocalRunner runner(local);
  auto db = tuning_db::Database::open(o.db);
  tuner::ModelTuning tuning(tasks, db, runner, {target.str(), codegen::llvm_version()}, o.tuning);

  say_budget(o, tasks);
  ModelProgress progress(o.tuning.scheduler.trials, o.json);
  const tuner::ModelTuningReport report =
      tuning.run([&](const tuner::ModelTuningReport& r) { progress.show(r); });
  progress.finish();

  // The libraries on the same operators, in this process, with the kernels' thread count.
  nlohmann::json j = tuner::model_summary_json(tasks, report);
  std::optional<LibraryTimes> libraries;
  if (o.no_libraries) j["libraries_note"] = kNotAsked;
  const auto races = std::chrono::steady_clock::now();
  if (!o.no_libraries)
    libraries = add_library_times(tasks, report, HistorySource::log(o.db), traits.cores,
                                  o.library_rounds, j);
  j["wall"]["libraries_s"] = seconds_since(races);
  j["log"] = o.db;
  std::optional<tuning_db::StepThreadsRow> step_threads;
  const auto model_run = std::chrono::steady_clock::now();
  if (!o.no_model_run) step_threads = add_built_model(o, inputs, report, db, j);
  j["wall"]["model_run_s"] = seconds_since(model_run);
  // The summary (per-layer table with the library ratios) goes into the log for `ktune report`.
  tuning_db::record_model_run(db, tasks.model, target.str(), j);
  print_end(o, report, j, libraries ? &*libraries : nullptr, "");
  if (!o.json) {
    print_step_threads(step_threads);
    std::printf("log: %s\n", o.db.c_str());
  }
}

void add_tune_model(CLI::App& app) {
  auto o = std::make_shared<TuneModelOptions>();
  tuner::TaskSchedulerOptions& s = o->tuning.scheduler;
  o->tuning.session.tuner = "xgb";
  auto* cmd =
      app.add_subcommand("tune-model", "Tune every task of an ONNX model under one trial budget");
  cmd->add_option("model", o->model, "ONNX model file")->required();
  cmd->add_option(
      "--input", o->inputs,
      "Shape of a graph input, name=1x3x224x224 (fills symbolic dimensions, overrides fixed ones)");
  cmd->add_option("--target", o->target, "Target: host")->capture_default_str();
  CLI::Option* db = cmd->add_option("--db", o->db,
                                    "Tuning log (SQLite file or postgresql:// URL); what it holds "
                                    "is resumed, not measured again")
                        ->capture_default_str();
  cmd->add_option("--trials", o->trials,
                  "New configs to measure, all tasks together: auto (4 allocations of "
                  "--batch-size per tuned workload, 64 each by default) or 1 to 10^7")
      ->capture_default_str();
  cmd->add_option("--time-budget", o->time_budget_min,
                  "Minutes of search at most (0 = none): no allocation starts after them, the "
                  "trials left over are not spent; the best configs' re-timing, the library races "
                  "and the built model's timing follow (a local run), and the summary's wall time "
                  "line gives each")
      ->capture_default_str()
      ->check(finite_in(0, 1e6));
  cmd->add_option("--batch-size", s.batch_size, "Trials per allocation to one task (1 to 4096)")
      ->capture_default_str()
      ->check(finite_in(1, 4096));
  cmd->add_option("--strategy", s.strategy,
                  "Task scheduler: gradient (Ansor) or round_robin (equal split)")
      ->capture_default_str();
  cmd->add_option("--tuner", o->tuning.session.tuner, "Search per task: random, grid, ga or xgb")
      ->capture_default_str();
  cmd->add_flag("--no-transfer", o->no_transfer,
                "xgb: do not seed a task's first plan from the log's other workloads");
  cmd->add_option("--seed", s.seed, "Seed of the searches and of the generated inputs")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Build threads (0 = all cores; at most 256)")
      ->capture_default_str()
      ->check(finite_in(0, 256));
  cmd->add_option("--timeout", o->timeout_s,
                  "Build and run timeout per config, seconds (0.001 to 86400)")
      ->capture_default_str()
      ->check(finite_in(tuner::kMinTimeoutS, tuner::kMaxTimeoutS));
  cmd->add_option("--device-key", o->tuning.session.device_key,
                  "Stored in every record; with --server: the key of the devices to tune on");
  cmd->add_flag("--no-check", o->no_check, "Do not compare outputs with the reference");
  cmd->add_flag("--flush-cache", o->flush_cache,
                "Evict the caches before each timed run (kernels then read their weights from "
                "memory, as in the model)");
  cmd->add_flag("--no-libraries", o->no_libraries,
                "Do not time oneDNN / OpenBLAS on the same operators");
  cmd->add_option("--library-rounds", o->library_rounds,
                  "Rounds in which each layer's tuned kernel and library take turns; the table "
                  "shows the medians (1 to 1000)")
      ->capture_default_str()
      ->check(finite_in(1, 1000));
  cmd->add_flag("--no-model-run", o->no_model_run,
                "Do not build the tuned model and time it end to end at the end");
  CLI::Option* model_threads =
      cmd->add_option(
             "--model-threads", o->model_threads,
             "Threads the built model is timed at (0 = the CPUs of this process); above one, "
             "each step's thread count is chosen there and stored in the log (for build "
             "--model and run)")
          ->capture_default_str()
          ->check(finite_in(0, 256));
  cmd->add_flag("--json", o->json, "Print the result as JSON (no live table)");
  add_client_flags(cmd, o->server, false)
      ->description(
          "Submit the model as a job to this tuning server (HOST:PORT; it tunes with its own log) "
          "and follow it");
  cmd->add_option("--priority", o->priority,
                  "With --server: share of the key's devices against other jobs")
      ->capture_default_str()
      ->check(finite_in(1, 100));
  cmd->add_flag("--detach", o->detach,
                "With --server: print the job id and return; `ktune jobs watch ID` follows it");
  cmd->callback([o, db, model_threads] {
    o->db_given = db->count() > 0;
    o->model_threads_given = model_threads->count() > 0;
    run_tune_model(*o);
  });
}

}  // namespace

KTUNE_REGISTER_COMMAND(tune_model, add_tune_model);

}  // namespace ktune::tools
