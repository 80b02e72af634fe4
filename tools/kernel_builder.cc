// build_kernels(): the look-up and compilation behind `ktune build`, for one workload or a manifest
// of many.
#include "tools/kernel_builder.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <iomanip>
#include <set>
#include <sstream>

#include "codegen/codegen_llvm.h"
#include "support/error.h"
#include "te/lower.h"

namespace ktune::tools {
namespace {

using rpc_runner::best_record;
using rpc_runner::emulated_only_note;
using rpc_runner::emulated_warning;
using rpc_runner::nearest_record;
using rpc_runner::resolve_workload;
using rpc_runner::toolchain_warning;


std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// Runs step; an Error it throws gets the request's label in front (same kind).
template <typename Step>
auto labelled(const KernelRequest& r, Step&& step) -> decltype(step()) {
  try {
    return step();
  } catch (const Error& e) {
    if (r.label.empty()) throw;
    throw Error(e.kind(), r.label + ": " + e.what());
  }
}

// The scheduled program of config; a logged config that no longer instantiates (the template
// changed since it was measured) is named as such. Throws Error(kInstantiation).
schedule_space::Instantiated instantiate(const schedule_space::Task& task,
                                         const schedule_space::Config& config, int64_t record_id) {
  try {
    return task.instantiate(config);
  } catch (const Error& e) {
    if (record_id < 0) throw;
    throw Error(e.kind(), "the config of record " + std::to_string(record_id) +
                              " does not instantiate: " + e.what());
  }
}

// Fills best / nearest / untuned_reason / config of k from the log or the server.
void look_up(BuiltKernel& k, const KernelSource& s) {
  const schedule_space::Task& task = k.workload.task;
  const std::string& label = k.request.label;
  const std::string who = label.empty() ? "" : label + ": ";
  std::error_code ec;
  const bool use_server = !s.server.server.empty();
  const bool have_log = !use_server && std::filesystem::exists(s.db, ec);
  if (ec)
    throw Error(ErrorKind::kIo, "cannot look at the tuning log " + s.db + ": " + ec.message());
  if (use_server) {
    k.best = best_record(s.server, k.workload, s.device_key, s.emulated);
    if (!k.best)
      k.untuned_reason = "no successful record of " + task.workload_key() + " for this target on " +
                         s.server.server;
  } else if (have_log) {
    k.best = best_record(s.db, k.workload, s.emulated);
    if (!k.best) {
      k.untuned_reason =
          "no successful record of " + task.workload_key() + " for this target in " + s.db;
      if (!s.emulated) {
        if (std::string note = emulated_only_note(s.db, k.workload, "--emulated"); !note.empty())
          k.untuned_reason += "; " + note;
      }
    }
  } else {
    k.untuned_reason = "no tuning log at " + s.db;
  }
  if (!k.best && k.request.require_tuned)
    throw Error(ErrorKind::kNotFound, k.untuned_reason + " (--require-tuned)");
  if (k.best && k.best->emulated) spdlog::warn("{}{}", who, emulated_warning(*k.best));
  if (k.best && !toolchain_warning(*k.best).empty())
    spdlog::warn("{}{}", who, toolchain_warning(*k.best));
  // A shape nobody tuned: the best config of the nearest tuned shape that is valid for this one
  // beats the generic fallback far more often than not (bench/nearest_shape measures it).
  if (!k.best && have_log) k.nearest = nearest_record(s.db, k.workload, s.emulated);
  if (!k.best && use_server)
    k.nearest = nearest_record(s.server, k.workload, s.device_key, s.emulated);
  k.config = k.best      ? schedule_space::Config::from_json(k.best->config)
             : k.nearest ? k.nearest->config
                         : task.fallback_config();
}

KernelProvenance provenance(const BuiltKernel& k, const KernelSource& s) {
  KernelProvenance p;
  p.workload_key = k.workload.task.workload_key();
  p.target = k.artifact.target;
  p.llvm_version = k.artifact.llvm_version;
  p.config_json = k.config.to_json_string();
  p.ktune_version = KTUNE_VERSION;
  const std::string log =
      s.server.server.empty() ? "tuning log " + s.db : "tuning server " + s.server.server;
  if (k.best) {
    const tuning_db::Record& b = *k.best;
    // A server's answer carries no record id (0): the record is named by its figures.
    p.source = log + (b.id > 0 ? ", record " + std::to_string(b.id) : "") + ": " + fixed(b.gflops(), 2) +
               " GFLOP/s (" + fixed(b.mean_cost() * 1e3, 4) + " ms), tuner " + b.tuner +
               ", measured with LLVM " + b.target.llvm_version +
               (b.emulated ? ", on an EMULATED device (" + b.device_key + ")" : "");
  } else if (k.nearest) {
    const tuning_db::NearestTuned& n = *k.nearest;
    p.source = "nearest tuned workload " + n.record.workload_key + " (distance " +
               fixed(n.distance, 2) + "), " + log +
               (n.record.id > 0 ? ", record " + std::to_string(n.record.id) : "") + ": " +
               fixed(n.record.gflops(), 2) + " GFLOP/s there; this shape is untuned (" +
               k.untuned_reason + ")";
  } else {
    p.source = "fallback, untuned (" + k.untuned_reason + ")";
  }
  return p;
}

}  // namespace

std::string BuiltKernel::config_source() const {
  return best ? "tuned" : nearest ? "nearest" : "fallback";
}

std::vector<BuiltKernel> build_kernels(const std::vector<KernelRequest>& requests,
                                       const KernelSource& source) {
  if (requests.empty()) throw Error(ErrorKind::kInvalidArgument, "no kernel to build");
  // Every entry is checked before any log is read or anything compiled.
  std::vector<BuiltKernel> kernels;
  std::set<std::string> names;
  for (const KernelRequest& r : requests) {
    labelled(r, [&] {
      if (!is_c_identifier(r.name))
        throw Error(ErrorKind::kInvalidArgument,
                    "name '" + r.name +
                        "' is not a usable C identifier (letters, digits and _, not "
                        "starting with a digit, not a keyword or a <stdint.h> type)");
      if (!names.insert(r.name).second)
        throw Error(ErrorKind::kInvalidArgument,
                    "the name " + r.name + " is taken by an earlier kernel");
      kernels.emplace_back(r, resolve_workload(r.template_name, r.args, source.target));
    });
  }
  if (source.server.server.empty() && !source.device_key.empty())
    throw Error(ErrorKind::kInvalidArgument, "--device-key needs --server");

  std::vector<te::LoweredFunc> funcs;
  for (BuiltKernel& k : kernels) {
    labelled(k.request, [&] {
      look_up(k, source);
      const auto inst = instantiate(k.workload.task, k.config, k.best ? k.best->id : -1);
      funcs.push_back(te::lower(inst.schedule, inst.args, k.request.name));
    });
  }
  // One codegen session for all: its errors name the function, which is the kernel's name.
  std::vector<codegen::Artifact> artifacts =
      codegen::build_all(funcs, kernels.front().workload.target);
  for (size_t i = 0; i < kernels.size(); ++i) {
    BuiltKernel& k = kernels[i];
    k.artifact = std::move(artifacts[i]);
    for (const auto& arg : funcs[i].args) k.tensor_names.push_back(arg.buffer.name());
    k.provenance = provenance(k, source);
  }
  return kernels;
}

}  // namespace ktune::tools
