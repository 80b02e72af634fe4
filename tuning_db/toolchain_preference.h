// Declares top_k_preferring_toolchain(): the best records of a workload, those of one toolchain
// first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tuning_db/database.h"
#include "tuning_db/record.h"

namespace ktune::tuning_db {

// The k best records of the workload on `target` (top_k with `query`) measured with LLVM
// `llvm_version` when the log has any, else the k best of every toolchain. A config stays valid
// across toolchains but may run at another speed under another LLVM, so a build serves its own
// toolchain's records first and says when it serves an older one (the record carries its version).
// Local look-ups and the server's QueryBest both answer this way. Throws Error(kDatabase).
std::vector<Record> top_k_preferring_toolchain(Database& db, std::string_view workload_key,
                                               const std::string& target,
                                               const std::string& llvm_version, int64_t k,
                                               const RecordQuery& query);

}  // namespace ktune::tuning_db
