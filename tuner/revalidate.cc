// Revalidation after a toolchain change: the old fastest configs, measured again, logged beside.
#include "tuner/revalidate.h"

#include <algorithm>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "schedule_space/task.h"
#include "support/error.h"
#include "tuner/db_log.h"

namespace ktune::tuner {
namespace {

// Enough of the log's fastest records to find top_k of other toolchains among them.
constexpr int64_t kScanFactor = 8;

}  // namespace

std::vector<RevalidatedWorkload> revalidate(tuning_db::Database& db, Measurer& measurer,
                                            const schedule_space::TargetTraits& target,
                                            const RevalidateOptions& options) {
  std::vector<RevalidatedWorkload> out;
  std::set<std::string> seen;
  for (const tuning_db::WorkloadSummary& s : db.summaries()) {
    if (s.target.target != target.key || !seen.insert(s.workload_key).second) continue;
    const auto fastest = db.top_k(s.workload_key, tuning_db::TargetKey{target.key, ""},
                                  options.top_k * kScanFactor, tuning_db::RecordQuery{});
    std::set<int64_t> current;  // configs this toolchain measured already
    for (const auto& r :
         db.top_k(s.workload_key, tuning_db::TargetKey{target.key, options.llvm_version},
                  options.top_k * kScanFactor, tuning_db::RecordQuery{}))
      current.insert(r.config_index);
    std::vector<tuning_db::Record> old;
    for (const auto& r : fastest)
      if (r.target.llvm_version != options.llvm_version && !current.count(r.config_index) &&
          static_cast<int64_t>(old.size()) < options.top_k &&
          std::none_of(old.begin(), old.end(),
                       [&](const auto& o) { return o.config_index == r.config_index; }))
        old.push_back(r);
    if (old.empty()) continue;
    try {
      std::map<std::string, std::string> args;
      for (const auto& [k, v] : old.front().args.items())
        args[k] = v.is_string() ? v.get<std::string>() : v.dump();
      const schedule_space::Task task =
          schedule_space::Task::create(old.front().template_name, args, target);
      std::vector<MeasureInput> inputs;
      for (const auto& r : old)
        inputs.push_back({&task, task.space().get(task.space().index_of(
                                     schedule_space::Config::from_json(r.config)))});
      const std::vector<MeasureResult> results = measurer.measure(inputs);
      RecordContext context;
      context.target = {target.key, options.llvm_version};
      context.device_key = options.device_key;
      context.tuner = "revalidate";
      context.ktune_version = options.ktune_version;
      std::vector<tuning_db::Record> records;
      RevalidatedWorkload w;
      w.workload_key = s.workload_key;
      w.old_best_s = old.front().mean_cost();
      w.old_llvm_version = old.front().target.llvm_version;
      for (size_t i = 0; i < inputs.size(); ++i) {
        records.push_back(make_record(task, inputs[i].config, results[i], context, 0));
        ++w.remeasured;
        if (!results[i].ok()) {
          ++w.failed;
        } else if (w.new_best_s == 0 || results[i].mean_cost() < w.new_best_s) {
          w.new_best_s = results[i].mean_cost();
        }
      }
      db.add(records);  // after the measurements: a failed write loses nothing already logged
      out.push_back(std::move(w));
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kDatabase) throw;
      spdlog::warn("revalidate: {} skipped: {}", s.workload_key, e.what());
    }
  }
  return out;
}

}  // namespace ktune::tuner
