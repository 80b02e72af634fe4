// Defines Database::Impl (private to tuning_db): the connection, cached statements and the
// helpers shared by database.cc (records, queries) and database_io.cc (import/export, models).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tuning_db/database.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {

// The columns read_record expects, and the join that provides them with records as the
// outer loop (CROSS JOIN fixes SQLite's join order, so the records indexes drive look-ups).
inline constexpr std::string_view kRecordColumns =
    "SELECT r.id, w.key, w.template, w.args, w.flop, t.target, t.llvm_version, d.key, "
    "r.config_index, r.config, r.costs, r.all_cost, r.error_kind, r.error_msg, r.tuner, "
    "r.batch, r.measured_at, r.ktune_version, r.run_id, r.emulated, r.client, r.worker, "
    "r.retimed_costs, r.disputed "
    "FROM records r CROSS JOIN workloads w CROSS JOIN targets t CROSS JOIN devices d "
    "WHERE w.id = r.workload_id AND t.id = r.target_id AND d.id = r.device_id ";

// Unix time in seconds.
double now_seconds();

// Throws Error(kInvalidArgument) describing the first problem of a record to be added.
void validate(const Record& record);

struct Database::Impl {
  sql::Connection conn;
  int opened_version = 0;
  // Whether records have the emulated column (schema 5). A log of an older schema opened
  // read-only has not: use() then reads `r.emulated` as 0, since every record of it is real.
  bool has_emulated = true;
  // Whether records have the client and worker columns (schema 6); when not, use() reads
  // `r.client` and `r.worker` as ''.
  bool has_tenants = true;
  // Whether records have the re-timing columns (schema 7). Without them use() reads
  // `r.retimed_costs` as '[]' and `r.noisy` as 0: no record of such a log was re-timed or flagged.
  bool has_retimed = true;
  // Whether records have the disputed column (schema 9); when not, use() reads `r.disputed` as 0.
  bool has_disputed = true;
  std::shared_ptr<const RecordCheck> record_check;  // null: records are not checked
  std::map<std::string, std::unique_ptr<sql::Statement>, std::less<>> statements;

  // A cached prepared statement, reset when the use ends (releasing its read snapshot).
  class Use {
   public:
    explicit Use(sql::Statement& stmt) : stmt_(stmt) {}
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    ~Use() { stmt_.reset(); }
    sql::Statement* operator->() { return &stmt_; }
    sql::Statement& operator*() { return stmt_; }

   private:
    sql::Statement& stmt_;
  };
  // Returns the cached statement for `sql`, preparing it on first use. Statements name the
  // records table `r` wherever they read r.emulated, r.client, r.worker, r.retimed_costs,
  // r.noisy or r.disputed (see has_emulated, has_tenants, has_retimed, has_disputed).
  Use use(std::string_view sql);

  std::optional<int64_t> workload_id(std::string_view key);
  std::optional<int64_t> device_id(std::string_view key);
  // Ids of the targets matching `target` (every toolchain when llvm_version is "").
  std::vector<int64_t> target_ids(const TargetKey& target);
  // Ids for a record being written, created when missing. Inside a write transaction.
  // ensure_workload throws Error(kInvalidArgument) when the key is known under another template.
  int64_t ensure_workload(const Record& record);
  int64_t ensure_target(const TargetKey& target);
  int64_t ensure_device(std::string_view key);
  // Starts a write transaction's id caches (call right after BEGIN).
  void begin_batch();
  // Inserts one validated record inside the caller's write transaction; returns its id.
  int64_t insert(const Record& record, double created_at);
  // The record that holds this measurement already, if any: same workload, target, toolchain,
  // device, config, time measured, costs and outcome (an import of the same file twice adds
  // nothing); `retimed` tells whether the log has re-timed it.
  struct Held {
    int64_t id = 0;
    bool retimed = false;
  };
  std::optional<Held> held(const Record& record);
  // What merge() did with a record.
  enum class Merged { kAdded, kRetimed, kPresent, kRejected };
  // Adds a validated record unless the log holds its measurement already (held()): the held one
  // then gains its re-timing when it has none (when both have one, the log's stays). With
  // `check`, a record the record check refuses is not added (kRejected; `why` says why). Inside
  // the caller's write transaction. What import and copy_log share.
  Merged merge(const Record& record, double created_at, bool check, std::string* why = nullptr);
  // Writes r.retimed_costs as record `id`'s re-timing, inside the caller's write transaction: its
  // figure, GFLOP/s and noisy flag follow the rounds' median and spread.
  void write_retiming(int64_t id, const Record& r);

  // Ids resolved in the current write transaction (only valid until it commits or rolls back,
  // hence cleared by begin_batch). Workloads map key -> (template, id).
  std::unordered_map<std::string, std::pair<std::string, int64_t>> batch_workloads;
  std::unordered_map<std::string, int64_t> batch_targets;
  std::unordered_map<std::string, int64_t> batch_devices;
  // Why the record check refuses the record, or "" (also without a check).
  std::string problem(const Record& record) const {
    return record_check ? record_check->problem(record) : "";
  }
  // Ids and reasons of every record the check refuses, oldest first.
  std::vector<std::pair<Record, std::string>> invalid_records();
  // Reads the row of a statement that selected kRecordColumns.
  static Record read_record(const sql::Statement& stmt);
};

}  // namespace ktune::tuning_db
