// RecordCheck: a record against the templates, spaces and targets of this ktune.
#include "tuning_db/record_check.h"

#include <exception>
#include <map>
#include <optional>

#include "schedule_space/task.h"
#include "support/error.h"

namespace ktune::tuning_db {
namespace {

// Beyond this many cached verdicts the cache starts again (a scan of a huge log stays bounded).
constexpr size_t kMaxCached = 100000;

std::shared_ptr<const RecordCheck>& default_slot() {
  static std::shared_ptr<const RecordCheck> check;
  return check;
}
std::mutex& default_mu() {
  static std::mutex mu;
  return mu;
}

// The record's arguments as Task::create takes them; nullopt for a shape it cannot hold.
std::optional<std::map<std::string, std::string>> args_of(const nlohmann::json& args) {
  if (!args.is_object()) return std::nullopt;
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : args.items()) {
    if (value.is_string()) {
      out[name] = value.get<std::string>();
    } else if (value.is_number_integer()) {
      out[name] = value.dump();
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

struct RecordCheck::TaskEntry {
  std::optional<schedule_space::Task> task;
  std::string problem;  // why there is no task
};

RecordCheck::RecordCheck(TargetResolver resolve) : resolve_(std::move(resolve)) {
  if (!resolve_) throw Error(ErrorKind::kInternal, "RecordCheck needs a target resolver");
}

RecordCheck::~RecordCheck() = default;

std::shared_ptr<const RecordCheck::TaskEntry> RecordCheck::task_of(const Record& r) const {
  const std::string key =
      r.workload_key + '\n' + r.target.target + '\n' + r.template_name + '\n' + r.args.dump();
  {
    std::lock_guard lock(mu_);
    if (auto it = tasks_.find(key); it != tasks_.end()) return it->second;
  }
  auto entry = std::make_shared<TaskEntry>();
  try {
    schedule_space::TargetTraits traits;
    try {
      traits = resolve_(r.target.target);
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kInvalidArgument, std::string("target: ") + e.what());
    }
    if (traits.key != r.target.target)
      throw Error(ErrorKind::kInvalidArgument,
                  "target is not in canonical form (this ktune writes '" + traits.key + "')");
    const auto args = args_of(r.args);
    if (!args)
      throw Error(ErrorKind::kInvalidArgument,
                  "arguments must be an object of strings and integers");
    auto task = schedule_space::Task::create(r.template_name, *args, traits);
    if (task.workload_key() != r.workload_key)
      throw Error(ErrorKind::kInvalidArgument,
                  "workload key does not match its template and arguments (they give '" +
                      task.workload_key() + "')");
    entry->task = std::move(task);
  } catch (const std::exception& e) {
    entry->problem = e.what();
  }
  std::lock_guard lock(mu_);
  if (tasks_.size() >= kMaxCached) tasks_.clear();
  return tasks_.emplace(key, std::move(entry)).first->second;
}

std::string RecordCheck::problem(const Record& r) const {
  ++asked_;
  const auto entry = task_of(r);
  if (!entry->task) return entry->problem;
  const schedule_space::Task& task = *entry->task;
  const uint64_t size = task.space().size();
  if (r.config_index < 0 || static_cast<uint64_t>(r.config_index) >= size)
    return "config index " + std::to_string(r.config_index) + " is outside the space [0, " +
           std::to_string(size) + ")";
  if (!r.ok()) return "";

  const std::string key = r.workload_key + '\n' + r.target.target + '\n' + r.template_name + '\n' +
                          r.args.dump() + '\n' + r.config.dump();
  {
    std::lock_guard lock(mu_);
    if (auto it = configs_.find(key); it != configs_.end()) return it->second;
  }
  std::string verdict;
  try {
    const auto config = schedule_space::Config::from_json(r.config);
    if (config.index() != static_cast<uint64_t>(r.config_index))
      throw Error(ErrorKind::kInvalidArgument, "config index " + std::to_string(config.index()) +
                                                   " differs from the record's " +
                                                   std::to_string(r.config_index));
    const uint64_t index = task.space().index_of(config);
    if (index != config.index())
      throw Error(ErrorKind::kInvalidArgument, "config entities are those of index " +
                                                   std::to_string(index) + ", not " +
                                                   std::to_string(config.index()));
    task.instantiate(config);
  } catch (const std::exception& e) {
    verdict = std::string("config: ") + e.what();
  }
  std::lock_guard lock(mu_);
  if (configs_.size() >= kMaxCached) configs_.clear();
  configs_.emplace(key, verdict);
  return verdict;
}

void set_default_record_check(std::shared_ptr<const RecordCheck> check) {
  std::lock_guard lock(default_mu());
  default_slot() = std::move(check);
}

std::shared_ptr<const RecordCheck> default_record_check() {
  std::lock_guard lock(default_mu());
  return default_slot();
}

}  // namespace ktune::tuning_db
