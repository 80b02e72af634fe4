// apply_history_best(): the best logged config of a task (or the nearest tuned one's, or the
// fallback), JIT-loaded.
#include "deploy/history_best.h"

#include <mutex>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "deploy/history_lookup.h"
#include "support/error.h"
#include "te/lower.h"

namespace ktune {

schedule_space::Task make_task(const std::string& template_name,
                               const std::map<std::string, std::string>& args,
                               const std::string& target) {
  return schedule_space::Task::create(template_name, args, deploy::target_traits(target));
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

// What a JIT user is told about a choice: the AppliedKernel's note, and the warnings.
struct Told {
  std::string note;
  std::vector<std::string> warnings;
};

Told tell(const HistorySource& from, const deploy::Workload& w,
          const deploy::ConfigChoice& choice) {
  const schedule_space::Task& task = w.task;
  Told t;
  if (const auto& best = choice.best) {
    // A server's records come without their id (its log streams them as JSON lines).
    const std::string which =
        best->id > 0 ? "record " + std::to_string(best->id) : "the best record";
    t.note = fmt::format("{} of {}: {:.2f} GFLOP/s, tuner {}, LLVM {}", which, from.describe(),
                         best->gflops(), best->tuner, best->target.llvm_version);
    t.warnings = choice.warnings;
    return t;
  }
  const std::string untuned = "no successful record of " + task.workload_key() + " for " +
                              w.target.str() + " in " + from.describe();
  if (const auto& nearest = choice.nearest) {
    t.note = fmt::format(
        "nearest tuned workload {} (distance {:.2f}) in {}: its best config valid here, {:.2f} "
        "GFLOP/s there",
        nearest->record.workload_key, nearest->distance, from.describe(), nearest->record.gflops());
    t.warnings.push_back(untuned + ": took the config of the nearest tuned workload " +
                         nearest->record.workload_key);
  } else {
    t.note = "fallback: " + untuned + ", and no tuned workload of " + task.template_name() +
             " gives a valid config";
    t.warnings.push_back(t.note + " (untuned)");
  }
  t.warnings.insert(t.warnings.end(), choice.warnings.begin(), choice.warnings.end());
  return t;
}

}  // namespace

AppliedKernel apply_history_best(const HistorySource& from, const schedule_space::Task& task) {
  codegen::Target target = codegen::Target::parse(task.target().key);
  if (!target.is_host_compatible())
    throw Error(ErrorKind::kUnsupported,
                "apply_history_best: the task's target '" + target.str() +
                    "' cannot run in this process (a JIT runs host code only); "
                    "`ktune build --target` compiles for it");
  const deploy::Workload w{std::move(target), task};
  deploy::ConfigChoice choice = deploy::choose_config(from, w);
  Told told = tell(from, w, choice);
  const tuning_db::Record* record = choice.record();

  schedule_space::Instantiated inst;
  try {
    inst = task.instantiate(choice.config);
  } catch (const Error& e) {
    if (!record) throw;
    throw Error(e.kind(), "the config of record " + std::to_string(record->id) + " of " +
                              from.describe() + " does not instantiate: " + e.what());
  }
  const te::LoweredFunc func =
      te::lower(inst.schedule, inst.args, deploy::default_kernel_symbol(task.template_name()));
  codegen::Kernel kernel = codegen::Kernel::load(codegen::build(func, w.target));
  // Warned once the kernel exists, so that a failed call says one thing: its error.
  if (!told.warnings.empty() && first_warning_of(task.workload_key() + " on " + w.target.str()))
    for (const auto& warning : told.warnings) spdlog::warn("{}", warning);
  std::optional<tuning_db::Record> served;
  if (record) served = *record;
  return AppliedKernel{std::move(kernel), std::move(choice.config), choice.source,
                       std::move(served), std::move(told.note)};
}

}  // namespace ktune
