// Defines revalidate(): re-measures, with this toolchain, the best configs a tuning log holds
// from other toolchains, and records the new numbers beside the old ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule_space/workload.h"
#include "tuner/measure.h"
#include "tuning_db/database.h"

namespace ktune::tuner {

struct RevalidateOptions {
  int64_t top_k = 5;          // configs re-measured per workload (its fastest of other toolchains)
  std::string llvm_version;   // this toolchain's; records of any other version are re-measured
  std::string ktune_version;  // written into the new records
  std::string device_key;     // written into the new records ("" = unspecified)
};

struct RevalidatedWorkload {
  std::string workload_key;
  int64_t remeasured = 0;  // configs measured again (failures included)
  int64_t failed = 0;      // of those, how many failed with this toolchain
  double old_best_s = 0;   // fastest mean cost recorded by other toolchains (of those configs)
  double new_best_s = 0;   // fastest mean cost measured now; 0 when every one failed
  std::string old_llvm_version;  // the toolchain of the old fastest record
};

// For every workload of `target` (this machine's traits: its key is the records' target) with
// successful records of another LLVM version than options.llvm_version: its top_k configs
// among those (fastest first) that were not measured with this version yet are measured with
// `measurer` and added to the log as records of this version (tuner "revalidate"), so that
// best/build prefer them and the old numbers stay beside them. Workloads whose template or
// config this ktune cannot rebuild are skipped with a warning. Returns one entry per workload
// re-measured. Throws Error(kDatabase) when the log cannot be read or written.
std::vector<RevalidatedWorkload> revalidate(tuning_db::Database& db, Measurer& measurer,
                                            const schedule_space::TargetTraits& target,
                                            const RevalidateOptions& options);

}  // namespace ktune::tuner
