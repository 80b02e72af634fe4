// The look-up that serves a toolchain's own records first.
#include "tuning_db/toolchain_preference.h"

namespace ktune::tuning_db {

std::vector<Record> top_k_preferring_toolchain(Database& db, std::string_view workload_key,
                                               const std::string& target,
                                               const std::string& llvm_version, int64_t k,
                                               const RecordQuery& query) {
  auto current = db.top_k(workload_key, TargetKey{target, llvm_version}, k, query);
  if (!current.empty()) return current;
  return db.top_k(workload_key, TargetKey{target, ""}, k, query);
}

}  // namespace ktune::tuning_db
