// `ktune tune-model model.onnx [--trials N] [--db PATH] [--input name=DIMS]`: tune every task of a model under one budget (ModelTuning), with a live table and the estimated model latency against the untuned fallbacks and the libraries.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"
#include "rpc_runner/local_runner.h"
#include "tools/commands.h"
#include "tools/library_baseline.h"
#include "tools/option_checks.h"
#include "tuner/model_tuning.h"
#include "tuning_db/database.h"
#include "tuning_db/report.h"

namespace ktune::tools {
namespace {

struct TuneModelOptions {
  std::string model;
  std::vector<std::string> inputs;
  std::string target = "host";
  std::string db = "ktune.db";
  tuner::ModelTuningOptions tuning;
  size_t threads = 0;
  double timeout_s = 10;
  bool no_check = false;
  bool no_transfer = false;
  bool json = false;
  bool no_libraries = false;
};

std::string ms(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", seconds * 1e3);
  return buf;
}

// Library time per tuned workload key.
using LibraryTimes = std::map<std::string, LibraryTime>;

// The per-task table: trials, best and fallback latency, share of the model's estimated time (and
// the libraries' time once measured). Returns the number of lines printed (for a redraw).
int print_table(std::FILE* out, const tuner::ModelTuningReport& r, size_t budget, const LibraryTimes* libraries = nullptr) {
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

void run_tune_model(TuneModelOptions o) {
  // Everything that can be wrong with the request is checked before the log is touched.
  std::vector<frontend::InputShape> inputs;
  for (const auto& text : o.inputs) inputs.push_back(frontend::parse_input_shape(text));
  const codegen::Target target = codegen::Target::parse(o.target);
  if (!target.is_host_compatible())
    throw Error(ErrorKind::kUnsupported, "target '" + target.str() + "' cannot run on this host");
  const auto traits =
      schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(), target.cores());
  const frontend::ModelTasks tasks = frontend::extract_tasks(frontend::load_onnx(o.model, inputs), traits);
  o.tuning.session.seed = o.tuning.scheduler.seed;
  o.tuning.session.transfer = !o.no_transfer;
  tuner::validate(o.tuning.scheduler);

  rpc_runner::LocalRunnerOptions local;
  local.build_threads = o.threads;
  local.data_seed = o.tuning.scheduler.seed;
  local.measure.build_timeout_s = local.measure.run_timeout_s = o.timeout_s;
  local.measure.check_correctness = !o.no_check;
  rpc_runner::LocalRunner runner(local);
  auto db = tuning_db::Database::open(o.db);
  tuner::ModelTuning tuning(tasks, db, runner, {target.str(), codegen::llvm_version()}, o.tuning);

  const bool terminal = !o.json && ::isatty(::fileno(stderr));
  // Each allocation is a short session that logs its resume at info level: on a redrawn table
  // that is noise (and breaks the redraw). --verbose keeps everything.
  if (terminal && spdlog::get_level() == spdlog::level::info) spdlog::set_level(spdlog::level::warn);
  int drawn = 0;
  const size_t budget = o.tuning.scheduler.trials;
  const tuner::ModelTuningReport report = tuning.run([&](const tuner::ModelTuningReport& r) {
    if (o.json) return;
    if (terminal) {
      if (drawn > 0) std::fprintf(stderr, "\033[%dA\033[J", drawn);
      drawn = print_table(stderr, r, budget);
    } else {
      const auto& step = r.steps.back();
      std::fprintf(stderr, "trials %zu/%zu best_ms %s model_ms %s tuned %s\n", step.total, budget,
                   ms(r.workload_best_s[step.task]).c_str(), ms(r.tuned_s).c_str(), r.workloads[step.task].c_str());
    }
  });

  // The libraries on the same operators, in this process, with the kernels' thread count.
  LibraryTimes libraries;
  double library_s = 0, tuned_same_s = 0;
  if (!o.no_libraries) {
    for (const auto& t : report.tasks) {
      if (!libraries.count(t.tuned_as))
        for (const auto& mt : tasks.tasks)
          if (mt.tunable && mt.tunable->workload_key() == t.tuned_as) {
            if (auto lib = library_latency(*mt.tunable, traits.cores)) libraries[t.tuned_as] = *lib;
            break;
          }
      if (auto lib = libraries.find(t.tuned_as); lib != libraries.end() && std::isfinite(t.best_s)) {
        library_s += static_cast<double>(t.count) * lib->second.seconds;
        tuned_same_s += static_cast<double>(t.count) * t.best_s;
      }
    }
  }

  nlohmann::json j = tuner::to_json(report);
  if (!o.no_libraries) {
    for (size_t i = 0; i < report.tasks.size(); ++i)
      if (auto lib = libraries.find(report.tasks[i].tuned_as); lib != libraries.end()) {
        j["tasks"][i]["library"] = lib->second.library;
        j["tasks"][i]["library_s"] = lib->second.seconds;
      }
    j["library_s"] = library_s;
    j["tuned_s_where_library"] = tuned_same_s;
  }
  j["model"] = tasks.model;
  j["log"] = o.db;
  j["untuned"] = nlohmann::json::array();
  for (const auto& t : tasks.tasks)
    if (!t.tunable) j["untuned"].push_back({{"task", t.key()}, {"count", t.count}, {"reason", t.refused}});
  for (const auto& u : tasks.unsupported)
    j["untuned"].push_back({{"task", u.op}, {"count", u.count}, {"reason", u.reason}});
  // The summary (per-layer table with the library ratios) goes into the log for `ktune report`.
  tuning_db::record_model_run(db, tasks.model, target.str(), j);
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (terminal && drawn > 0) std::fprintf(stderr, "\033[%dA\033[J", drawn);
  std::fflush(stderr);
  print_table(stdout, report, budget, o.no_libraries ? nullptr : &libraries);
  std::printf("\nmodel %s: estimated latency %s ms (sum of count x best over %zu tasks)\n", tasks.model.c_str(),
              ms(report.tuned_s).c_str(), report.tasks.size());
  if (report.fallback_s > 0 && std::isfinite(report.tuned_s))
    std::printf("untuned fallbacks:  %s ms  -> %.2fx faster\n", ms(report.fallback_s).c_str(),
                report.fallback_s / report.tuned_s);
  if (library_s > 0)
    std::printf("libraries:          %s ms for the same operators (tuned: %s ms) -> tuned/library %.2f\n",
                ms(library_s).c_str(), ms(tuned_same_s).c_str(), tuned_same_s / library_s);
  for (const auto& u : j["untuned"])
    std::printf("not in the estimate: %s x%lld (%s)\n", u["task"].get<std::string>().c_str(),
                static_cast<long long>(u["count"].get<int64_t>()), u["reason"].get<std::string>().c_str());
  std::printf("log: %s\n", o.db.c_str());
}

void add_tune_model(CLI::App& app) {
  auto o = std::make_shared<TuneModelOptions>();
  tuner::TaskSchedulerOptions& s = o->tuning.scheduler;
  s.trials = 1000;
  o->tuning.session.tuner = "xgb";
  auto* cmd = app.add_subcommand("tune-model", "Tune every task of an ONNX model under one trial budget");
  cmd->add_option("model", o->model, "ONNX model file")->required();
  cmd->add_option("--input", o->inputs, "Shape of a graph input, name=1x3x224x224 (fills symbolic dimensions, overrides fixed ones)");
  cmd->add_option("--target", o->target, "Target: host")->capture_default_str();
  cmd->add_option("--db", o->db, "Tuning log (SQLite); what it holds is resumed, not measured again")
      ->capture_default_str();
  cmd->add_option("--trials", s.trials, "New configs to measure, all tasks together (1 to 10^7)")
      ->capture_default_str()
      ->check(finite_in(1, 1e7));
  cmd->add_option("--batch-size", s.batch_size, "Trials per allocation to one task (1 to 4096)")
      ->capture_default_str()
      ->check(finite_in(1, 4096));
  cmd->add_option("--strategy", s.strategy, "Task scheduler: gradient (Ansor) or round_robin (equal split)")
      ->capture_default_str();
  cmd->add_option("--tuner", o->tuning.session.tuner, "Search per task: random, grid, ga or xgb")->capture_default_str();
  cmd->add_flag("--no-transfer", o->no_transfer, "xgb: do not seed a task's first plan from the log's other workloads");
  cmd->add_option("--seed", s.seed, "Seed of the searches and of the generated inputs")->capture_default_str();
  cmd->add_option("--threads", o->threads, "Build threads (0 = all cores; at most 256)")
      ->capture_default_str()
      ->check(finite_in(0, 256));
  cmd->add_option("--timeout", o->timeout_s, "Build and run timeout per config, seconds (0.001 to 86400)")
      ->capture_default_str()
      ->check(finite_in(0.001, 86400));
  cmd->add_option("--device-key", o->tuning.session.device_key, "Stored in every record");
  cmd->add_flag("--no-check", o->no_check, "Do not compare outputs with the reference");
  cmd->add_flag("--no-libraries", o->no_libraries, "Do not time oneDNN / OpenBLAS on the same operators");
  cmd->add_flag("--json", o->json, "Print the result as JSON (no live table)");
  cmd->callback([o] { run_tune_model(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(tune_model, add_tune_model);

}  // namespace ktune::tools
