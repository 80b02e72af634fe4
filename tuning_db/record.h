// Defines Record, one measurement of the tuning log, and its JSON-lines form (AutoTVM-like).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "support/error.h"

namespace ktune::tuning_db {

// Newest version of the JSON record line that from_json reads (AutoTVM writes 0.2). Version 2
// adds meta.emulated. to_json_line writes a real record as version 1 (unchanged, so older ktune
// builds still import it) and an emulated one as version 2, so that an older build, which does
// not know the flag, refuses the line instead of taking an emulated timing for a real one.
inline constexpr int kRecordLineVersion = 2;

// A timing whose figures spread more than this, (max - min) / median, is flagged noisy: its
// figure may be off by as much, so a ranking that rests on it is not to be trusted blindly.
inline constexpr double kNoisySpread = 0.25;

// Whether timings from `min` to `max` around `median` spread more than kNoisySpread.
inline bool noisy_range(double min, double max, double median) {
  return median > 0 && (max - min) / median > kNoisySpread;
}

// (max - min) / median of `timings`; 0 for fewer than two (or a median of 0).
double spread(const std::vector<double>& timings);
// The median of `timings` (the mean of the middle two for an even count); +inf when empty.
double median(std::vector<double> timings);

// Two timings of one config on devices of one key (one kind of hardware) that differ by more than
// this factor disagree: one of the devices is not what it says, or was not timing what it was
// sent. Timing noise on a shared machine stays well inside it (a re-timing's rounds spread
// kNoisySpread before they are flagged).
inline constexpr double kDisputeFactor = 2;

// Whether timings a and b (seconds, > 0) disagree: one is more than kDisputeFactor times the other.
inline bool disagree(double a, double b) {
  return a > 0 && b > 0 && (a > kDisputeFactor * b || b > kDisputeFactor * a);
}

// The target a record was measured for: its canonical string and the LLVM version of the
// toolchain that compiled it, so that records of another toolchain are told apart.
struct TargetKey {
  std::string target;        // canonical target string, e.g. "llvm -mtriple=x86_64-linux-gnu"
  std::string llvm_version;  // e.g. "19.1.7"; in a query, "" matches any toolchain

  bool operator==(const TargetKey&) const = default;
};

// One measurement: a config of a workload timed on a device, or the typed error it gave.
// Plain data: the tuning_db does not depend on schedule_space's types.
struct Record {
  int64_t id = 0;  // assigned by the database; ignored by add()

  std::string workload_key;   // e.g. "matmul(M=1024,N=1024,K=1024,dtype=float32)"
  std::string template_name;  // e.g. "matmul"
  nlohmann::json args = nlohmann::json::object();  // the template's arguments
  double flop = 0;  // FLOPs of one run of the workload; 0 = unknown (no GFLOP/s)
  TargetKey target;
  std::string device_key;  // e.g. "x86-avx512"; "" = unspecified

  int64_t config_index = 0;
  nlohmann::json config = nlohmann::json::object();  // {"index": N, "entity": [[n, k, v]...]}

  std::vector<double> costs;  // seconds per run, one per repeat; empty for a failure
  double all_cost = 0;        // wall seconds the whole measurement took (build + run)
  // nullopt = success. Otherwise the kind (to_string(ErrorKind) is what is stored).
  std::optional<ErrorKind> error;
  std::string error_message;

  std::string tuner;          // e.g. "xgb", "random"
  int64_t batch = 0;          // the tuner's batch number within its run
  double timestamp = 0;       // unix seconds when measured
  std::string ktune_version;  // ktune version that measured it
  int64_t run_id = 0;         // Database::begin_run id; 0 = none (not exported: ids are local)
  // Measured on an emulated device (e.g. an AArch64 device program under qemu-aarch64-static):
  // the timings say nothing about the real device, so best/top_k pass over the record unless
  // asked (RecordQuery::include_emulated), and resume and transfer keep real and emulated apart.
  bool emulated = false;
  // Who and what measured it on a tuning server: the client whose job it was (its name in the
  // server's token file) and the worker id of the device (e.g. "w3"); "" = not known (a local
  // run, a server without named clients, a record of an older log).
  std::string client;
  std::string worker;
  // Seconds, one per round of the re-timing at the end of a tuning run (TuningSession: the run's
  // best configs timed again, interleaved round-robin); empty = never re-timed. The first timing
  // (`costs`) stays as measured; the re-timing's median is the record's figure (cost()), since a
  // config that came out on top of many may owe part of its lead to a lucky timing.
  std::vector<double> retimed_costs;
  // Another device of its key (another worker) timed its config and disagreed (disagree()) with
  // its figure: one of the two is wrong and the log cannot tell which, so best/top_k pass over it
  // (unless RecordQuery::include_disputed) until a re-timing on a device other than its own
  // agrees. Its figure stays its own device's: a disagreeing device never rewrites it.
  bool disputed = false;

  bool ok() const { return !error.has_value(); }
  // Mean of `costs` (the first timing); returns +inf when there is none (a failure).
  double mean_cost() const;
  // The record's figure, what best/top_k rank by: the median of retimed_costs when re-timed, else
  // mean_cost(); +inf for a failure.
  double cost() const;
  // Whether the timings behind cost() (retimed_costs when re-timed, else costs) spread more than
  // kNoisySpread.
  bool noisy() const;
  // flop / cost / 1e9; returns 0 when flop is unknown or the record failed.
  double gflops() const;
};

// Returns the record as one JSON object in the AutoTVM-like layout:
// {"input": [target, workload_key, args], "config": {"index", "entity"},
//  "result": [costs, error, all_cost, timestamp], "version": 1,
//  "meta": {"template", "llvm", "device", "flop", "error_msg", "tuner", "batch", "ktune"}}
// where error is "" for success, else to_string(ErrorKind). An emulated record is written as
// version 2 with "meta": {..., "emulated": true}; a real one as version 1 without the field.
// meta.client and meta.worker are written when known (older builds ignore them). A re-timed
// record adds "meta": {..., "retimed": [seconds per round]} (an older build ignores it and ranks
// by the first timing), a noisy one "meta": {..., "noisy": true} (informational: from_json
// computes it again from the timings) and a disputed one "meta": {..., "disputed": true} (an
// older build ignores it and may serve the record).
nlohmann::json to_json(const Record& record);
// The same, serialized on one line (no trailing newline).
std::string to_json_line(const Record& record);
// A record as the commands print it (`ktune best --json`, `ktune db best/top --json`): to_json
// with the log's id (none for a record a server sent), mean_cost_s (Record::cost(), the figure best
// ranks by: a re-timing's median when re-timed), gflops and the emulated, retimed, noisy and
// disputed flags.
nlohmann::json to_report_json(const Record& record);
// Parses one record object (version 1 or 2; meta.emulated, a boolean, absent = false;
// meta.client and meta.worker, strings, absent = ""; meta.retimed, an array of non-negative
// numbers, absent = not re-timed; meta.disputed, a boolean, absent = false).
// Returns the record; throws Error(kInvalidArgument) naming the first field that is missing or
// of the wrong type.
Record from_json(const nlohmann::json& line);
// Parses one JSON line. Throws Error(kInvalidArgument) for bad JSON or a bad record.
Record from_json_line(const std::string& line);

}  // namespace ktune::tuning_db
