// Defines what the tests of the history look-ups share: records of a task's configs, logs of them,
// error kinds.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "deploy/history_best.h"
#include "schedule_space/config.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "tuning_db/database.h"
#include "tuning_db/record.h"

namespace ktune::deploy::testing {

inline const char* const kOldLlvm = "18.1.8";

// A successful record of config on task's target, timed at `seconds`, measured with LLVM `llvm`.
inline tuning_db::Record record_of(const schedule_space::Task& task,
                                   const schedule_space::Config& config, double seconds,
                                   const std::string& llvm = codegen::llvm_version()) {
  tuning_db::Record r;
  r.workload_key = task.workload_key();
  r.template_name = task.template_name();
  r.args = task.args_json();
  r.flop = task.flop();
  r.target = {task.target().key, llvm};
  r.device_key = "test";
  r.config_index = static_cast<int64_t>(config.index());
  r.config = config.to_json();
  r.costs = {seconds, seconds};
  r.all_cost = 0.1;
  r.tuner = "test";
  r.timestamp = 1;
  r.ktune_version = "0.1.0";
  return r;
}

// The first `n` valid configs of the task's space other than its fallback (distinct configs whose
// choice the tests can see).
inline std::vector<schedule_space::Config> other_configs(const schedule_space::Task& task,
                                                         size_t n) {
  std::vector<schedule_space::Config> out;
  for (uint64_t i = 0; i < task.space().size() && out.size() < n; ++i) {
    if (i != task.fallback_config().index() && task.space().is_valid(i))
      out.push_back(task.space().get(i));
  }
  return out;
}

// A tuning log at path holding records (created).
inline void write_log(const std::string& path, const std::vector<tuning_db::Record>& records) {
  auto db = tuning_db::Database::open(path);
  db.add(records);
}

// matmul MxNxK on the host.
inline schedule_space::Task matmul(int m, int n, int k) {
  return make_task("matmul",
                   {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(k)}});
}

// The kind of the ktune::Error f throws (a test failure, and kUnknown, when it throws none).
inline ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no ktune::Error thrown";
  return ErrorKind::kUnknown;
}

}  // namespace ktune::deploy::testing
