// Records of the tuning log from measurements, and measurements from records.
#include "tuner/db_log.h"

#include <memory>
#include <unordered_set>

#include <spdlog/spdlog.h>

namespace ktune::tuner {

tuning_db::Record make_record(const schedule_space::Task& task,
                              const schedule_space::Config& config, const MeasureResult& result,
                              const RecordContext& context, int64_t batch) {
  tuning_db::Record r;
  r.workload_key = task.workload_key();
  r.template_name = task.template_name();
  r.args = task.args_json();
  r.flop = task.flop();
  r.target = context.target;
  r.device_key = context.device_key;
  r.config_index = static_cast<int64_t>(config.index());
  r.config = config.to_json();
  if (result.ok()) r.costs = result.costs;
  r.all_cost = result.build_s + result.run_s;
  r.error = result.ok() ? std::nullopt
                        : std::optional<ErrorKind>(result.error.value_or(ErrorKind::kUnknown));
  r.error_message = result.error_message;
  r.tuner = context.tuner;
  r.batch = batch;
  r.timestamp = static_cast<double>(result.timestamp);
  r.ktune_version = context.ktune_version;
  r.run_id = context.run_id;
  r.emulated = result.emulated || context.emulated;
  r.client = context.client;
  r.worker = result.worker;
  return r;
}

bool log_fallback(tuning_db::Database& db, const schedule_space::Task& task,
                  const MeasureResult& result, RecordContext context) {
  const schedule_space::Config config = task.fallback_config();
  context.tuner = "fallback";
  context.run_id = 0;
  const bool emulated = result.emulated || context.emulated;
  if (db.has(task.workload_key(), context.target, static_cast<int64_t>(config.index()), emulated))
    return false;
  db.add({make_record(task, config, result, context, 0)});
  return true;
}

Callback database_callback(tuning_db::Database& db, const schedule_space::Task& task,
                           const RecordContext& context) {
  auto batch = std::make_shared<int64_t>(0);
  return [&db, &task, context, batch](const std::vector<MeasureInput>& inputs,
                                      const std::vector<MeasureResult>& results) {
    std::vector<tuning_db::Record> records;
    records.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      records.push_back(make_record(task, inputs[i].config, results[i], context, *batch));
    db.add(records);
    ++*batch;
  };
}

std::vector<PastMeasurement> load_past_measurements(tuning_db::Database& db,
                                                    const schedule_space::Task& task,
                                                    const tuning_db::TargetKey& target,
                                                    bool emulated) {
  std::vector<PastMeasurement> out;
  std::unordered_set<uint64_t> seen;
  const std::string key = task.workload_key();
  const auto& space = task.space();
  size_t skipped = 0;
  for (const auto& record : db.history(task.template_name(), target, 0, emulated)) {
    if (record.workload_key != key) continue;
    uint64_t index = 0;
    schedule_space::Config config;
    try {
      // The stored entities are the truth; the index must point at the same entities here.
      config = space.get(space.index_of(schedule_space::Config::from_json(record.config)));
      index = config.index();
    } catch (const Error&) {
      ++skipped;
      continue;
    }
    if (!seen.insert(index).second) continue;
    MeasureResult result;
    // A re-timed record counts with its re-timed median, the figure `ktune best` and a build
    // serve: its first timing would rank an old, flattering figure as the resumed run's best.
    result.costs = !record.ok()                   ? std::vector<double>{}
                   : record.retimed_costs.empty() ? record.costs
                                                  : std::vector<double>{record.cost()};
    result.error = record.error;
    if (record.ok() && record.costs.empty()) result.error = ErrorKind::kUnknown;
    result.error_message = record.error_message;
    result.timestamp = static_cast<int64_t>(record.timestamp);
    result.emulated = record.emulated;
    out.push_back({std::move(config), std::move(result)});
  }
  if (skipped > 0)
    spdlog::warn("{} records of {} do not fit the current config space; ignored", skipped, key);
  return out;
}

}  // namespace ktune::tuner
