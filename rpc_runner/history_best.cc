// apply_history_best(): the best logged config of a task (or the nearest tuned one's, or the fallback), JIT-loaded.
#include "rpc_runner/history_best.h"

#include <mutex>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "rpc_runner/history_lookup.h"
#include "support/error.h"
#include "te/lower.h"

namespace ktune {

HistorySource HistorySource::log(std::string db_path) {
  if (db_path.empty()) throw Error(ErrorKind::kInvalidArgument, "HistorySource::log needs a tuning log path");
  HistorySource s;
  s.db_path_ = std::move(db_path);
  return s;
}

HistorySource HistorySource::server(rpc_runner::ServiceClientOptions options, std::string device_key) {
  if (options.server.empty()) throw Error(ErrorKind::kInvalidArgument, "HistorySource::server needs HOST:PORT");
  HistorySource s;
  s.server_ = std::move(options);
  s.device_key_ = std::move(device_key);
  return s;
}

std::string HistorySource::describe() const {
  return is_server() ? "tuning server " + server_.server : "tuning log " + db_path_;
}

schedule_space::Task make_task(const std::string& template_name, const std::map<std::string, std::string>& args,
                               const std::string& target) {
  return schedule_space::Task::create(template_name, args, rpc_runner::target_traits(target));
}

namespace {

// A JIT user may ask for the same workload at every call site; it hears about an untuned or
// stale config once per workload and target, not once per call.
bool first_warning_of(const std::string& workload_and_target) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard lock(mu);
  return warned.insert(workload_and_target).second;
}

// Where the config comes from, and the warnings that go with it.
struct Choice {
  schedule_space::Config config;
  AppliedKernel::Source source = AppliedKernel::Source::kFallback;
  std::optional<tuning_db::Record> record;
  std::string note;
  std::vector<std::string> warnings;
};

Choice choose(const HistorySource& from, const rpc_runner::Workload& w) {
  const schedule_space::Task& task = w.task;
  Choice c;
  std::optional<tuning_db::Record> best =
      from.is_server() ? rpc_runner::best_record(from.server_options(), w, from.device_key(), from.include_emulated)
                       : rpc_runner::best_record(from.db_path(), w, from.include_emulated);
  if (best) {
    c.config = schedule_space::Config::from_json(best->config);
    c.source = AppliedKernel::Source::kTuned;
    // A server's records come without their id (its log streams them as JSON lines).
    const std::string which = from.is_server() ? "the best record" : "record " + std::to_string(best->id);
    c.note = fmt::format("{} of {}: {:.2f} GFLOP/s, tuner {}, LLVM {}", which, from.describe(), best->gflops(),
                         best->tuner, best->target.llvm_version);
    if (auto warning = rpc_runner::toolchain_warning(*best); !warning.empty()) c.warnings.push_back(warning);
    if (auto warning = rpc_runner::emulated_warning(*best); !warning.empty()) c.warnings.push_back(warning);
    c.record = std::move(best);
    return c;
  }
  const std::string untuned =
      "no successful record of " + task.workload_key() + " for " + w.target.str() + " in " + from.describe();
  auto nearest = from.is_server()
                     ? rpc_runner::nearest_record(from.server_options(), w, from.device_key(), from.include_emulated)
                     : rpc_runner::nearest_record(from.db_path(), w, from.include_emulated);
  if (nearest) {
    c.config = nearest->config;
    c.source = AppliedKernel::Source::kNearest;
    c.note = fmt::format("nearest tuned workload {} (distance {:.2f}) in {}: its best config valid here, {:.2f} "
                         "GFLOP/s there",
                         nearest->record.workload_key, nearest->distance, from.describe(), nearest->record.gflops());
    c.warnings.push_back(untuned + ": took the config of the nearest tuned workload " + nearest->record.workload_key);
    if (auto warning = rpc_runner::emulated_warning(nearest->record); !warning.empty()) c.warnings.push_back(warning);
    c.record = std::move(nearest->record);
    return c;
  }
  c.config = task.fallback_config();
  c.source = AppliedKernel::Source::kFallback;
  c.note = "fallback: " + untuned + ", and no tuned workload of " + task.template_name() + " gives a valid config";
  c.warnings.push_back(c.note + " (untuned)");
  return c;
}

}  // namespace

AppliedKernel apply_history_best(const HistorySource& from, const schedule_space::Task& task) {
  codegen::Target target = codegen::Target::parse(task.target().key);
  if (!target.is_host_compatible())
    throw Error(ErrorKind::kUnsupported, "apply_history_best: the task's target '" + target.str() +
                                             "' cannot run in this process (a JIT runs host code only); "
                                             "`ktune build --target` compiles for it");
  const rpc_runner::Workload w{std::move(target), task};
  Choice c = choose(from, w);

  schedule_space::Instantiated inst;
  try {
    inst = task.instantiate(c.config);
  } catch (const Error& e) {
    if (!c.record) throw;
    throw Error(e.kind(), "the config of record " + std::to_string(c.record->id) + " of " + from.describe() +
                              " does not instantiate: " + e.what());
  }
  const te::LoweredFunc func =
      te::lower(inst.schedule, inst.args, rpc_runner::default_kernel_symbol(task.template_name()));
  codegen::Kernel kernel = codegen::Kernel::load(codegen::build(func, w.target));
  // Warned once the kernel exists, so that a failed call says one thing: its error.
  if (!c.warnings.empty() && first_warning_of(task.workload_key() + " on " + w.target.str()))
    for (const auto& warning : c.warnings) spdlog::warn("{}", warning);
  return AppliedKernel{std::move(kernel), std::move(c.config), c.source, std::move(c.record), std::move(c.note)};
}

}  // namespace ktune
