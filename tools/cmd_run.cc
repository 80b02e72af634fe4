// `ktune run model.onnx [--db PATH | --server HOST:PORT --device-key K] [--threads N] [--runs N]
// [--check | --check-nodes | --serve] [--step-threads stored|measure|off]`: the model built as
// `ktune build --model` builds it, loaded in this process and timed end to end and per layer,
// checked step by step against te's reference, or serving layer-by-layer timings to a benchmark.
#include <unistd.h>
#include <algorithm>
#include <cmath>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "codegen/runtime.h"
#include "deploy/model_build.h"
#include "deploy/model_check.h"
#include "deploy/model_timing.h"
#include "frontend/onnx_graph.h"
#include "support/error.h"
#include "support/ms_text.h"
#include "tools/commands.h"
#include "tools/history_flags.h"

namespace ktune::tools {
namespace {

struct RunCmdOptions {
  std::string model;
  std::vector<std::string> inputs;
  std::string target = "host";
  HistoryFlags history;  // --db, --server, --device-key, --untuned
  int threads = 0;       // 0 = the runtime's default
  int runs = 20;
  int warmup = 3;
  uint64_t seed = 0;
  std::string input_file;   // raw inputs, concatenated in graph order ("" = random)
  std::string output_file;  // the outputs written there, concatenated ("" = not written)
  bool check = false;       // compare with ONNX Runtime
  std::string
      ort_dir;  // holds ort-run.js and node_modules/onnxruntime-node ("" = ort/ beside ktune)
  bool check_nodes = false;  // compare every step with its te reference instead of timing
  double tolerance =
      1e-4;  // --check: max |ktune - ORT| over max |ORT|, per output; --check-nodes: per step
  bool json = false;
  bool serve = false;  // answer timing requests on stdin instead of timing once
  // The steps' thread counts: "stored" (the log's choice), "measure" (chosen here and now, the log
  // untouched) or "off" (every step on every thread).
  std::string step_threads = "stored";
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error(ErrorKind::kIo, "cannot write " + path);
}

// The directory of this executable (ort/ sits beside it in a build tree).
std::filesystem::path self_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path() : exe.parent_path();
}

// ONNX Runtime's outputs for the inputs in `inputs_path`, through scripts/ort-run.js.
std::string ort_outputs(const RunCmdOptions& o, const std::string& inputs_path, int threads) {
  const std::filesystem::path dir =
      o.ort_dir.empty() ? self_dir() / "ort" : std::filesystem::path(o.ort_dir);
  if (!std::filesystem::exists(dir / "ort-run.js") ||
      !std::filesystem::exists(dir / "node_modules" / "onnxruntime-node"))
    throw Error(ErrorKind::kNotFound, "--check needs ONNX Runtime: " + dir.string() +
                                          " has no ort-run.js and node_modules/onnxruntime-node "
                                          "(scripts/setup installs them; or --ort DIR)");
  const std::string out = inputs_path + ".ort";
  std::string cmd = "NODE_PATH='" + (dir / "node_modules").string() + "' node '" +
                    (dir / "ort-run.js").string() + "' '" + o.model + "' '" + inputs_path + "' '" +
                    out + "' --threads " + std::to_string(threads);
  // The shapes ktune built for, where the model leaves dimensions symbolic.
  for (const std::string& input : o.inputs) cmd += " --input '" + input + "'";
  if (std::system(cmd.c_str()) != 0)
    throw Error(ErrorKind::kRun, "ONNX Runtime failed on " + o.model);
  std::string bytes = read_file(out);
  std::filesystem::remove(out);
  return bytes;
}

// --check-nodes: one line per step, then an error naming the first step past the tolerance.
void check_nodes(const RunCmdOptions& o, const deploy::BuiltModel& m, deploy::ModelRunner& runner,
                 const deploy::ModelBuffers& buffers) {
  const auto checks = deploy::check_model_steps(runner, m, buffers.inputs(), buffers.outputs());
  std::cout << fmt::format("{:>4}  {:<11} {:>9} {:>9}  {}\n", "step", "kind", "max error",
                           "elements", "layer");
  for (const auto& c : checks)
    std::cout << fmt::format("{:>4}  {:<11} {:9.2e} {:>9}  {}{}{}\n", c.step, c.kind, c.max_error,
                             c.elements, c.layer,
                             c.nan_left ? fmt::format(" ({} NaN left)", c.nan_left) : "",
                             c.passed(o.tolerance) ? "" : "  FAILED");
  const auto failed = std::count_if(checks.begin(), checks.end(),
                                    [&](const auto& c) { return !c.passed(o.tolerance); });
  std::cout << fmt::format(
      "check-nodes: {} steps against te's reference, {} past the tolerance {:.0e}\n", checks.size(),
      failed, o.tolerance);
  for (const auto& c : checks)
    if (!c.passed(o.tolerance))
      throw Error(
          ErrorKind::kWrongAnswer,
          fmt::format("step {} ({}) differs from its reference by {:.2e} of its magnitude{}",
                      c.step, c.layer, c.max_error, c.nan_left ? " and left NaN" : ""));
}

// --serve: "ready", then per line of stdin, "threads T" sets the thread count (answers "ok") and
// "N" runs the model N times one step at a time, answering the N sums of the steps' times in ms on
// one line: the estimate tune-model takes, for a benchmark to take it in the same rounds as the
// runs it estimates (a two-thread run on a VM moves by 10-20% as the host moves its vCPUs).
void serve_layer_timing(deploy::ModelRunner& runner, const deploy::ModelBuffers& buffers) {
  std::cout << "ready" << std::endl;
  for (std::string line; std::getline(std::cin, line);) {
    if (line.rfind("threads ", 0) == 0) {
      codegen::set_num_threads(std::stoi(line.substr(8)));
      std::cout << "ok" << std::endl;
      continue;
    }
    const int n = std::stoi(line);
    std::string answer;
    for (int i = 0; i < n; ++i) {
      double sum = 0;
      for (double s : runner.run_layers(buffers.inputs(), buffers.outputs())) sum += s;
      answer += fmt::format("{}{:.6f}", i ? " " : "", sum * 1e3);
    }
    std::cout << answer << std::endl;
  }
}

void run_model(const RunCmdOptions& o) {
  if (o.runs < 1 || o.warmup < 0)
    throw Error(ErrorKind::kInvalidArgument, "--runs must be >= 1 and --warmup >= 0");
  if (o.step_threads != "stored" && o.step_threads != "measure" && o.step_threads != "off")
    throw Error(ErrorKind::kInvalidArgument,
                "--step-threads takes stored, measure or off, not '" + o.step_threads + "'");
  deploy::ModelRequest r;
  r.model_path = o.model;
  for (const auto& text : o.inputs) r.inputs.push_back(frontend::parse_input_shape(text));
  r.name = "ktune_run_model";
  r.plan.target = o.target;
  r.plan.history = history_source(o.history);
  if (o.threads > 0) codegen::set_num_threads(o.threads);
  const int threads = codegen::num_threads();
  r.step_threads = o.step_threads == "stored" ? threads : -1;
  deploy::BuiltModel m = deploy::build_model(r);
  warn_if_mostly_untuned(deploy::step_sources(m.plan), r.plan.history, o.model, o.inputs);
  deploy::ModelBuffers buffers(m.plan, o.seed);
  if (!o.input_file.empty()) buffers.set_inputs(read_file(o.input_file));
  std::string step_threads_note;
  if (o.step_threads == "measure" && threads > 1 && !o.check_nodes) {
    deploy::StepThreadsOptions how;
    how.threads = threads;
    const tuning_db::StepThreadsRow row = deploy::measure_step_threads(m, buffers, how);
    m = deploy::with_step_threads(m, row);
    step_threads_note = "measured now " + deploy::step_threads_summary(row);
  } else if (m.step_threads_at > 0) {
    step_threads_note = fmt::format("the log's choice, measured at {} threads", m.step_threads_at);
  }
  deploy::ModelRunner runner(m);
  if (o.check_nodes) {
    check_nodes(o, m, runner, buffers);
    if (!o.output_file.empty()) write_file(o.output_file, buffers.output_bytes());
    return;
  }
  if (o.serve) return serve_layer_timing(runner, buffers);
  const deploy::ModelTiming timing = deploy::time_model(runner, m.plan, buffers, o.warmup, o.runs);
  const std::vector<double>& layer_s = timing.step_s;
  const double layers_total = timing.task_s() + timing.other_s();
  const double med = timing.median_s;
  const std::string out_bytes = buffers.output_bytes();
  bool finite = true;
  for (size_t i = 0; i < out_bytes.size() / 4; ++i)
    finite = finite && std::isfinite(reinterpret_cast<const float*>(out_bytes.data())[i]);
  if (!o.output_file.empty()) write_file(o.output_file, out_bytes);
  // --check: every output against ONNX Runtime's on the same inputs.
  std::vector<double> errors;
  if (o.check) {
    std::string in_path = o.input_file;
    std::unique_ptr<std::string, void (*)(std::string*)> cleanup(nullptr, [](std::string* p) {
      std::filesystem::remove(*p);
      delete p;
    });
    if (in_path.empty()) {
      in_path = (std::filesystem::temp_directory_path() /
                 ("ktune-run-" + std::to_string(::getpid()) + ".in"))
                    .string();
      write_file(in_path, buffers.input_bytes());
      cleanup.reset(new std::string(in_path));
    }
    const std::string ref = ort_outputs(o, in_path, codegen::num_threads());
    if (ref.size() != out_bytes.size())
      throw Error(ErrorKind::kRun, "ONNX Runtime wrote " + std::to_string(ref.size()) +
                                       " output bytes, ktune " + std::to_string(out_bytes.size()));
    size_t off = 0;
    for (int64_t count : buffers.output_counts()) {
      const float* r = reinterpret_cast<const float*>(ref.data() + off);
      const float* a = reinterpret_cast<const float*>(out_bytes.data() + off);
      double max_ref = 0, max_diff = 0;
      for (int64_t i = 0; i < count; ++i) {
        max_ref = std::max(max_ref, std::abs(static_cast<double>(r[i])));
        max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - r[i]));
      }
      errors.push_back(max_diff / std::max(max_ref, 1e-30));
      off += static_cast<size_t>(count) * 4;
    }
  }

  if (o.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (size_t k = 0; k < m.plan.steps.size(); ++k) {
      const auto& s = m.plan.steps[k];
      layers.push_back({{"layer", s.layer},
                        {"kind", s.kind},
                        {"threads", s.max_threads > 0 ? s.max_threads : threads},
                        {"kernel", s.symbol},
                        {"workload", s.task ? s.task->workload_key() : ""},
                        {"ms", layer_s[k] * 1e3}});
    }
    std::cout << nlohmann::json{{"model", o.model},
                                {"runs", o.runs},
                                {"median_ms", med * 1e3},
                                {"min_ms", timing.min_s * 1e3},
                                {"max_ms", timing.max_s * 1e3},
                                {"q1_ms", timing.q1_s * 1e3},
                                {"q3_ms", timing.q3_s * 1e3},
                                {"noisy", timing.noisy()},
                                {"apart", timing.apart()},
                                {"threads", codegen::num_threads()},
                                {"step_threads", step_threads_note},
                                {"outputs_finite", finite},
                                {"layers", layers},
                                {"check_error",
                                 o.check ? nlohmann::json(errors) : nlohmann::json(nullptr)}}
                     .dump(2)
              << "\n";
    return;
  }
  // Megabytes to one decimal, kilobytes below a tenth of one (a small model's arena).
  const auto bytes = [](double b) {
    return b >= 1e5 ? fmt::format("{:.1f} MB", b / 1e6) : fmt::format("{:.1f} kB", b / 1e3);
  };
  std::cout << fmt::format("model {}: {} kernels, {} threads, arena {}, weights {}\n", o.model,
                           m.plan.steps.size(), codegen::num_threads(),
                           bytes(static_cast<double>(m.plan.arena_bytes)),
                           bytes(static_cast<double>(m.plan.weights.size())));
  std::vector<size_t> order(m.plan.steps.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return layer_s[a] > layer_s[b]; });
  if (!step_threads_note.empty()) std::cout << fmt::format("step threads: {}\n", step_threads_note);
  std::cout << fmt::format("{:>9} {:>6} {:>3}  {:<11} {}\n", "ms", "share", "thr", "kind", "layer");
  for (size_t k : order) {
    const auto& s = m.plan.steps[k];
    std::string source;
    if (s.choice)
      source = s.choice->on_fallback_config() ? " [tuned: the fallback config]"
               : s.choice->source == deploy::ConfigChoice::Source::kTuned   ? " [tuned]"
               : s.choice->source == deploy::ConfigChoice::Source::kNearest ? " [nearest]"
                                                                            : " [fallback]";
    std::cout << fmt::format("{:>9} {:5.1f}% {:>3}  {:<11} {}{}\n", ms_text(layer_s[k]),
                             layers_total > 0 ? 100 * layer_s[k] / layers_total : 0.0,
                             s.max_threads > 0 ? s.max_threads : threads, s.kind, s.layer, source);
  }
  std::cout << fmt::format(
      "latency: median {:.4f} ms, min {:.4f}, max {:.4f} over {} runs ({} warm-up); layers one at "
      "a time sum to {:.4f} ms\n",
      med * 1e3, timing.min_s * 1e3, timing.max_s * 1e3, o.runs, o.warmup, layers_total * 1e3);
  if (timing.noisy())
    std::cout << fmt::format(
        "noisy: the middle half of the runs spread {:.0f}% of the median ({:.4f} to {:.4f} ms): "
        "not a usable figure; run again on a quieter machine\n",
        100 * (timing.q3_s - timing.q1_s) / med, timing.q1_s * 1e3, timing.q3_s * 1e3);
  if (timing.apart())
    std::cout << fmt::format(
        "apart: the end-to-end median is {:.2f}x the layers' sum: the machine was busier during "
        "one "
        "of the two measurements (run again), or the steps slow each other down end to end\n",
        med / layers_total);
  for (size_t j = 0; j < errors.size(); ++j)
    std::cout << fmt::format(
        "check: output {} ({}): max |ktune - ONNX Runtime| / max |ONNX Runtime| = {:.2e} "
        "(tolerance {:.0e})\n",
        j, m.plan.tensors[m.plan.outputs[j]].name, errors[j], o.tolerance);
  if (!finite) throw Error(ErrorKind::kRun, "the model produced a non-finite output");
  for (size_t j = 0; j < errors.size(); ++j)
    if (!(errors[j] <= o.tolerance))
      throw Error(ErrorKind::kWrongAnswer, "output " + m.plan.tensors[m.plan.outputs[j]].name +
                                               " differs from ONNX Runtime's by " +
                                               fmt::format("{:.2e}", errors[j]) +
                                               " of its magnitude");
}

void add_run(CLI::App& app) {
  auto o = std::make_shared<RunCmdOptions>();
  auto* cmd = app.add_subcommand(
      "run",
      "Build a whole ONNX model as `build --model` does, load it in this process, "
      "and time it end to end and per layer on random inputs");
  cmd->add_option("model", o->model, "ONNX model file")->required();
  cmd->add_option("--input", o->inputs, "Shape of a graph input, name=1x3x224x224");
  cmd->add_option("--target", o->target, "Target (host: it runs here)")->capture_default_str();
  add_history_flags(cmd, o->history, "With --server: only records measured on devices of this key");
  cmd->add_option("--threads", o->threads,
                  "Threads of the parallel loops (default: the CPUs of this process)");
  cmd->add_option("--step-threads", o->step_threads,
                  "Threads of each step: stored (those the log measured for this model, target "
                  "and --threads, or at the most threads), measure (chosen now: each step timed in "
                  "the model's order at --threads and at one; the log is not written), or off "
                  "(every step on every thread)")
      ->capture_default_str();
  cmd->add_option("--runs", o->runs, "Timed runs")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
  cmd->add_option("--input-file", o->input_file,
                  "Raw inputs (float32; token ids as int64 or int32), concatenated in graph "
                  "order (default: random from --seed)");
  cmd->add_option("--output-file", o->output_file,
                  "Write the outputs there, raw float32, concatenated");
  auto* check = cmd->add_flag("--check", o->check,
                              "Compare every output with ONNX Runtime's on the same inputs");
  cmd->add_option("--ort", o->ort_dir,
                  "With --check: folder of ort-run.js and node_modules/onnxruntime-node (default: "
                  "ort/ beside ktune)");
  auto* check_nodes_flag =
      cmd->add_flag("--check-nodes", o->check_nodes,
                    "Instead of timing: run the model once, step by step, and compare each step's "
                    "output with te's reference of it on the same inputs");
  cmd->add_option("--tolerance", o->tolerance,
                  "With --check: largest max |difference| / max |reference| per output; "
                  "with --check-nodes: per step")
      ->capture_default_str();
  auto* json = cmd->add_flag("--json", o->json, "Print the figures as JSON");
  auto* serve = cmd->add_flag("--serve", o->serve,
                              "For benchmarks: print ready, then answer each line of stdin, "
                              "'threads T' (sets the thread count) or 'N' (N runs one step at a "
                              "time: the sums of their steps' times in ms, on one line)");
  check_nodes_flag->excludes(check)->excludes(json);
  serve->excludes(check)->excludes(json)->excludes(check_nodes_flag);
  cmd->callback([o] { run_model(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(run, add_run);

}  // namespace ktune::tools
