// Defines RecordCheck: whether a record of the log is one this ktune can instantiate (template,
// arguments, workload key, target, config), with its verdicts cached.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "schedule_space/workload.h"
#include "tuning_db/record.h"

namespace ktune::tuning_db {

// The traits a task is created with for a target string. Throws Error (any kind) for a target this
// ktune cannot build for. tuning_db does not parse targets (codegen does, a layer above), so the
// program supplies this.
using TargetResolver = std::function<schedule_space::TargetTraits(const std::string& target)>;

// Decides whether the current ktune can instantiate a record: its template is registered, its
// arguments are accepted and give its workload key, its target parses to itself (canonical form),
// its config index lies in the space; and for a successful record (one that may be served as the
// best) its config is the config of that index and instantiates. A failed record keeps a config
// that may not instantiate (that may be why it failed).
// Thread-safe: verdicts are cached (per workload and target, and per config) under a mutex.
class RecordCheck {
 public:
  explicit RecordCheck(TargetResolver resolve);
  ~RecordCheck();

  // Returns "" when the record instantiates, else the reason (one line).
  std::string problem(const Record& record) const;

  // How many records problem() was asked about: the log's readers check only the candidates they
  // serve (best() one per call, not every record of the workload), which tests count here.
  int64_t records_asked() const { return asked_.load(); }

 private:
  struct TaskEntry;
  std::shared_ptr<const TaskEntry> task_of(const Record& record) const;

  TargetResolver resolve_;
  mutable std::mutex mu_;
  // By workload key + target: the task, or why there is none.
  mutable std::unordered_map<std::string, std::shared_ptr<const TaskEntry>> tasks_;
  // By workload key + target + config JSON: the verdict on a successful record's config.
  mutable std::unordered_map<std::string, std::string> configs_;
  mutable std::atomic<int64_t> asked_{0};
};

// The check Database::open uses when OpenOptions::record_check is not set: none until a program
// installs one (the ktune command does, with codegen's target parser). Thread-safe.
void set_default_record_check(std::shared_ptr<const RecordCheck> check);
std::shared_ptr<const RecordCheck> default_record_check();

}  // namespace ktune::tuning_db
