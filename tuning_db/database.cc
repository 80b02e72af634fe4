// Database: open, add records, and the look-ups (best, top-k, resume, history, stats).
#include "tuning_db/database.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <thread>

#include <sys/stat.h>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "support/error.h"
#include "tuning_db/database_impl.h"
#include "tuning_db/schema.h"

namespace ktune::tuning_db {

using nlohmann::json;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void validate(const Record& r) {
  auto bad = [&](const std::string& what) {
    throw Error(ErrorKind::kInvalidArgument,
                "invalid record for workload '" + r.workload_key + "': " + what);
  };
  if (r.workload_key.empty()) bad("empty workload key");
  if (r.template_name.empty()) bad("empty template name");
  if (r.target.target.empty()) bad("empty target");
  if (!r.config.is_object()) bad("config must be a JSON object");
  if (r.ok() && r.costs.empty()) bad("a successful record needs at least one cost");
  for (double c : r.costs) {
    if (!std::isfinite(c) || c < 0) bad("costs must be finite and non-negative");
  }
  if (!std::isfinite(r.flop) || r.flop < 0) bad("flop must be finite and non-negative");
}

namespace {

// The costs as a JSON array, written directly: shortest round-trip form of each double, so the
// values read back are bit-identical (nlohmann's dump is several times slower for this).
std::string costs_json(const std::vector<double>& costs) {
  std::string out = "[";
  char buf[32];
  for (size_t i = 0; i < costs.size(); ++i) {
    if (i) out += ',';
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, costs[i]);
    out.append(buf, end);
  }
  out += ']';
  return out;
}

}  // namespace

Database::Impl::Use Database::Impl::use(std::string_view sql) {
  auto it = statements.find(sql);
  if (it == statements.end()) {
    std::string text(sql);
    // Columns an older schema opened read-only lacks, and what every record of it holds there.
    auto substitute = [&text](std::string_view column, std::string_view value) {
      for (size_t at = text.find(column); at != std::string::npos;
           at = text.find(column, at + value.size()))
        text.replace(at, column.size(), value);
    };
    if (!has_emulated) substitute("r.emulated", "0");
    if (!has_tenants) {
      substitute("r.client", "''");
      substitute("r.worker", "''");
    }
    if (!has_retimed) {
      substitute("r.retimed_costs", "'[]'");
      substitute("r.noisy", "0");
    }
    if (!has_disputed) substitute("r.disputed", "0");
    it = statements.emplace(std::string(sql), std::make_unique<sql::Statement>(conn, text)).first;
  }
  it->second->reset();
  return Use(*it->second);
}

std::optional<int64_t> Database::Impl::workload_id(std::string_view key) {
  auto s = use("SELECT id FROM workloads WHERE key = ?1");
  s->bind(1, key);
  if (!s->step()) return std::nullopt;
  return s->column_int(0);
}

std::optional<int64_t> Database::Impl::device_id(std::string_view key) {
  auto s = use("SELECT id FROM devices WHERE key = ?1");
  s->bind(1, key);
  if (!s->step()) return std::nullopt;
  return s->column_int(0);
}

std::vector<int64_t> Database::Impl::target_ids(const TargetKey& target) {
  auto s = use(
      "SELECT id FROM targets WHERE target = ?1 AND (?2 = '' OR llvm_version = ?2) ORDER BY id");
  s->bind(1, target.target).bind(2, target.llvm_version);
  std::vector<int64_t> ids;
  while (s->step()) ids.push_back(s->column_int(0));
  return ids;
}

int64_t Database::Impl::ensure_workload(const Record& r) {
  {
    auto s = use("SELECT id, template, flop FROM workloads WHERE key = ?1");
    s->bind(1, r.workload_key);
    if (s->step()) {
      int64_t id = s->column_int(0);
      std::string template_name = s->column_text(1);
      double flop = s->column_double(2);
      if (template_name != r.template_name) {
        throw Error(ErrorKind::kInvalidArgument,
                    "workload '" + r.workload_key + "' is recorded with template '" +
                        template_name + "', not '" + r.template_name + "'");
      }
      if (flop == 0 && r.flop > 0) {
        auto u = use("UPDATE workloads SET flop = ?2 WHERE id = ?1");
        u->bind(1, id).bind(2, r.flop);
        u->run();
      }
      return id;
    }
  }
  auto s = use("INSERT INTO workloads(key, template, args, flop) VALUES (?1, ?2, ?3, ?4)");
  s->bind(1, r.workload_key).bind(2, r.template_name).bind(3, r.args.dump()).bind(4, r.flop);
  s->run();
  return conn.last_insert_rowid();
}

int64_t Database::Impl::ensure_target(const TargetKey& target) {
  {
    auto s = use("SELECT id FROM targets WHERE target = ?1 AND llvm_version = ?2");
    s->bind(1, target.target).bind(2, target.llvm_version);
    if (s->step()) return s->column_int(0);
  }
  auto s = use("INSERT INTO targets(target, llvm_version) VALUES (?1, ?2)");
  s->bind(1, target.target).bind(2, target.llvm_version);
  s->run();
  return conn.last_insert_rowid();
}

int64_t Database::Impl::ensure_device(std::string_view key) {
  if (auto id = device_id(key)) return *id;
  auto s = use("INSERT INTO devices(key) VALUES (?1)");
  s->bind(1, key);
  s->run();
  return conn.last_insert_rowid();
}

void Database::Impl::begin_batch() {
  batch_workloads.clear();
  batch_targets.clear();
  batch_devices.clear();
}

std::optional<Database::Impl::Held> Database::Impl::held(const Record& r) {
  const auto workload = workload_id(r.workload_key);
  const auto device = device_id(r.device_key);
  if (!workload || !device) return std::nullopt;
  for (int64_t target : target_ids(r.target)) {
    auto s = use(std::string("SELECT id, ") + (has_retimed ? "retimed_costs != '[]'" : "0") +
                 " FROM records WHERE workload_id = ?1 AND target_id = ?2 AND config_index = ?3 "
                 "AND device_id = ?4 AND measured_at = ?5 AND costs = ?6 AND error_kind = ?7 AND "
                 "emulated = ?8 LIMIT 1");
    s->bind(1, *workload)
        .bind(2, target)
        .bind(3, r.config_index)
        .bind(4, *device)
        .bind(5, r.timestamp);
    s->bind(6, costs_json(r.costs)).bind(7, r.error ? to_string(*r.error) : std::string_view(""));
    s->bind(8, int64_t{r.emulated});
    if (s->step()) return Held{s->column_int(0), s->column_int(1) != 0};
  }
  return std::nullopt;
}

Database::Impl::Merged Database::Impl::merge(const Record& record, double created_at, bool check,
                                             std::string* why) {
  // A duplicate is known by one index look-up; the record check instantiates a config.
  if (const auto h = held(record)) {
    if (record.retimed_costs.empty() || h->retimed) return Merged::kPresent;
    write_retiming(h->id, record);
    return Merged::kRetimed;
  }
  if (check) {
    if (std::string problem_of = problem(record); !problem_of.empty()) {
      if (why) *why = std::move(problem_of);
      return Merged::kRejected;
    }
  }
  // insert() checks the workload's template before it writes anything for this record.
  insert(record, created_at);
  return Merged::kAdded;
}

void Database::Impl::write_retiming(int64_t id, const Record& r) {
  auto s =
      use("UPDATE records SET retimed_costs = ?2, mean_cost = ?3, gflops = ?4, noisy = ?5 "
          "WHERE id = ?1");
  s->bind(1, id).bind(2, costs_json(r.retimed_costs)).bind(3, r.cost());
  s->bind(4, r.gflops()).bind(5, int64_t{r.noisy()});
  s->run();
}

int64_t Database::Impl::insert(const Record& r, double created_at) {
  // Ids resolved earlier in the same transaction stay valid until it ends; a batch usually
  // holds one workload, target and device, so this saves three look-ups per record.
  int64_t workload;
  if (auto it = batch_workloads.find(r.workload_key);
      it != batch_workloads.end() && it->second.first == r.template_name) {
    workload = it->second.second;
  } else {
    workload = ensure_workload(r);
    batch_workloads[r.workload_key] = {r.template_name, workload};
  }
  int64_t target;
  std::string target_key = r.target.target + '\n' + r.target.llvm_version;
  if (auto it = batch_targets.find(target_key); it != batch_targets.end()) {
    target = it->second;
  } else {
    target = batch_targets[target_key] = ensure_target(r.target);
  }
  int64_t device;
  if (auto it = batch_devices.find(r.device_key); it != batch_devices.end()) {
    device = it->second;
  } else {
    device = batch_devices[r.device_key] = ensure_device(r.device_key);
  }
  auto s = use(
      "INSERT INTO records(workload_id, target_id, device_id, config_index, config, costs, "
      "mean_cost, gflops, all_cost, error_kind, error_msg, tuner, batch, measured_at, "
      "created_at, ktune_version, run_id, emulated, client, worker, retimed_costs, noisy, "
      "disputed) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
      "?19, ?20, ?21, ?22, ?23)");
  s->bind(1, workload).bind(2, target).bind(3, device).bind(4, r.config_index);
  s->bind(5, r.config.dump()).bind(6, costs_json(r.costs));
  // mean_cost holds the record's figure (Record::cost(): the re-timing's median when re-timed).
  // Failed records keep a NULL one: they are outside the best-record index.
  if (r.ok()) {
    s->bind(7, r.cost());
  } else {
    s->bind_null(7);
  }
  s->bind(8, r.gflops()).bind(9, r.all_cost);
  s->bind(10, r.error ? to_string(*r.error) : std::string_view());
  s->bind(11, r.error_message).bind(12, r.tuner).bind(13, r.batch).bind(14, r.timestamp);
  s->bind(15, created_at).bind(16, r.ktune_version);
  if (r.run_id != 0) {
    s->bind(17, r.run_id);
  } else {
    s->bind_null(17);
  }
  s->bind(18, int64_t{r.emulated});
  s->bind(19, r.client).bind(20, r.worker);
  s->bind(21, costs_json(r.retimed_costs)).bind(22, int64_t{r.noisy()});
  s->bind(23, int64_t{r.disputed});
  s->run();
  return conn.last_insert_rowid();
}

Record Database::Impl::read_record(const sql::Statement& s) {
  Record r;
  r.id = s.column_int(0);
  r.workload_key = s.column_text(1);
  r.template_name = s.column_text(2);
  r.args = json::parse(s.column_text(3));
  r.flop = s.column_double(4);
  r.target.target = s.column_text(5);
  r.target.llvm_version = s.column_text(6);
  r.device_key = s.column_text(7);
  r.config_index = s.column_int(8);
  r.config = json::parse(s.column_text(9));
  r.costs = json::parse(s.column_text(10)).get<std::vector<double>>();
  r.all_cost = s.column_double(11);
  std::string kind = s.column_text(12);
  if (!kind.empty()) r.error = error_kind_from_string(kind);
  r.error_message = s.column_text(13);
  r.tuner = s.column_text(14);
  r.batch = s.column_int(15);
  r.timestamp = s.column_double(16);
  r.ktune_version = s.column_text(17);
  r.run_id = s.is_null(18) ? 0 : s.column_int(18);
  r.emulated = s.column_int(19) != 0;
  r.client = s.column_text(20);
  r.worker = s.column_text(21);
  r.retimed_costs = json::parse(s.column_text(22)).get<std::vector<double>>();
  r.disputed = s.column_int(23) != 0;
  return r;
}

Database::Database(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Database::Database(Database&&) noexcept = default;
Database& Database::operator=(Database&&) noexcept = default;
Database::~Database() = default;

namespace {

// The oldest schema read-only commands can read (runs and run_batches exist from version 2).
constexpr int kOldestReadable = 2;
// A LIMIT that takes every row (PostgreSQL refuses SQLite's -1).
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

// Throws Error(kDatabase) when a log is too old for read-only commands.
void refuse_unreadable(sql::Connection& conn) {
  const int64_t version = conn.driver().schema_version();
  if (version < kOldestReadable)
    throw Error(ErrorKind::kDatabase,
                "tuning log '" + conn.path() + "' has schema version " + std::to_string(version) +
                    "; a command that writes (ktune tune, db import) upgrades it first");
}

// A read-only connection. With no -wal file beside the log no writer has it open, so it is read
// as immutable: no lock, -shm or -wal file is made (a read-only connection could not remove them
// again). With a -wal file a writer may be at work, so the WAL protocol is used, falling back to
// immutable when this process cannot make the -shm file (a directory it may not write). Checks
// that the file is a ktune log of a readable version.
sql::Connection open_for_reading(const std::string& path, const OpenOptions& options) {
  const bool writer_may_be_active = std::filesystem::exists(path + "-wal");
  for (bool immutable : {false, true}) {
    if (!immutable && !writer_may_be_active) continue;
    sql::Connection conn = sql::Connection::open_read_only(path, immutable);
    try {
      conn.driver().set_busy_timeout(options.busy_timeout_ms);
      refuse_foreign(conn);
      refuse_unreadable(conn);
      conn.driver().set_read_only();
      conn.exec("PRAGMA foreign_keys = ON");
      conn.exec("PRAGMA cache_size = -" + std::to_string(std::max(1, options.cache_mib) * 1024));
      if (options.check_integrity) {
        const std::string result = conn.query_text("PRAGMA quick_check");
        if (result != "ok")
          throw Error(ErrorKind::kDatabase,
                      "tuning log '" + path + "' fails its integrity check: " + result);
      }
      return conn;
    } catch (const Error&) {
      // A WAL log whose -shm this process cannot make (a directory it may not write) fails
      // here ("attempt to write a readonly database", "unable to open"): read it immutable.
      if (immutable) throw;
    }
  }
  throw Error(ErrorKind::kInternal, "unreachable");
}

// Refuses a path that exists but is not a regular file (after symbolic links), before SQLite opens
// it: a FIFO blocks the open, a device reads as endless zeros (an "empty log of schema version 0"),
// a directory is no log.
void refuse_non_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // missing: create or "no tuning log" below
  if (S_ISREG(st.st_mode)) return;
  const char* what = "a special file";
  if (S_ISFIFO(st.st_mode)) what = "a FIFO";
  if (S_ISDIR(st.st_mode)) what = "a directory";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) what = "a device";
  if (S_ISSOCK(st.st_mode)) what = "a socket";
  throw Error(ErrorKind::kDatabase,
              "tuning log '" + path + "' is " + what + ", not a file: give the path of a log");
}

// A log in a PostgreSQL database (the database must exist): no file, journal or page cache to set
// up; the schema is made or migrated under the log's write lock, as on SQLite. Returns the
// connection; `version` is the schema version found (0: the database held no log).
sql::Connection open_postgres_log(const std::string& url, const OpenOptions& options,
                                  int& version) {
  sql::Connection conn = sql::Connection::open(url, false);
  conn.driver().set_busy_timeout(options.busy_timeout_ms);
  refuse_foreign(conn);
  if ((options.read_only || !options.create) && conn.driver().schema_version() == 0)
    throw Error(ErrorKind::kDatabase, "no tuning log in '" + conn.path() + "'");
  if (options.read_only) {
    refuse_unreadable(conn);
    version = static_cast<int>(conn.driver().schema_version());
    conn.driver().set_read_only();
  } else {
    version = prepare_schema(conn, options.migrate);
  }
  return conn;
}

}  // namespace

bool log_exists(const std::string& location) {
  if (sql::is_postgres_url(location)) return true;
  std::error_code ec;
  const bool found = std::filesystem::exists(location, ec);
  if (ec)
    throw Error(ErrorKind::kIo, "cannot look at the tuning log " + location + ": " + ec.message());
  return found;
}

Database Database::open(const std::string& path, const OpenOptions& options) {
  if (sql::is_postgres_url(path)) {
    auto impl = std::make_unique<Impl>();
    impl->record_check = options.record_check ? options.record_check : default_record_check();
    impl->conn = open_postgres_log(path, options, impl->opened_version);
    impl->conn.driver().set_reconnect_for(options.reconnect_for_s, options.stop_waiting);
    impl->conn.driver().set_after_reconnect(options.after_reconnect);
    if (options.read_only) {
      impl->has_emulated = impl->opened_version >= kEmulatedSchemaVersion;
      impl->has_tenants = impl->opened_version >= kTenantsSchemaVersion;
      impl->has_retimed = impl->opened_version >= kRetimedSchemaVersion;
      impl->has_disputed = impl->opened_version >= kDisputedSchemaVersion;
    }
    return Database(std::move(impl));
  }
  refuse_non_file(path);
  if (!options.create && !std::filesystem::exists(path)) {
    throw Error(ErrorKind::kDatabase, "no tuning log at '" + path + "'");
  }
  auto impl = std::make_unique<Impl>();
  impl->record_check = options.record_check ? options.record_check : default_record_check();
  if (options.read_only) {
    if (!std::filesystem::exists(path))
      throw Error(ErrorKind::kDatabase, "no tuning log at '" + path + "'");
    impl->conn = open_for_reading(path, options);
    impl->opened_version = static_cast<int>(impl->conn.driver().schema_version());
    impl->has_emulated = impl->opened_version >= kEmulatedSchemaVersion;
    impl->has_tenants = impl->opened_version >= kTenantsSchemaVersion;
    impl->has_retimed = impl->opened_version >= kRetimedSchemaVersion;
    impl->has_disputed = impl->opened_version >= kDisputedSchemaVersion;
    return Database(std::move(impl));
  }
  impl->conn = sql::Connection::open(path, options.create);
  sql::Connection& conn = impl->conn;
  conn.driver().set_busy_timeout(options.busy_timeout_ms);
  refuse_foreign(conn);
  // Switching to WAL needs a moment when no other connection reads the file, and SQLite does not
  // wait for it with the busy timeout: two processes that create one log at once (two `ktune
  // tune` runs) would see "database is locked" here. Retry until the busy timeout runs out.
  std::string mode;
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(std::max(0, options.busy_timeout_ms));
  // (While another connection has the file open in rollback mode, SQLite may also just answer
  // with the old mode instead of an error.)
  for (;;) {
    try {
      mode = conn.query_text("PRAGMA journal_mode = WAL");
      if (mode == "wal" || std::chrono::steady_clock::now() > give_up) break;
    } catch (const Error&) {
      if (!conn.last_error_was_busy() || std::chrono::steady_clock::now() > give_up) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (mode != "wal") {
    throw Error(
        ErrorKind::kDatabase,
        "tuning log '" + path + "': cannot switch to WAL mode (journal mode '" + mode + "')");
  }
  conn.exec(options.durable_against_power_loss ? "PRAGMA synchronous = FULL"
                                               : "PRAGMA synchronous = NORMAL");
  conn.exec("PRAGMA foreign_keys = ON");
  conn.exec("PRAGMA cache_size = -" + std::to_string(std::max(1, options.cache_mib) * 1024));
  impl->opened_version = prepare_schema(conn, options.migrate);
  if (options.check_integrity) {
    std::string result = conn.query_text("PRAGMA quick_check");
    if (result != "ok") {
      throw Error(ErrorKind::kDatabase,
                  "tuning log '" + path + "' fails its integrity check: " + result);
    }
  }
  return Database(std::move(impl));
}

const std::string& Database::path() const { return impl_->conn.path(); }

int Database::opened_schema_version() const { return impl_->opened_version; }

std::vector<int64_t> Database::add(const std::vector<Record>& records) {
  for (const Record& r : records) validate(r);
  std::vector<int64_t> ids;
  ids.reserve(records.size());
  if (records.empty()) return ids;
  double created_at = now_seconds();
  // Run again after a lost connection whose commit may have been applied, it skips the records
  // the log holds (the same measurement: held()), so nothing is added twice.
  sql::with_transaction(impl_->conn, sql::TransactionMode::kImmediate, [&](bool again) {
    ids.clear();
    impl_->begin_batch();
    for (const Record& r : records) {
      const auto held = again ? impl_->held(r) : std::nullopt;
      ids.push_back(held ? held->id : impl_->insert(r, created_at));
    }
  });
  return ids;
}

void Database::retime(int64_t record_id, const std::vector<double>& rounds) {
  if (rounds.empty())
    throw Error(ErrorKind::kInvalidArgument, "a re-timing needs at least one round");
  for (double c : rounds)
    if (!std::isfinite(c) || c < 0)
      throw Error(ErrorKind::kInvalidArgument, "re-timed costs must be finite and non-negative");
  sql::with_transaction(impl_->conn, sql::TransactionMode::kImmediate, [&](bool) {
    Record r;
    {
      auto s = impl_->use(std::string(kRecordColumns) + "AND r.id = ?1");
      s->bind(1, record_id);
      if (!s->step())
        throw Error(ErrorKind::kNotFound, "no record " + std::to_string(record_id) + " to re-time");
      r = Impl::read_record(*s);
    }
    if (!r.ok())
      throw Error(ErrorKind::kInvalidArgument,
                  "record " + std::to_string(record_id) + " failed; only a timing can be re-timed");
    r.retimed_costs = rounds;
    impl_->write_retiming(record_id, r);
  });
}

void Database::set_disputed(int64_t record_id, bool disputed) {
  auto s = impl_->use("UPDATE records SET disputed = ?2 WHERE id = ?1 AND error_kind = ''");
  s->bind(1, record_id).bind(2, int64_t{disputed});
  s->run();
  if (impl_->conn.changes() == 0)
    throw Error(ErrorKind::kNotFound,
                "no successful record " + std::to_string(record_id) + " to mark disputed");
}

std::vector<Record> Database::top_k(std::string_view workload_key, const TargetKey& target,
                                    int64_t k, std::string_view device_key) {
  return top_k(workload_key, target, k, RecordQuery{std::string(device_key)});
}

std::vector<Record> Database::top_k(std::string_view workload_key, const TargetKey& target,
                                    int64_t k, const RecordQuery& query) {
  std::vector<Record> out;
  if (k <= 0) return out;
  auto workload = impl_->workload_id(workload_key);
  if (!workload) return out;
  std::optional<int64_t> device;
  if (!query.device_key.empty()) {
    device = impl_->device_id(query.device_key);
    if (!device) return out;
  }
  // One indexed, cost-ordered scan per matching toolchain (usually one), then a merge. With a
  // record check the scan has no limit but stops at the k-th record that passes: a record that
  // does not instantiate is passed over for the next one.
  const bool checked = impl_->record_check != nullptr;
  for (int64_t target_id : impl_->target_ids(target)) {
    auto s = impl_->use(std::string(kRecordColumns) +
                        "AND r.workload_id = ?1 AND r.target_id = ?2 AND r.error_kind = '' "
                        "AND (?3 = 0 OR r.device_id = ?3) AND (?5 = 1 OR r.emulated = 0) "
                        "AND (?6 = 1 OR r.disputed = 0) ORDER BY r.mean_cost, r.id LIMIT ?4");
    s->bind(1, *workload)
        .bind(2, target_id)
        .bind(3, device.value_or(0))
        .bind(4, checked ? kNoLimit : k);
    s->bind(5, int64_t{query.include_emulated}).bind(6, int64_t{query.include_disputed});
    int64_t taken = 0;
    while (taken < k && s->step()) {
      Record r = Impl::read_record(*s);
      if (checked) {
        if (std::string why = impl_->problem(r); !why.empty()) {
          spdlog::debug("record {} of {} does not instantiate ({}); passed over", r.id,
                        r.workload_key, why);
          continue;
        }
      }
      out.push_back(std::move(r));
      ++taken;
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Record& a, const Record& b) {
    return a.cost() < b.cost() || (a.cost() == b.cost() && a.id < b.id);
  });
  if (static_cast<int64_t>(out.size()) > k) out.resize(static_cast<size_t>(k));
  return out;
}

std::optional<Record> Database::config_best(std::string_view workload_key, const TargetKey& target,
                                            int64_t config_index, const RecordQuery& query) {
  auto workload = impl_->workload_id(workload_key);
  if (!workload) return std::nullopt;
  std::optional<int64_t> device;
  if (!query.device_key.empty()) {
    device = impl_->device_id(query.device_key);
    if (!device) return std::nullopt;
  }
  std::optional<Record> out;
  for (int64_t target_id : impl_->target_ids(target)) {
    auto s = impl_->use(std::string(kRecordColumns) +
                        "AND r.workload_id = ?1 AND r.target_id = ?2 AND r.error_kind = '' "
                        "AND (?3 = 0 OR r.device_id = ?3) AND (?4 = 1 OR r.emulated = 0) "
                        "AND r.config_index = ?5 AND (?6 = 1 OR r.disputed = 0) "
                        "ORDER BY r.mean_cost, r.id");
    s->bind(1, *workload).bind(2, target_id).bind(3, device.value_or(0));
    s->bind(4, int64_t{query.include_emulated}).bind(5, config_index);
    s->bind(6, int64_t{query.include_disputed});
    while (s->step()) {
      Record r = Impl::read_record(*s);
      if (impl_->record_check && !impl_->problem(r).empty()) continue;
      if (!out || r.cost() < out->cost()) out = std::move(r);
      break;
    }
  }
  return out;
}

std::optional<Record> Database::best(std::string_view workload_key, const TargetKey& target,
                                     const RecordQuery& query) {
  auto top = top_k(workload_key, target, 1, query);
  if (top.empty()) return std::nullopt;
  return std::move(top.front());
}

std::optional<Record> Database::best(std::string_view workload_key, const TargetKey& target,
                                     std::string_view device_key) {
  return best(workload_key, target, RecordQuery{std::string(device_key)});
}

int64_t Database::count_emulated(std::string_view workload_key, const TargetKey& target,
                                 std::string_view device_key) {
  auto workload = impl_->workload_id(workload_key);
  if (!workload) return 0;
  std::optional<int64_t> device;
  if (!device_key.empty()) {
    device = impl_->device_id(device_key);
    if (!device) return 0;
  }
  int64_t n = 0;
  for (int64_t target_id : impl_->target_ids(target)) {
    auto s = impl_->use(
        "SELECT count(*) FROM records r WHERE r.workload_id = ?1 AND r.target_id = ?2 AND "
        "r.error_kind = '' "
        "AND (?3 = 0 OR r.device_id = ?3) AND r.emulated = 1");
    s->bind(1, *workload).bind(2, target_id).bind(3, device.value_or(0));
    if (s->step()) n += s->column_int(0);
  }
  return n;
}

std::optional<std::string> Database::device_target(std::string_view device_key) {
  auto device = impl_->device_id(device_key);
  if (!device) return std::nullopt;
  // Newest first by id: the scan stops at the key's latest record.
  auto s = impl_->use(
      "SELECT t.target FROM records r CROSS JOIN targets t WHERE r.device_id = ?1 AND "
      "t.id = r.target_id ORDER BY r.id DESC LIMIT 1");
  s->bind(1, *device);
  if (!s->step()) return std::nullopt;
  return s->column_text(0);
}

bool Database::has(std::string_view workload_key, const TargetKey& target, int64_t config_index,
                   bool emulated) {
  auto workload = impl_->workload_id(workload_key);
  if (!workload) return false;
  for (int64_t target_id : impl_->target_ids(target)) {
    auto s = impl_->use(
        "SELECT 1 FROM records r WHERE r.workload_id = ?1 AND r.target_id = ?2 AND r.config_index "
        "= ?3 "
        "AND r.emulated = ?4 LIMIT 1");
    s->bind(1, *workload).bind(2, target_id).bind(3, config_index).bind(4, int64_t{emulated});
    if (s->step()) return true;
  }
  return false;
}

std::vector<int64_t> Database::measured_indices(std::string_view workload_key,
                                                const TargetKey& target, bool emulated) {
  std::vector<int64_t> out;
  auto workload = impl_->workload_id(workload_key);
  if (!workload) return out;
  for (int64_t target_id : impl_->target_ids(target)) {
    auto s = impl_->use(
        "SELECT DISTINCT r.config_index FROM records r WHERE r.workload_id = ?1 AND r.target_id = "
        "?2 "
        "AND r.emulated = ?3 ORDER BY r.config_index");
    s->bind(1, *workload).bind(2, target_id).bind(3, int64_t{emulated});
    while (s->step()) out.push_back(s->column_int(0));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<Record> Database::history(std::string_view template_name, const TargetKey& target,
                                      int64_t limit, bool emulated) {
  std::vector<Record> out;
  for (int64_t target_id : impl_->target_ids(target)) {
    auto s = impl_->use(
        "SELECT r.id, w.key, w.template, w.args, w.flop, t.target, t.llvm_version, d.key, "
        "r.config_index, r.config, r.costs, r.all_cost, r.error_kind, r.error_msg, r.tuner, "
        "r.batch, r.measured_at, r.ktune_version, r.run_id, r.emulated, r.client, r.worker, "
        "r.retimed_costs, r.disputed "
        "FROM workloads w CROSS JOIN records r CROSS JOIN targets t CROSS JOIN devices d "
        "WHERE w.template = ?1 AND r.workload_id = w.id AND r.target_id = ?2 AND r.emulated = ?4 "
        "AND t.id = r.target_id AND d.id = r.device_id ORDER BY r.id DESC LIMIT ?3");
    s->bind(1, template_name).bind(2, target_id).bind(3, limit > 0 ? limit : kNoLimit);
    s->bind(4, int64_t{emulated});
    while (s->step()) out.push_back(Impl::read_record(*s));
  }
  std::sort(out.begin(), out.end(), [](const Record& a, const Record& b) { return a.id > b.id; });
  if (limit > 0 && static_cast<int64_t>(out.size()) > limit) out.resize(static_cast<size_t>(limit));
  std::reverse(out.begin(), out.end());
  return out;
}

void Database::check_writable() {
  sql::ConnectionDriver& driver = impl_->conn.driver();
  const bool sqlite = driver.backend() == sql::Backend::kSqlite;
  driver.exec(sqlite ? "BEGIN IMMEDIATE" : "BEGIN");
  try {
    if (!sqlite) driver.exec("SET TRANSACTION READ WRITE");
  } catch (...) {
    driver.exec("ROLLBACK");
    throw;
  }
  driver.exec("ROLLBACK");
}

Stats Database::stats() {
  Stats st;
  sql::Transaction snapshot(impl_->conn, sql::Transaction::Mode::kDeferred);
  st.schema_version = static_cast<int>(impl_->conn.driver().schema_version());
  st.workloads = impl_->conn.query_int("SELECT count(*) FROM workloads");
  st.targets = impl_->conn.query_int("SELECT count(*) FROM targets");
  st.devices = impl_->conn.query_int("SELECT count(*) FROM devices");
  st.records = impl_->conn.query_int("SELECT count(*) FROM records");
  st.ok_records = impl_->conn.query_int("SELECT count(*) FROM records WHERE error_kind = ''");
  st.failed_records = st.records - st.ok_records;
  st.models = impl_->conn.query_int("SELECT count(*) FROM models");
  st.runs = impl_->conn.query_int("SELECT count(*) FROM runs");
  // A log of an older schema opened read-only has no claims table.
  if (st.schema_version >= 4) st.claims = impl_->conn.query_int("SELECT count(*) FROM claims");
  {
    auto s = impl_->use(
        "SELECT count(*), coalesce(sum(CASE WHEN r.error_kind = '' THEN 1 ELSE 0 END), 0) FROM "
        "records "
        "r WHERE r.emulated = 1");
    if (s->step()) {
      st.emulated_records = s->column_int(0);
      st.emulated_ok_records = s->column_int(1);
    }
  }
  {
    auto s = impl_->use(
        "SELECT coalesce(sum(CASE WHEN r.retimed_costs != '[]' THEN 1 ELSE 0 END), 0), "
        "coalesce(sum(r.noisy), 0), coalesce(sum(r.disputed), 0) FROM records r "
        "WHERE r.error_kind = ''");
    if (s->step()) {
      st.retimed_records = s->column_int(0);
      st.noisy_records = s->column_int(1);
      st.disputed_records = s->column_int(2);
    }
  }
  auto s = impl_->use(
      "SELECT error_kind, count(*) FROM records WHERE error_kind != '' GROUP BY error_kind "
      "ORDER BY error_kind");
  while (s->step()) st.failures_by_kind[s->column_text(0)] = s->column_int(1);
  snapshot.commit();
  return st;
}

std::vector<WorkloadSummary> Database::summaries() {
  std::vector<WorkloadSummary> out;
  auto s = impl_->use(
      "SELECT w.key, w.template, t.target, t.llvm_version, g.n, g.n_ok, g.best, g.gflops, "
      "g.n_emu, g.n_emu_ok, g.emu_best, g.emu_gflops FROM "
      "(SELECT r.workload_id, r.target_id, count(*) AS n, "
      " sum(CASE WHEN r.error_kind = '' THEN 1 ELSE 0 END) AS n_ok, "
      " min(CASE WHEN r.emulated = 0 THEN r.mean_cost END) AS best, "
      " max(CASE WHEN r.emulated = 0 THEN r.gflops ELSE 0 END) AS gflops, "
      " sum(r.emulated) AS n_emu, "
      " sum(CASE WHEN r.emulated = 1 AND r.error_kind = '' THEN 1 ELSE 0 END) AS n_emu_ok, "
      " min(CASE WHEN r.emulated = 1 THEN r.mean_cost END) AS emu_best, "
      " max(CASE WHEN r.emulated = 1 THEN r.gflops ELSE 0 END) AS emu_gflops FROM records r "
      " GROUP BY r.workload_id, r.target_id) g "
      "JOIN workloads w ON w.id = g.workload_id JOIN targets t ON t.id = g.target_id "
      "ORDER BY w.key, t.target, t.llvm_version");
  while (s->step()) {
    WorkloadSummary w;
    w.workload_key = s->column_text(0);
    w.template_name = s->column_text(1);
    w.target = {s->column_text(2), s->column_text(3)};
    w.records = s->column_int(4);
    w.ok_records = s->column_int(5);
    w.best_cost = s->is_null(6) ? 0 : s->column_double(6);
    w.best_gflops = s->column_double(7);
    w.emulated_records = s->column_int(8);
    w.emulated_ok_records = s->column_int(9);
    w.emulated_best_cost = s->is_null(10) ? 0 : s->column_double(10);
    w.emulated_best_gflops = s->column_double(11);
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<std::pair<Record, std::string>> Database::Impl::invalid_records() {
  std::vector<std::pair<Record, std::string>> out;
  if (!record_check) return out;
  auto s = use(std::string(kRecordColumns) + "ORDER BY r.id");
  while (s->step()) {
    Record r = read_record(*s);
    std::string why = record_check->problem(r);
    if (!why.empty()) out.emplace_back(std::move(r), std::move(why));
  }
  return out;
}

int64_t Database::remove_invalid() {
  sql::Transaction txn(impl_->conn);
  int64_t removed = 0;
  for (const auto& [record, why] : impl_->invalid_records()) {
    auto s = impl_->use("DELETE FROM records WHERE id = ?1");
    s->bind(1, record.id);
    s->run();
    removed += impl_->conn.changes();
  }
  txn.commit();
  return removed;
}

int64_t Database::remove_failed() {
  sql::Transaction txn(impl_->conn);
  impl_->conn.exec("DELETE FROM records WHERE error_kind != ''");
  int64_t removed = impl_->conn.changes();
  txn.commit();
  return removed;
}

}  // namespace ktune::tuning_db
