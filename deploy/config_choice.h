// Declares choose_config(): the config a workload gets from a tuning log or server (tuned, nearest
// or fallback).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "deploy/history_lookup.h"
#include "rpc_runner/client/service_client.h"
#include "schedule_space/config.h"
#include "tuning_db/nearest.h"
#include "tuning_db/record.h"

namespace ktune {

// Where records come from: a tuning log file, a tuning server's log (QueryBest), or none (every
// workload on its fallback config, asked for by name: a log that does not exist is an error).
struct HistorySource {
  // A tuning log (SQLite) on this machine; opened read-only, never created.
  // Throws Error(kInvalidArgument) for an empty path.
  static HistorySource log(std::string db_path);
  // A tuning server's log. device_key: only records measured on devices of this key ("" = any).
  // Throws Error(kInvalidArgument) for an empty HOST:PORT.
  static HistorySource server(rpc_runner::ServiceClientOptions options,
                              std::string device_key = "");
  // No records: every workload untuned, on its template's fallback config (`--untuned`).
  static HistorySource untuned();

  bool include_emulated = false;  // records of emulated devices are eligible too

  bool is_server() const { return !server_.server.empty(); }
  bool is_untuned() const { return !is_server() && db_path_.empty(); }
  const std::string& db_path() const { return db_path_; }
  const rpc_runner::ServiceClientOptions& server_options() const { return server_; }
  const std::string& device_key() const { return device_key_; }
  // "tuning log PATH", "tuning server HOST:PORT" or "no tuning log (--untuned)", for messages.
  std::string describe() const;

 private:
  std::string db_path_;
  rpc_runner::ServiceClientOptions server_;
  std::string device_key_;
};

}  // namespace ktune

namespace ktune::deploy {

// Throws Error(kNotFound) naming the log and how to get one when `db_path` does not exist: a log
// that is not there is a mistake (a typo, another folder), never "build untuned" in silence.
void require_tuning_log(const std::string& db_path);

// How choose_config looks. The defaults suit a program that needs a kernel whatever the log holds.
struct ChoiceOptions {
  // Without a record of the workload, look for the nearest tuned workload. false goes straight to
  // the fallback: for a caller that refuses untuned workloads anyway (the server's look-up streams
  // its whole log).
  bool nearest = true;
  // Non-empty: when a log (not a server) holds only emulated records of the workload and emulated
  // ones were not asked for, the untuned reason says so and names this switch ("--emulated").
  std::string emulated_switch;
};

// Which config a workload gets, and where it came from.
struct ConfigChoice {
  // kTuned: the best record of this very workload. kNearest: the best config of the nearest tuned
  // workload of the same template and target that is valid here. kFallback: the template's
  // fallback config (nothing tuned, or nothing near is valid).
  enum class Source { kTuned, kNearest, kFallback };

  Source source = Source::kFallback;
  schedule_space::Config config;
  std::optional<tuning_db::Record> best;           // with kTuned: the record served
  std::optional<tuning_db::NearestTuned> nearest;  // with kNearest: the nearest workload's record
  // Without kTuned: why, in one clause ("no successful record of KEY for this target in PATH",
  // "... on HOST:PORT", "built untuned, without a tuning log").
  std::string untuned_reason;
  // Lines for stderr about the record served: timed on an emulated device (tuned or nearest),
  // measured with another LLVM (tuned only: a nearest config is untuned anyway). Empty for the
  // fallback. Untuned choices are the caller's to word (it knows its switches and its audience).
  std::vector<std::string> warnings;

  // The record whose config was taken (best, or the nearest workload's), or nullptr.
  const tuning_db::Record* record() const;
  // kTuned, and the best record is the template's fallback config (measured, and no trial beat
  // it): it runs what an untuned build would.
  bool on_fallback_config() const;
};

// The best record of the workload in `from` (this LLVM's records first, as best_record), else the
// nearest tuned workload's config valid for it (nearest_record), else the template's fallback.
// Returns the choice; a record's config is parsed, not instantiated (the caller builds it).
// HistorySource::untuned() gives the fallback without looking anywhere.
// Throws what best_record and nearest_record throw: Error(kNotFound) for a log that does not
// exist, Error(kDatabase) for a file that is not a ktune log, the
// client's errors for a server; Error(kIo) when the log's path cannot be looked at.
ConfigChoice choose_config(const HistorySource& from, const Workload& workload,
                           const ChoiceOptions& options = {});

}  // namespace ktune::deploy
