// Defines RunStore, the tuning runs of a log and their per-batch model quality (RunInfo, RunRow,
// BatchQuality).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tuning_db/database.h"

namespace ktune::tuning_db {

// A tuning run, for model-quality telemetry.
struct RunInfo {
  std::string tuner;
  std::string workload_key;
  std::string target;
  nlohmann::json options = nlohmann::json::object();
};

// A tuning run as stored: what begin got, and when it started and finished.
struct RunRow {
  int64_t id = 0;
  RunInfo info;
  double started_at = 0;              // unix seconds
  std::optional<double> finished_at;  // nullopt while running (or when its process died)
};

struct BatchQuality {
  int64_t batch = 0;
  int64_t records = 0;
  std::optional<double> rank_correlation;  // predicted vs measured; nullopt before a model
};

// The runs and run_batches tables of a log, on the Database's connection.
// Thread-safety: that of its Database (one thread). The Database must outlive the store.
class RunStore {
 public:
  explicit RunStore(Database& db);

  // Starts a tuning run; returns its id, for Record::run_id and add_batch_quality.
  // Throws Error(kDatabase).
  int64_t begin(const RunInfo& run);
  // Marks a run finished. Throws Error(kNotFound) for an unknown id.
  void finish(int64_t run_id);
  // Records (or replaces) a batch's model quality. Throws Error(kNotFound) for an unknown run.
  void add_batch_quality(int64_t run_id, const BatchQuality& quality);
  // A run's batches in order. Throws Error(kDatabase).
  std::vector<BatchQuality> batch_quality(int64_t run_id);
  // Every run, by id. Throws Error(kDatabase).
  std::vector<RunRow> all();
  // How many records carry this run id (a run's measured trials). Throws Error(kDatabase).
  int64_t count_records(int64_t run_id);

 private:
  Database::Impl& impl_;
};

}  // namespace ktune::tuning_db
