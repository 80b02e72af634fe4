// Defines nearest_tuned(): for a workload nobody tuned, the best config of the nearest tuned
// workload of its template and target that is valid for it (TVM's "fallback from a similar
// workload", ranked by a documented distance on the arguments).
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "schedule_space/config.h"
#include "schedule_space/task.h"
#include "tuning_db/database.h"

namespace ktune::tuning_db {

// The distance between the arguments of two workloads of one template: the sum over integer
// arguments of |log2(a) - log2(b)| (one dimension twice as large is 1 away), on a log scale
// because a tile that suits 512 suits 480 far better than it suits 64. Infinite when another
// argument (dtype, layout, epilogue) differs or an argument is missing on one side.
double workload_distance(const nlohmann::json& a, const nlohmann::json& b);

struct NearestTuned {
  Record record;                  // the record whose config is taken (of the other workload)
  schedule_space::Config config;  // that config, as an index of the task's own space
  double distance = 0;            // workload_distance of the two workloads' arguments
  int adapted = 0;                // knobs whose value this shape lacks (the nearest one taken)
};

// Among the workloads of the task's template with successful records on `target` (as `query`
// admits: device key, emulated records), nearest first (ties: by workload key), the first whose
// best records (up to 5 each, fastest first) give a config valid for `task`. A record's config
// is carried over knob by knob: a value the task's space has is kept; a split whose factors
// this shape does not offer takes the candidate with the nearest factors (log scale, as
// AutoTVM's fallback_split); another missing value takes the fallback config's; a split that
// divided the tuned shape's axis is kept dividing (the nearest dividing factors, or the record is
// passed over), because a tuned tile that leaves a tail here is not what was measured. The result
// must satisfy the space's constraints and instantiate. Records of the task's own workload are not
// considered (ask best() first). nullopt when no config is valid.
// Throws Error(kDatabase) for an unreadable log.
std::optional<NearestTuned> nearest_tuned(Database& db, const schedule_space::Task& task,
                                          const TargetKey& target, const RecordQuery& query = {});

}  // namespace ktune::tuning_db
