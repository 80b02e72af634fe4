// `ktune build <template> key=value...` and `ktune build --manifest kernels.json`: the best logged
// configs of workloads (or fallbacks) compiled to an object file or a static library, and a C
// header.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/archive.h"
#include "deploy/history_lookup.h"
#include "deploy/kernel_builder.h"
#include "deploy/kernel_header.h"
#include "deploy/kernel_manifest.h"
#include "deploy/model_build.h"
#include "deploy/model_timing.h"
#include "deploy/output_files.h"
#include "deploy/standalone_runtime.h"
#include "frontend/onnx_graph.h"
#include "support/error.h"
#include "tools/commands.h"
#include "tools/history_flags.h"

namespace ktune::tools {
namespace {

struct BuildCmdOptions {
  std::string template_name;            // a single build; or
  std::optional<std::string> manifest;  // a manifest build
  std::vector<std::string> args;
  HistoryFlags history;  // --db, --server, --device-key, --untuned
  std::string target = "host";
  bool emulated = false;  // --emulated
  // Unset options take their defaults; set ones must not be empty.
  std::optional<std::string> output;   // nullopt = <symbol>.o, or lib<manifest stem>.a
  std::optional<std::string> header;   // nullopt = <symbol>.h, or <manifest stem>.h
  std::optional<std::string> name;     // nullopt = ktune_<template>
  std::optional<std::string> runtime;  // nullopt = do not write the standalone runtime
  std::optional<std::string> model;    // a whole-model build of this ONNX file
  std::vector<std::string> inputs;     // --input NAME=SHAPE of the model
  std::string weights = "embed";       // --weights embed | FILE
  int threads = 0;                     // --threads: the log's step thread counts to ship
  bool measure_steps = false;          // --measure-steps: measure them here at --threads instead
  bool require_tuned = false;
  bool json = false;
};

// Refuses to write an output over the tuning log it was read from.
void check_not_the_log(const std::vector<deploy::OutputFile>& files, const std::string& db) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(db, ec)) return;
  for (const auto& f : files) {
    if (fs::exists(f.path, ec) && fs::equivalent(f.path, db, ec))
      throw Error(ErrorKind::kInvalidArgument, "output " + f.path + " is the tuning log " + db);
  }
}

// The requests of the command line: the manifest's kernels, or its one workload.
std::vector<deploy::KernelRequest> requests_of(const BuildCmdOptions& o) {
  if (o.manifest) {
    if (!o.template_name.empty() || !o.args.empty())
      throw Error(ErrorKind::kInvalidArgument,
                  "--manifest lists the workloads: give no template or arguments");
    if (o.name)
      throw Error(ErrorKind::kInvalidArgument,
                  "--manifest names every kernel: --name does not apply");
    std::vector<deploy::KernelRequest> requests = deploy::read_manifest(*o.manifest);
    for (auto& r : requests) r.require_tuned = r.require_tuned || o.require_tuned;
    return requests;
  }
  if (o.template_name.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "give a template (see `ktune templates`) or --manifest <file>");
  const std::string symbol = o.name ? *o.name : deploy::default_kernel_symbol(o.template_name);
  if (!deploy::is_c_identifier(symbol))
    throw Error(ErrorKind::kInvalidArgument,
                "--name '" + symbol +
                    "' is not a usable C identifier (letters, digits and _, not "
                    "starting with a digit, not a keyword or a <stdint.h> type)");
  return {deploy::KernelRequest{symbol, o.template_name, o.args, o.require_tuned, ""}};
}

nlohmann::json arguments_json(const deploy::BuiltKernel& k) {
  const std::vector<std::string> params =
      deploy::wrapper_parameter_names(k.request.name, k.tensor_names);
  nlohmann::json args = nlohmann::json::array();
  for (size_t i = 0; i < k.artifact.signature.size(); ++i) {
    const auto& a = k.artifact.signature[i];
    args.push_back({{"tensor", k.tensor_names[i]},
                    {"parameter", params[i]},
                    {"dtype", a.dtype},
                    {"shape", a.shape},
                    {"bytes", a.num_elements() * a.element_bytes()},
                    {"output", a.is_output}});
  }
  return args;
}

// What --json says of one kernel (a single build adds its object and header to it).
nlohmann::json kernel_json(const deploy::BuiltKernel& k) {
  const deploy::ConfigChoice& c = k.choice;
  nlohmann::json j = {{"symbol", k.request.name},
                      {"wrapper", k.request.name + "_run"},
                      {"workload", k.workload.task.workload_key()},
                      {"target", k.artifact.target},
                      {"llvm_version", k.artifact.llvm_version},
                      {"config", c.config.to_json()},
                      {"config_source", k.config_source()},
                      {"alignment", deploy::kKernelBufferAlignment},
                      {"arguments", arguments_json(k)}};
  if (c.best) {
    j["record"] = {{"id", c.best->id},
                   {"gflops", c.best->gflops()},
                   {"mean_cost_s", c.best->cost()},
                   {"tuner", c.best->tuner},
                   {"llvm_version", c.best->target.llvm_version},
                   {"emulated", c.best->emulated}};
  } else {
    j["record"] = nullptr;
    j["untuned_reason"] = c.untuned_reason;
  }
  if (c.nearest)
    j["nearest"] = {{"workload", c.nearest->record.workload_key},
                    {"distance", c.nearest->distance},
                    // A server's records carry no id here (its log streams them without one).
                    {"record_id", c.nearest->record.id > 0 ? nlohmann::json(c.nearest->record.id)
                                                           : nlohmann::json(nullptr)},
                    {"gflops_there", c.nearest->record.gflops()}};
  return j;
}

// One line on where a kernel's config came from.
std::string config_line(const deploy::BuiltKernel& k, const HistoryFlags& s) {
  const deploy::ConfigChoice& c = k.choice;
  if (!c.best)
    return c.nearest ? "nearest tuned shape " + c.nearest->record.workload_key
                     : "fallback, untuned";
  const std::string log = s.server.server.empty() ? s.db : s.server.server;
  // The log's best may be the fallback config itself (no tuned config beat it).
  return std::string(c.best->tuner == "fallback" ? "tuned (the fallback config was the fastest), "
                                                 : "tuned, ") +
         (c.best->id > 0 ? "record " + std::to_string(c.best->id) + " of " : "best record of ") +
         log + ", " + fmt::format("{:.2f}", c.best->gflops()) + " GFLOP/s" +
         (c.best->noisy() ? fmt::format(" (NOISY timing: its rounds spread more than {:.0f}%)",
                                        100 * tuning_db::kNoisySpread)
                          : "") +
         ", tuner " + c.best->tuner + (c.best->emulated ? ", EMULATED device" : "");
}

// The model's C name: --name, else the library's name without lib and .a, else the model's stem.
std::string model_name(const BuildCmdOptions& o) {
  if (o.name) return *o.name;
  // The C prefix: -o libNAME.a's NAME, else (a NAME that starts with a digit, as lib32.a's) the
  // model file's name, else "model_" + NAME; other characters become '_'.
  auto identifier = [](std::string stem) {
    for (char& c : stem)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return stem;
  };
  auto usable = [](const std::string& s) {
    return !s.empty() && !std::isdigit(static_cast<unsigned char>(s.front()));
  };
  std::string stem = identifier(std::filesystem::path(o.output.value_or(*o.model)).stem().string());
  if (o.output && stem.rfind("lib", 0) == 0) stem = stem.substr(3);
  if (usable(stem)) return stem;
  const std::string model = identifier(std::filesystem::path(*o.model).stem().string());
  return usable(model) ? model : "model_" + stem;
}

// What --measure-steps measured, for --json: every step's medians and the end to end ones.
nlohmann::json measured_json(const tuning_db::StepThreadsRow& row) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : row.steps)
    steps.push_back({{"layer", s.layer},
                     {"max_threads", s.max_threads},
                     {"all_s", s.all_s},
                     {"one_s", s.one_s}});
  return {{"measured_here", true},
          {"threads", row.threads},
          {"capped_s", row.capped_s},
          {"uncapped_s", row.uncapped_s},
          {"steps", steps}};
}

// `ktune build --model`: the whole graph as one static library, its header, and the weights file
// when they are not embedded.
void run_build_model(const BuildCmdOptions& o) {
  if (!o.template_name.empty() || !o.args.empty() || o.manifest)
    throw Error(ErrorKind::kInvalidArgument,
                "--model builds the whole model: give no template, arguments or --manifest");
  if (o.weights.empty())
    throw Error(ErrorKind::kInvalidArgument, "--weights needs embed or a file name");
  deploy::ModelRequest r;
  r.model_path = *o.model;
  for (const auto& text : o.inputs) r.inputs.push_back(frontend::parse_input_shape(text));
  r.name = model_name(o);
  r.plan.target = o.target;
  r.plan.history = history_source(o.history);
  r.plan.history.include_emulated = o.emulated;
  r.plan.require_tuned = o.require_tuned;
  r.embed_weights = o.weights == "embed";
  if (o.measure_steps && o.threads < 2)
    throw Error(ErrorKind::kInvalidArgument,
                "--measure-steps needs --threads N above 1 (the thread count the library will run "
                "at)");
  r.step_threads = o.measure_steps ? -1 : o.threads;
  deploy::BuiltModel m = deploy::build_model(r);
  std::optional<tuning_db::StepThreadsRow> measured;
  if (o.measure_steps) {
    deploy::StepThreadsOptions how;
    how.threads = o.threads;
    deploy::StepThreadsMeasured here = deploy::measure_step_threads_here(m, how, 0);
    m = std::move(here.model);
    measured = std::move(here.choice);
  }
  const std::string lib_path = o.output.value_or("lib" + r.name + ".a");
  const std::string header_path = o.header.value_or(r.name + ".h");
  const std::vector<uint8_t> lib = deploy::model_library(m);
  std::vector<deploy::OutputFile> files = {
      {lib_path, std::string(lib.begin(), lib.end())},
      {header_path,
       deploy::model_header(m, std::filesystem::path(header_path).filename().string())}};
  if (!r.embed_weights) {
    const auto& w = deploy::model_weights_file(m);
    files.push_back({o.weights, std::string(w.begin(), w.end())});
  }
  if (o.runtime) files.push_back({*o.runtime, std::string(deploy::standalone_runtime_source())});
  check_not_the_log(files, o.history.db);
  deploy::write_files_atomically(files);
  int one_thread = 0;
  for (const auto& s : m.plan.steps) one_thread += s.max_threads == 1 ? 1 : 0;
  const deploy::StepSources n = deploy::step_sources(m.plan);
  warn_if_mostly_untuned(n, r.plan.history, *o.model, o.inputs);
  if (o.json) {
    std::cout << nlohmann::json{{"library", lib_path},
                                {"header", header_path},
                                {"name", r.name},
                                {"kernels", m.plan.steps.size()},
                                {"tuned", n.tuned},
                                {"tuned_fallback_config", n.tuned_fallback_config},
                                {"nearest", n.nearest},
                                {"fallback", n.fallback},
                                {"generated", n.generated},
                                {"arena_bytes", m.plan.arena_bytes},
                                {"weights_bytes", m.plan.weights.size()},
                                {"weights", r.embed_weights ? nlohmann::json("embedded")
                                                            : nlohmann::json(o.weights)},
                                {"one_thread_steps", one_thread},
                                {"step_threads_measured_at", m.step_threads_at},
                                {"step_threads",
                                 measured ? measured_json(*measured) : nlohmann::json(nullptr)}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << "library: " << lib_path << "\nheader:  " << header_path << "\n";
  if (!r.embed_weights) std::cout << "weights: " << o.weights << "\n";
  if (o.runtime) std::cout << "runtime: " << *o.runtime << "\n";
  std::cout << "model:   " << r.name << ", " << m.plan.steps.size() << " kernels (" << n.tuned
            << " tuned"
            << (n.tuned_fallback_config > 0 ? " (" + std::to_string(n.tuned_fallback_config) +
                                                  " of them on the fallback config, the log's best)"
                                            : "")
            << ", " << n.nearest << " nearest tuned shape, " << n.fallback << " fallback, "
            << n.generated << " generated), arena " << m.plan.arena_bytes
            << " bytes (without reuse " << m.plan.tensor_bytes_total << "), weights "
            << m.plan.weights.size() << " bytes\n";
  if (measured)
    std::cout << "threads: measured here " << deploy::step_threads_summary(*measured) << "\n";
  else if (m.step_threads_at > 0)
    std::cout << "threads: " << one_thread << (one_thread == 1 ? " step" : " steps")
              << " on one thread (the log's choice measured at " << m.step_threads_at
              << " threads)\n";
}

void run_build(const BuildCmdOptions& o) {
  if (o.model) return run_build_model(o);
  if (o.measure_steps)
    throw Error(ErrorKind::kInvalidArgument, "--measure-steps applies to a --model build");
  const std::vector<deploy::KernelRequest> requests = requests_of(o);
  const HistoryFlags& h = o.history;
  deploy::KernelSource source;
  source.target = o.target;
  source.db = h.db;
  source.server = h.server;
  source.device_key = h.device_key;
  source.emulated = o.emulated;
  source.untuned = h.untuned;
  const std::vector<deploy::BuiltKernel> kernels = deploy::build_kernels(requests, source);

  // A single build writes the object itself; a manifest build a static library of every object
  // and one header for all (names from the manifest's file name).
  std::string object_path, header_path, header_text, object_bytes;
  if (o.manifest) {
    const std::string stem = std::filesystem::path(*o.manifest).stem().string();
    object_path = o.output.value_or("lib" + stem + ".a");
    header_path = o.header.value_or(stem + ".h");
    std::vector<codegen::Artifact> artifacts;
    std::vector<deploy::KernelHeaderPart> parts;
    for (const auto& k : kernels) {
      artifacts.push_back(k.artifact);
      parts.push_back({k.request.name, &k.artifact, k.tensor_names, k.provenance});
    }
    const std::vector<uint8_t> library = codegen::static_library(artifacts);
    object_bytes.assign(library.begin(), library.end());
    header_text =
        deploy::kernels_header(std::filesystem::path(header_path).filename().string(),
                               std::filesystem::path(object_path).filename().string(), parts);
  } else {
    const deploy::BuiltKernel& k = kernels.front();
    object_path = o.output.value_or(k.request.name + ".o");
    header_path = o.header.value_or(k.request.name + ".h");
    object_bytes.assign(k.artifact.object.begin(), k.artifact.object.end());
    header_text = kernel_header(k.request.name, k.artifact, k.tensor_names, k.provenance);
  }
  std::vector<deploy::OutputFile> files = {{object_path, std::move(object_bytes)},
                                           {header_path, std::move(header_text)}};
  if (o.runtime) files.push_back({*o.runtime, std::string(deploy::standalone_runtime_source())});
  check_not_the_log(files, o.history.db);
  deploy::write_files_atomically(files);
  // Warned only once the files exist, so that a failed build says one thing: its error.
  for (const auto& k : kernels) {
    const std::string who = k.request.label.empty() ? "" : k.request.label + ": ";
    const deploy::ConfigChoice& c = k.choice;
    if (c.nearest)
      spdlog::warn("{}{}: built the config of the nearest tuned workload {} ({}, distance {:.2f})",
                   who, c.untuned_reason, c.nearest->record.workload_key,
                   c.nearest->record.id > 0 ? "record " + std::to_string(c.nearest->record.id)
                                            : "tuning server " + o.history.server.server,
                   c.nearest->distance);
    else if (!c.best && !o.history.untuned)  // --untuned asked for it
      spdlog::warn("{}{}: built the fallback config, untuned", who, c.untuned_reason);
  }

  const size_t written = files.front().contents.size();
  const nlohmann::json runtime = o.runtime ? nlohmann::json(*o.runtime) : nlohmann::json(nullptr);
  if (o.json && o.manifest) {
    nlohmann::json j = {{"library", object_path},  {"library_bytes", written},
                        {"header", header_path},   {"runtime", runtime},
                        {"manifest", *o.manifest}, {"kernels", nlohmann::json::array()}};
    for (const auto& k : kernels) j["kernels"].push_back(kernel_json(k));
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (o.json) {
    nlohmann::json j = {{"object", object_path},
                        {"object_bytes", written},
                        {"header", header_path},
                        {"runtime", runtime}};
    j.update(kernel_json(kernels.front()));
    std::cout << j.dump(2) << "\n";
    return;
  }
  const std::string target = kernels.front().artifact.target;
  std::cout << (o.manifest ? "library: " : "object:  ") << object_path << " (" << written
            << " bytes, " << target << ")\n"
            << "header:  " << header_path << "\n";
  if (o.runtime) std::cout << "runtime: " << *o.runtime << "\n";
  if (!o.manifest) {
    const deploy::BuiltKernel& k = kernels.front();
    std::cout << "symbol:  " << k.request.name << " (wrapper " << k.request.name << "_run)\n"
              << "config:  " << config_line(k, o.history) << "\n";
    return;
  }
  for (const auto& k : kernels)
    std::cout << "kernel:  " << k.request.name << " " << k.workload.task.workload_key() << ": "
              << config_line(k, o.history) << "\n";
}

void add_build(CLI::App& app) {
  auto o = std::make_shared<BuildCmdOptions>();
  auto* cmd = app.add_subcommand("build",
                                 "Compile the best logged config of a workload (or the fallback) "
                                 "to an object file and a C header; with "
                                 "--manifest, many workloads to one static library and one header");
  cmd->add_option("template", o->template_name,
                  "Template name (see `ktune templates`); not with --manifest");
  cmd->add_option("args", o->args,
                  "Workload arguments key=value (omitted ones take their defaults)");
  cmd->add_option("--manifest", o->manifest,
                  std::string("Build every kernel of this JSON file in one run: ") +
                      deploy::kManifestFormat +
                      ". Writes a static library (-o, default lib<stem>.a) and one header (default "
                      "<stem>.h)")
      ->expected(1);
  cmd->add_option("--model", o->model,
                  "Build a whole ONNX model: one static library (-o, default lib<name>.a) whose "
                  "<name>_create/_run/_destroy run every layer on its tuned kernel, and its header")
      ->expected(1);
  cmd->add_option("--input", o->inputs, "With --model: shape of a graph input, name=1x3x224x224");
  cmd->add_option("--threads", o->threads,
                  "With --model: the thread count the library will run at; ships the steps' "
                  "thread counts the log measured at it (`ktune tune-model`), else those measured "
                  "at the most threads (0: those; -1: none, every step on every thread)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 256));
  cmd->add_flag("--measure-steps", o->measure_steps,
                "With --model and --threads N above 1: measure each step's thread count here, at "
                "N threads and at one in the model's order, and ship that (this machine must be "
                "one of the target: how a model tuned on a server's devices gets them; the log "
                "is not written)");
  cmd->add_option("--weights", o->weights,
                  "With --model: embed (in the library) or a file that <name>_create reads "
                  "(checked by size and hash)")
      ->capture_default_str();
  cmd->add_option("--target", o->target,
                  "Target: host or 'llvm -mtriple=... -mcpu=...' (any LLVM target)")
      ->capture_default_str();
  add_history_flags(cmd, o->history,
                    "With --server: only records measured on devices of this key, built for their "
                    "target (a --target of another architecture is refused)");
  cmd->add_option("-o,--output", o->output,
                  "Object file (static library with --manifest) to write (default <name>.o)")
      ->expected(1);
  cmd->add_option("--header", o->header, "C header to write (default <name>.h)")->expected(1);
  cmd->add_option("--name", o->name, "Kernel symbol, a C identifier (default ktune_<template>)")
      ->expected(1);
  cmd->add_option("--runtime", o->runtime,
                  "Also write ktune_parallel_for in plain C (pthreads) to this file")
      ->expected(1);
  cmd->add_flag(
      "--emulated", o->emulated,
      "Also serve records timed on emulated devices (qemu), with a warning when one is served");
  cmd->add_flag("--require-tuned", o->require_tuned,
                "Fail instead of building the fallback config when nothing was tuned (every kernel "
                "of a manifest)")
      ->excludes("--untuned");
  cmd->add_flag("--json", o->json, "Print what was written as JSON");
  cmd->callback([o] { run_build(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(build, add_build);

}  // namespace ktune::tools
