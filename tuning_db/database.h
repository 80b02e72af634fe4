// Defines Database, the tuning log's records (a SQLite file or a PostgreSQL database): add,
// best/top-k look-ups, resume, history, JSON-lines import/export, stats and the check (claims,
// models, runs, jobs: the *_store.h).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tuning_db/record.h"
#include "tuning_db/record_check.h"

namespace ktune::tuning_db {

struct CopyReport;

struct OpenOptions {
  bool create = true;           // create the file (and its schema) when missing
  int busy_timeout_ms = 10000;  // how long to wait for another connection's write lock
  // false: synchronous=NORMAL, which in WAL mode loses no committed transaction when the
  // process dies (SIGKILL, crash); true: synchronous=FULL, which also survives power loss.
  bool durable_against_power_loss = false;
  bool check_integrity = false;  // run PRAGMA quick_check on open (reads the whole file)
  bool migrate = true;           // upgrade an older schema in place; false: refuse it
  // Open for reading only (implies create = false, migrate = false): works on a log the user
  // may only read, and no write of this connection can succeed.
  bool read_only = false;
  // SQLite page cache of this connection, in MiB. The best-record index takes random inserts
  // (by cost), so a cache that holds its hot pages keeps batched inserts fast on large logs.
  int cache_mib = 64;
  // Whether a record instantiates with this ktune: best/top_k pass over records it refuses,
  // import_jsonl rejects them, check() reports them and remove_invalid() deletes them. Null: the
  // process default (default_record_check()); with none installed, records are not checked.
  std::shared_ptr<const RecordCheck> record_check = nullptr;
  // PostgreSQL: how long to wait for the server when the connection to it is lost (a restart, a
  // failover) before a call fails; a write cut by the loss runs again on the new connection,
  // adding nothing twice (sql::ConnectionDriver::set_reconnect_for). 0: a lost connection fails
  // the call. No effect on SQLite.
  double reconnect_for_s = 0;
  // While waiting for the server: when it returns true, the wait ends and the call fails (a server
  // that is stopping). Empty: the wait runs its course.
  std::function<bool()> stop_waiting = nullptr;
  // Called after the connection came back, before anything runs on it; throwing fails the call
  // (sql::ConnectionDriver::set_after_reconnect). Empty: none.
  std::function<void()> after_reconnect = nullptr;
};

// Which records best/top_k serve.
struct RecordQuery {
  std::string device_key;  // only records measured on devices of this key; "" = any device
  // false: only records measured on real devices, whatever else the log holds. true: records of
  // emulated devices (qemu) are eligible too and compete with the real ones by mean cost; a
  // served one has Record::emulated set, which the caller shows. For a user who tunes under
  // emulation on purpose (`ktune best --emulated`); an emulated timing is never served unasked.
  bool include_emulated = false;
  // true: disputed records (Record::disputed) are eligible too, for a re-timing that may settle
  // them; never for what a build is served.
  bool include_disputed = false;
};

// Counts over the whole log.
struct Stats {
  int schema_version = 0;
  int64_t workloads = 0;
  int64_t targets = 0;
  int64_t devices = 0;
  int64_t records = 0;
  int64_t ok_records = 0;
  int64_t failed_records = 0;
  std::map<std::string, int64_t> failures_by_kind;  // to_string(ErrorKind) -> count
  int64_t models = 0;
  int64_t runs = 0;
  int64_t claims = 0;  // configs claimed by running (or dead, not yet expired) tuning runs
  // Of `records` and `ok_records`: those measured on emulated devices (Record::emulated).
  int64_t emulated_records = 0;
  int64_t emulated_ok_records = 0;
  // Of `ok_records`: those whose figure was re-timed, and those flagged noisy (Record::noisy()).
  int64_t retimed_records = 0;
  int64_t noisy_records = 0;
  // Of `ok_records`: those another device of their key disagreed with (Record::disputed).
  int64_t disputed_records = 0;
};

// Per (workload, target): how much was measured and the best result, real and emulated apart.
struct WorkloadSummary {
  std::string workload_key;
  std::string template_name;
  TargetKey target;
  int64_t records = 0;           // every record, emulated ones included
  int64_t ok_records = 0;        // every successful record, emulated ones included
  double best_cost = 0;          // seconds, of real records only; 0 when no real record succeeded
  double best_gflops = 0;        // of real records only
  int64_t emulated_records = 0;  // of `records`, those measured on emulated devices
  int64_t emulated_ok_records = 0;  // of `ok_records`, those measured on emulated devices
  double emulated_best_cost = 0;    // seconds, of emulated records; 0 when none succeeded
  double emulated_best_gflops = 0;
};

// A JSON line that import_jsonl could not take.
struct LineError {
  int64_t line = 0;  // 1-based
  std::string message;
};

struct ImportReport {
  int64_t lines = 0;  // lines read so far (blank ones included)
  int64_t imported = 0;
  int64_t already_present = 0;  // lines whose record the log held already (not added again)
  int64_t retimed = 0;          // of the others held already, those whose re-timing the log gained
  int64_t rejected = 0;         // well-formed lines whose record does not instantiate (in errors)
  std::vector<LineError> errors;  // the lines that were skipped, in file order
  int64_t batches = 0;            // transactions committed
};

struct ImportOptions {
  // Records per transaction: each batch is committed on its own, so a long import shows its
  // progress in the log as it goes and holds the write lock only briefly at a time.
  int64_t batch_records = 10000;
  // Called after each full batch is committed, with the counts so far; not after the last batch,
  // whose counts import_jsonl returns (so an import of one batch reports no progress). May be
  // empty. What it throws ends the import (the batches committed stay).
  std::function<void(const ImportReport&)> on_progress;
};

struct CheckReport {
  bool ok() const { return problems.empty(); }
  // the backend's integrity findings, schema findings, and records that do not instantiate.
  std::vector<std::string> problems;
  int64_t invalid_records = 0;  // records the record check refuses (0 when there is no check)
  std::vector<std::string>
      invalid_examples;  // the first few: "record <id> (<workload>, config <i>): <why>"
};

// Whether a tuning log may be at `location` without opening it: a postgresql:// or postgres://
// URL always may (opening it says otherwise), a path when the file exists. Throws Error(kIo)
// when the file system cannot tell.
bool log_exists(const std::string& location);

// The tuning log.
//
// Thread-safety: one Database per thread. A Database owns one connection (SQLite's opened
// without its mutex), so it must not be used by two threads at once; open another Database on
// the same location in each thread (or process) instead. One writer and any number of readers
// work at the same time (SQLite: WAL mode; PostgreSQL: writers take one advisory lock); writers
// queue up behind the busy timeout. Movable, not copyable.
class Database {
 public:
  // Opens the tuning log at `path` in WAL mode with foreign keys on, creating it when
  // missing (options.create) and migrating an older schema. Returns the open log. With
  // options.read_only: opens without writing anything (a log of schema version 2 or newer).
  // A `path` that is a postgresql:// or postgres:// URL opens the log in that database (which
  // must exist; its schema is made when it holds none and options.create); the SQLite-only
  // options (WAL, synchronous, cache, integrity check) do not apply there.
  // Throws Error(kDatabase): a path that is not a regular file (FIFO, device, directory: refused
  // before it is opened), cannot open, corrupt file, a SQLite file (or PostgreSQL database) that
  // is not a ktune log, a newer schema version, integrity check failed (options.check_integrity).
  static Database open(const std::string& path, const OpenOptions& options = {});

  Database(Database&&) noexcept;
  Database& operator=(Database&&) noexcept;
  ~Database();

  // The log's location, for messages (a URL's password is masked).
  const std::string& path() const;
  // Schema version the file had when opened (before any migration); 0 for a new file.
  int opened_schema_version() const;

  // Adds `records` in one transaction: all or none. Returns their ids, in order.
  // Throws Error(kInvalidArgument) for an invalid record (nothing written), Error(kDatabase)
  // on a SQLite failure (nothing written).
  std::vector<int64_t> add(const std::vector<Record>& records);

  // Records the re-timing of a successful record (Record::retimed_costs: seconds per round), which
  // replaces an earlier one: from now on its median is the record's figure, which best/top_k rank
  // by, and the noisy flag follows the rounds' spread. The first timing (costs) stays.
  // Throws Error(kInvalidArgument) for no round, a cost that is not finite and >= 0 or a failed
  // record, Error(kNotFound) for an unknown id, Error(kDatabase) on a SQLite failure.
  void retime(int64_t record_id, const std::vector<double>& rounds);
  // Sets or clears a successful record's disputed flag (Record::disputed): another device of its
  // key disagreed with its figure, or (false) a device other than its own agreed. Throws
  // Error(kNotFound) for an unknown id, Error(kDatabase) on a SQLite failure.
  void set_disputed(int64_t record_id, bool disputed);

  // Returns the successful record of lowest cost (Record::cost()) for the workload on the target
  // that the query admits (device key, emulated records: see RecordQuery), or nullopt. Failed
  // records are never returned, nor records the record check refuses (the next best one is returned
  // instead). A target with an empty llvm_version matches every toolchain. Throws Error(kDatabase).
  std::optional<Record> best(std::string_view workload_key, const TargetKey& target,
                             const RecordQuery& query);
  // The same with RecordQuery{device_key}: real records only.
  std::optional<Record> best(std::string_view workload_key, const TargetKey& target,
                             std::string_view device_key = "");
  // The k best successful records (by Record::cost()) that pass the record check and the query,
  // fastest first. Only
  // the candidates are checked (verdicts cached), so a look-up stays an index descent.
  // Throws Error(kDatabase).
  std::vector<Record> top_k(std::string_view workload_key, const TargetKey& target, int64_t k,
                            const RecordQuery& query);
  // The same with RecordQuery{device_key}: real records only.
  std::vector<Record> top_k(std::string_view workload_key, const TargetKey& target, int64_t k,
                            std::string_view device_key = "");
  // The successful record of lowest cost of one config of the workload on the target that the
  // query admits and the record check passes, or nullopt: one config's figure wherever it ranks
  // (the fallback's, re-timed beside the best). Throws Error(kDatabase).
  std::optional<Record> config_best(std::string_view workload_key, const TargetKey& target,
                                    int64_t config_index, const RecordQuery& query);
  // How many successful emulated records of the workload on the target (and device, when not
  // empty) the log holds: tells "never measured" from "measured only under emulation" when
  // best() without include_emulated finds nothing. Throws Error(kDatabase).
  int64_t count_emulated(std::string_view workload_key, const TargetKey& target,
                         std::string_view device_key = "");

  // The target (canonical string) of the newest record measured on devices of `device_key`, or
  // nullopt when the log holds none: what that key's devices are, when none is at hand to ask.
  // Throws Error(kDatabase).
  std::optional<std::string> device_target(std::string_view device_key);

  // Resume and history (and ClaimStore) take `emulated`: they see only the records measured with
  // that emulated-ness (false: real devices), so a run on a real device measures again what was
  // only measured under emulation, and an emulated run neither learns from nor skips real timings.

  // Returns whether the config was measured (successfully or not). Throws Error(kDatabase).
  bool has(std::string_view workload_key, const TargetKey& target, int64_t config_index,
           bool emulated = false);
  // Every measured config index of the workload on the target, sorted, without repeats
  // (to resume a run). Throws Error(kDatabase).
  std::vector<int64_t> measured_indices(std::string_view workload_key, const TargetKey& target,
                                        bool emulated = false);
  // All records (failures included) of every workload of a template on the target measured with
  // this emulated-ness, oldest first, at most `limit` (0 = no limit) of the newest. For transfer
  // learning and resume.
  std::vector<Record> history(std::string_view template_name, const TargetKey& target,
                              int64_t limit = 0, bool emulated = false);

  // Throws Error(kDatabase) unless this connection could write now: SQLite takes and drops the
  // write lock (waiting as long as the busy timeout for another writer); PostgreSQL opens a
  // read-write transaction, which a standby or a read-only database refuses. Writes nothing.
  void check_writable();

  Stats stats();
  // One summary per (workload, target), ordered by workload key then target.
  std::vector<WorkloadSummary> summaries();

  // Writes every record (or those of one workload when `workload_key` is not empty) as JSON
  // lines, oldest first, from one consistent snapshot. Returns the lines written.
  // Throws Error(kDatabase), Error(kIo) when the stream fails.
  int64_t export_jsonl(std::ostream& out, std::string_view workload_key = "");
  // A pack: the best record (best(), real records only) of every workload and target of the log,
  // or of one workload, as JSON lines ordered by workload key then target. Returns the lines.
  // Importing a pack into a log that holds its records adds nothing (import skips duplicates).
  int64_t export_best_jsonl(std::ostream& out, std::string_view workload_key = "");
  // Imports JSON lines (blank lines are skipped), streaming: the input is read once, line by line,
  // and the records are committed in batches of options.batch_records. A line that is malformed
  // (bad JSON, a number out of range, a missing field) or whose record does not instantiate (record
  // check) is reported with its line number and reason and skipped; the others are imported. A
  // record the log already holds (same measurement: workload, target, device, config, time, costs,
  // outcome) is counted and not added again, before it is checked, so importing a file twice is
  // harmless and quick; and a failure part-way (SQLite error, a killed process) leaves whole
  // batches behind, which importing the file again completes. Throws Error(kDatabase) on a SQLite
  // failure, Error(kIo) when the stream fails, Error(kInvalidArgument) for a batch size < 1.
  ImportReport import_jsonl(std::istream& in, const ImportOptions& options = {});

  // Deletes every failed record. Returns how many.
  int64_t remove_failed();
  // Deletes every record the record check refuses (none without a check). Returns how many.
  // Reads the whole log (each distinct config is instantiated once). Throws Error(kDatabase).
  int64_t remove_invalid();

  // Runs the backend's checks (SQLite: PRAGMA integrity_check and foreign_key_check), the schema
  // check and the record check over every record. Returns what was found (ok() when nothing).
  // Throws Error(kDatabase) only when the log cannot be read.
  CheckReport check();

 private:
  // The stores of what is not a record share this connection and its cached statements.
  friend CopyReport copy_log(Database& from, Database& to, bool append);
  friend class ClaimStore;
  friend class ModelStore;
  friend class RunStore;
  friend class JobStore;
  friend class StepThreadsStore;
  struct Impl;
  explicit Database(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune::tuning_db
