// Defines StepThreadsStore, the per-step thread counts of built models kept in a tuning log
// (StepThreadsRow, StepThreadsStep).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tuning_db/database.h"

namespace ktune::tuning_db {

// One step of a built model as measured: its layer, the threads it was given, and its medians
// at the count measured for and at one thread.
struct StepThreadsStep {
  std::string layer;
  int max_threads = 0;  // 0: every thread of the run
  double all_s = 0;     // at the row's thread count
  double one_s = 0;     // at one thread
};

// The thread counts chosen for a model's steps, for one target and one thread count.
struct StepThreadsRow {
  std::string model_key;               // the model: its graph and input shapes (deploy::model_key)
  std::string target;                  // the target string it was built for
  int threads = 0;                     // the run's thread count the steps were measured at (> 1)
  std::vector<StepThreadsStep> steps;  // every step of the plan, in order
  // End to end medians of the model with every step at `threads` and with the caps.
  double uncapped_s = 0, capped_s = 0;
  double measured_at = 0;  // unix seconds; set by save
};

// The step_threads table of a log, on the Database's connection.
// Thread-safety: that of its Database (one thread). The Database must outlive the store.
class StepThreadsStore {
 public:
  explicit StepThreadsStore(Database& db);

  // Stores a choice, replacing the one of the same model, target and thread count. Throws
  // Error(kInvalidArgument) for an empty model key or target or threads < 2, Error(kDatabase).
  void save(const StepThreadsRow& row);
  // The choice measured at `threads` for the model and target, or nullopt; with threads 0, the
  // one measured at the most threads. Throws Error(kDatabase).
  std::optional<StepThreadsRow> find(const std::string& model_key, const std::string& target,
                                     int threads = 0);

 private:
  Database::Impl& impl_;
};

}  // namespace ktune::tuning_db
