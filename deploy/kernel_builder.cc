// build_kernels(): the look-up and compilation behind `ktune build`, for one workload or a manifest
// of many.
#include "deploy/kernel_builder.h"

#include <spdlog/spdlog.h>

#include <iomanip>
#include <set>
#include <sstream>

#include "codegen/codegen_llvm.h"
#include "support/error.h"
#include "support/version.h"
#include "te/lower.h"

namespace ktune::deploy {
namespace {

using deploy::resolve_workload;

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

// The records of the source, as choose_config reads them.
HistorySource history_of(const KernelSource& s) {
  HistorySource from = s.untuned                 ? HistorySource::untuned()
                       : s.server.server.empty() ? HistorySource::log(s.db)
                                                 : HistorySource::server(s.server, s.device_key);
  from.include_emulated = s.emulated;
  return from;
}

// Chooses k's config; require_tuned refuses anything but a record of the workload, before the
// nearest look-up (a server's streams its whole log).
void look_up(BuiltKernel& k, const HistorySource& from) {
  deploy::ChoiceOptions options;
  options.nearest = !k.request.require_tuned;
  options.emulated_switch = "--emulated";
  k.choice = deploy::choose_config(from, k.workload, options);
  if (!k.choice.best && k.request.require_tuned)
    throw Error(ErrorKind::kNotFound, k.choice.untuned_reason + " (--require-tuned)");
  // Only a served record is warned about here; an untuned one (nearest or fallback) is run_build's
  // to warn about, once the files are written.
  const std::string who = k.request.label.empty() ? "" : k.request.label + ": ";
  if (k.choice.best)
    for (const std::string& warning : k.choice.warnings) spdlog::warn("{}{}", who, warning);
}

KernelProvenance provenance(const BuiltKernel& k, const HistorySource& from) {
  KernelProvenance p;
  p.workload_key = k.workload.task.workload_key();
  p.target = k.artifact.target;
  p.llvm_version = k.artifact.llvm_version;
  p.config_json = k.choice.config.to_json_string();
  p.ktune_version = kVersion;
  const std::string log = from.describe();
  if (k.choice.best) {
    const tuning_db::Record& b = *k.choice.best;
    // A server's answer carries no record id (0): the record is named by its figures.
    p.source = log + (b.id > 0 ? ", record " + std::to_string(b.id) : "") + ": " +
               fixed(b.gflops(), 2) + " GFLOP/s (" + fixed(b.cost() * 1e3, 4) + " ms), tuner " +
               b.tuner + ", measured with LLVM " + b.target.llvm_version +
               (b.emulated ? ", on an EMULATED device (" + b.device_key + ")" : "");
  } else if (k.choice.nearest) {
    const tuning_db::NearestTuned& n = *k.choice.nearest;
    p.source = "nearest tuned workload " + n.record.workload_key + " (distance " +
               fixed(n.distance, 2) + "), " + log +
               (n.record.id > 0 ? ", record " + std::to_string(n.record.id) : "") + ": " +
               fixed(n.record.gflops(), 2) + " GFLOP/s there; this shape is untuned (" +
               k.choice.untuned_reason + ")";
  } else {
    p.source = "fallback, untuned (" + k.choice.untuned_reason + ")";
  }
  return p;
}

}  // namespace

std::string BuiltKernel::config_source() const {
  switch (choice.source) {
    case deploy::ConfigChoice::Source::kTuned:
      return "tuned";
    case deploy::ConfigChoice::Source::kNearest:
      return "nearest";
    case deploy::ConfigChoice::Source::kFallback:
      break;
  }
  return "fallback";
}

std::vector<BuiltKernel> build_kernels(const std::vector<KernelRequest>& requests,
                                       const KernelSource& source) {
  if (requests.empty()) throw Error(ErrorKind::kInvalidArgument, "no kernel to build");
  // Every entry is checked before any log is read or anything compiled.
  std::vector<BuiltKernel> kernels;
  std::set<std::string> names;
  // Over a server with a device key, "host" means the key's devices' target.
  const std::string target = device_key_target(source.server, source.device_key, source.target);
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
      kernels.emplace_back(r, resolve_workload(r.template_name, r.args, target));
    });
  }
  if (source.server.server.empty() && !source.device_key.empty())
    throw Error(ErrorKind::kInvalidArgument, "--device-key needs --server");
  if (source.untuned && !source.server.server.empty())
    throw Error(ErrorKind::kInvalidArgument, "--untuned reads no log: give no --server");
  if (!source.untuned && source.server.server.empty()) {
    if (source.db.empty())
      throw Error(ErrorKind::kInvalidArgument, "--db needs a path (or --server HOST:PORT)");
    require_tuning_log(source.db);  // once for all kernels, before anything is compiled
  }
  const HistorySource from = history_of(source);

  std::vector<te::LoweredFunc> funcs;
  for (BuiltKernel& k : kernels) {
    labelled(k.request, [&] {
      look_up(k, from);
      const deploy::ConfigChoice& c = k.choice;
      const auto inst = instantiate(k.workload.task, c.config, c.best ? c.best->id : -1);
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
    k.provenance = provenance(k, from);
  }
  return kernels;
}

}  // namespace ktune::deploy
