// `ktune build <template> key=value...`: the best logged config of a workload (or the fallback)
// compiled to an object file and a C header that a user's build links.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "codegen/codegen_llvm.h"
#include "rpc_runner/history_lookup.h"
#include "support/error.h"
#include "te/lower.h"
#include "tools/commands.h"
#include "tools/service_flags.h"
#include "tools/kernel_header.h"
#include "tools/output_files.h"
#include "tools/standalone_runtime.h"
#include "tuning_db/record.h"

namespace ktune::tools {
namespace {

using rpc_runner::Workload;
using rpc_runner::resolve_workload;
using rpc_runner::best_record;
using rpc_runner::emulated_only_note;
using rpc_runner::nearest_record;
using rpc_runner::emulated_warning;
using rpc_runner::toolchain_warning;

struct BuildCmdOptions {
  std::string template_name;
  std::vector<std::string> args;
  std::string target = "host";
  std::string db = "ktune.db";
  rpc_runner::ServiceClientOptions server;  // set: ask this server instead of --db
  std::string device_key;
  // Unset options take their defaults; set ones must not be empty.
  std::optional<std::string> output;   // nullopt = <symbol>.o
  std::optional<std::string> header;   // nullopt = <symbol>.h
  std::optional<std::string> name;     // nullopt = ktune_<template>
  std::optional<std::string> runtime;  // nullopt = do not write the standalone runtime
  bool require_tuned = false;
  bool emulated = false;  // records of emulated devices are eligible too
  bool json = false;
};

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// The scheduled program of config; a logged config that no longer instantiates (the template
// changed since it was measured) is named as such. Throws Error(kInstantiation).
schedule_space::Instantiated instantiate(const schedule_space::Task& task, const schedule_space::Config& config,
                                         int64_t record_id) {
  try {
    return task.instantiate(config);
  } catch (const Error& e) {
    if (record_id < 0) throw;
    throw Error(e.kind(), "the config of record " + std::to_string(record_id) + " does not instantiate: " + e.what());
  }
}

// Refuses to write an output over the tuning log it was read from.
void check_not_the_log(const std::vector<OutputFile>& files, const std::string& db) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(db, ec)) return;
  for (const auto& f : files) {
    if (fs::exists(f.path, ec) && fs::equivalent(f.path, db, ec))
      throw Error(ErrorKind::kInvalidArgument, "output " + f.path + " is the tuning log " + db);
  }
}

nlohmann::json arguments_json(const codegen::Artifact& artifact, const std::vector<std::string>& tensor_names,
                              const std::vector<std::string>& params) {
  nlohmann::json args = nlohmann::json::array();
  for (size_t i = 0; i < artifact.signature.size(); ++i) {
    const auto& a = artifact.signature[i];
    args.push_back({{"tensor", tensor_names[i]},
                    {"parameter", params[i]},
                    {"dtype", a.dtype},
                    {"shape", a.shape},
                    {"bytes", a.num_elements() * a.element_bytes()},
                    {"output", a.is_output}});
  }
  return args;
}

void run_build(const BuildCmdOptions& o) {
  const std::string symbol = o.name ? *o.name : rpc_runner::default_kernel_symbol(o.template_name);
  if (!is_c_identifier(symbol))
    throw Error(ErrorKind::kInvalidArgument, "--name '" + symbol +
                                                 "' is not a usable C identifier (letters, digits and _, not "
                                                 "starting with a digit, not a keyword or a <stdint.h> type)");
  const Workload w = resolve_workload(o.template_name, o.args, o.target);
  const schedule_space::Task& task = w.task;

  // A build must work before any tuning: no log, or no record in it, means the fallback config.
  std::optional<tuning_db::Record> best;
  std::string untuned_reason;
  std::error_code ec;
  if (o.server.server.empty() && !o.device_key.empty())
    throw Error(ErrorKind::kInvalidArgument, "--device-key needs --server");
  const bool have_log = o.server.server.empty() && std::filesystem::exists(o.db, ec);
  if (ec) throw Error(ErrorKind::kIo, "cannot look at the tuning log " + o.db + ": " + ec.message());
  if (!o.server.server.empty()) {
    best = best_record(o.server, w, o.device_key, o.emulated);
    if (!best)
      untuned_reason = "no successful record of " + task.workload_key() + " for this target on " + o.server.server;
  } else if (have_log) {
    best = best_record(o.db, w, o.emulated);
    if (!best) {
      untuned_reason = "no successful record of " + task.workload_key() + " for this target in " + o.db;
      if (!o.emulated) {
        if (std::string note = emulated_only_note(o.db, w, "--emulated"); !note.empty()) untuned_reason += "; " + note;
      }
    }
  } else {
    untuned_reason = "no tuning log at " + o.db;
  }
  if (!best && o.require_tuned) throw Error(ErrorKind::kNotFound, untuned_reason + " (--require-tuned)");
  if (best && best->emulated) spdlog::warn("{}", emulated_warning(*best));
  if (best && !toolchain_warning(*best).empty()) spdlog::warn("{}", toolchain_warning(*best));
  // A shape nobody tuned: the best config of the nearest tuned shape that is valid for this one
  // beats the generic fallback far more often than not (bench/nearest_shape measures it).
  std::optional<tuning_db::NearestTuned> nearest;
  if (!best && have_log) nearest = nearest_record(o.db, w, o.emulated);
  if (!best && !o.server.server.empty()) nearest = nearest_record(o.server, w, o.device_key, o.emulated);
  // A server's records have no id here (its log streams them without one).
  const std::string nearest_from =
      !nearest                  ? ""
      : o.server.server.empty() ? "tuning log " + o.db + ", record " + std::to_string(nearest->record.id)
                                : "tuning server " + o.server.server;

  const schedule_space::Config config = best      ? schedule_space::Config::from_json(best->config)
                                        : nearest ? nearest->config
                                                  : task.fallback_config();
  const schedule_space::Instantiated inst = instantiate(task, config, best ? best->id : -1);
  const te::LoweredFunc func = te::lower(inst.schedule, inst.args, symbol);
  const codegen::Artifact artifact = codegen::build(func, w.target);
  std::vector<std::string> tensor_names;
  for (const auto& arg : func.args) tensor_names.push_back(arg.buffer.name());

  KernelProvenance prov;
  prov.workload_key = task.workload_key();
  prov.target = artifact.target;
  prov.llvm_version = artifact.llvm_version;
  prov.config_json = config.to_json_string();
  prov.ktune_version = KTUNE_VERSION;
  if (best) {
    prov.source = "tuning log " + o.db + ", record " + std::to_string(best->id) + ": " + fixed(best->gflops(), 2) +
                  " GFLOP/s (" + fixed(best->mean_cost() * 1e3, 4) + " ms), tuner " + best->tuner +
                  ", measured with LLVM " + best->target.llvm_version +
                  (best->emulated ? ", on an EMULATED device (" + best->device_key + ")" : "");
  } else if (nearest) {
    prov.source = "nearest tuned workload " + nearest->record.workload_key + " (distance " + fixed(nearest->distance, 2) +
                  "), " + nearest_from + ": " + fixed(nearest->record.gflops(), 2) +
                  " GFLOP/s there; this shape is untuned (" + untuned_reason + ")";
  } else {
    prov.source = "fallback, untuned (" + untuned_reason + ")";
  }

  const std::string object_path = o.output.value_or(symbol + ".o");
  const std::string header_path = o.header.value_or(symbol + ".h");
  std::vector<OutputFile> files = {
      {object_path, std::string(artifact.object.begin(), artifact.object.end())},
      {header_path, kernel_header(symbol, artifact, tensor_names, prov)},
  };
  if (o.runtime) files.push_back({*o.runtime, std::string(standalone_runtime_source())});
  check_not_the_log(files, o.db);
  write_files_atomically(files);
  // Warned only once the files exist, so that a failed build says one thing: its error.
  if (nearest)
    spdlog::warn("{}: built the config of the nearest tuned workload {} ({}, distance {:.2f})", untuned_reason,
                 nearest->record.workload_key, nearest_from, nearest->distance);
  else if (!best)
    spdlog::warn("{}: built the fallback config, untuned", untuned_reason);

  if (o.json) {
    nlohmann::json j = {
        {"object", object_path},
        {"object_bytes", artifact.object.size()},
        {"header", header_path},
        {"runtime", o.runtime ? nlohmann::json(*o.runtime) : nlohmann::json(nullptr)},
        {"symbol", symbol},
        {"wrapper", symbol + "_run"},
        {"workload", task.workload_key()},
        {"target", artifact.target},
        {"llvm_version", artifact.llvm_version},
        {"config", config.to_json()},
        {"config_source", best ? "tuned" : nearest ? "nearest" : "fallback"},
        {"alignment", kKernelBufferAlignment},
        {"arguments", arguments_json(artifact, tensor_names, wrapper_parameter_names(symbol, tensor_names))}};
    if (best) {
      j["record"] = {{"id", best->id},
                     {"gflops", best->gflops()},
                     {"mean_cost_s", best->mean_cost()},
                     {"tuner", best->tuner},
                     {"llvm_version", best->target.llvm_version},
                     {"emulated", best->emulated}};
    } else {
      j["record"] = nullptr;
      j["untuned_reason"] = untuned_reason;
    }
    if (nearest)
      j["nearest"] = {{"workload", nearest->record.workload_key},
                      {"distance", nearest->distance},
                      {"record_id", o.server.server.empty() ? nlohmann::json(nearest->record.id)
                                                            : nlohmann::json(nullptr)},
                      {"gflops_there", nearest->record.gflops()}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "object:  " << object_path << " (" << artifact.object.size() << " bytes, " << artifact.target << ")\n"
            << "header:  " << header_path << "\n";
  if (o.runtime) std::cout << "runtime: " << *o.runtime << "\n";
  std::cout << "symbol:  " << symbol << " (wrapper " << symbol << "_run)\n"
            << "config:  "
            << (best ? "tuned, record " + std::to_string(best->id) + " of " + o.db + ", " + fixed(best->gflops(), 2) +
                           " GFLOP/s, tuner " + best->tuner + (best->emulated ? ", EMULATED device" : "")
                     : std::string("fallback, untuned"))
            << "\n";
}

void add_build(CLI::App& app) {
  auto o = std::make_shared<BuildCmdOptions>();
  auto* cmd = app.add_subcommand(
      "build", "Compile the best logged config of a workload (or the fallback) to an object file and a C header");
  cmd->add_option("template", o->template_name, "Template name (see `ktune templates`)")->required();
  cmd->add_option("args", o->args, "Workload arguments key=value (omitted ones take their defaults)");
  cmd->add_option("--target", o->target, "Target: host or 'llvm -mtriple=... -mcpu=...' (any LLVM target)")
      ->capture_default_str();
  cmd->add_option("--db", o->db, "Tuning log (SQLite); a missing log means the fallback config")->capture_default_str();
  add_client_flags(cmd, o->server, false)->description("Ask this tuning server's log (HOST:PORT) instead of --db");
  cmd->add_option("--device-key", o->device_key, "With --server: only records measured on devices of this key");
  cmd->add_option("-o,--output", o->output, "Object file to write (default <name>.o)")->expected(1);
  cmd->add_option("--header", o->header, "C header to write (default <name>.h)")->expected(1);
  cmd->add_option("--name", o->name, "Kernel symbol, a C identifier (default ktune_<template>)")->expected(1);
  cmd->add_option("--runtime", o->runtime, "Also write ktune_parallel_for in plain C (pthreads) to this file")
      ->expected(1);
  cmd->add_flag("--emulated", o->emulated,
                "Also serve records timed on emulated devices (qemu), with a warning when one is served");
  cmd->add_flag("--require-tuned", o->require_tuned,
                "Fail instead of building the fallback config when nothing was tuned");
  cmd->add_flag("--json", o->json, "Print what was written as JSON");
  cmd->callback([o] { run_build(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(build, add_build);

}  // namespace ktune::tools
