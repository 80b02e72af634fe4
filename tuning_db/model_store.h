// Defines ModelStore, the cost models saved in a tuning log, and ModelInfo / SavedModel.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tuning_db/database.h"

namespace ktune::tuning_db {

// A saved cost model is found by (name, scope, target); scope is a workload key or a
// template name, whichever the model was trained for.
struct ModelInfo {
  std::string name;   // e.g. "xgb-rank"
  std::string scope;  // workload key or template name
  TargetKey target;
  nlohmann::json metadata = nlohmann::json::object();  // features, rounds, training size...
  double created_at = 0;                               // unix seconds; set by save
};

struct SavedModel {
  ModelInfo info;
  std::vector<uint8_t> blob;
};

// The models table of a log, on the Database's connection.
// Thread-safety: that of its Database (one thread). The Database must outlive the store.
class ModelStore {
 public:
  explicit ModelStore(Database& db);

  // Stores (or replaces) a cost model. Throws Error(kInvalidArgument) for an empty name or
  // scope, Error(kDatabase).
  void save(const ModelInfo& info, std::span<const uint8_t> blob);
  // The newest model saved under (name, scope, target), or nullopt. Throws Error(kDatabase).
  std::optional<SavedModel> load(std::string_view name, std::string_view scope,
                                 const TargetKey& target);

 private:
  Database::Impl& impl_;
};

}  // namespace ktune::tuning_db
