// The PostgreSQL driver, over libpqxx: every statement prepared once per connection, in
// PostgreSQL's dialect (postgres_dialect.h); the PostgreSQL side of every backend difference (the
// schema version in the meta table, an advisory lock for the one writer); and a connection that
// comes back when the server went away, with its settings and holds.
#include "tuning_db/postgres_driver.h"

#include <pqxx/pqxx>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "support/error.h"
#include "tuning_db/postgres_dialect.h"

namespace ktune::tuning_db::sql {
namespace {

// The advisory lock every write transaction takes first ("ktun"): one writer at a time on the
// log, as BEGIN IMMEDIATE gives on SQLite. Advisory locks are per database.
constexpr int64_t kWriteLock = 0x6b74756e;
// SQLSTATEs of a lock not granted in time and of a deadlock.
constexpr std::string_view kLockNotAvailable = "55P03", kDeadlock = "40P01";

class PgConnection;

class PgStatement final : public StatementDriver {
 public:
  PgStatement(PgConnection& conn, std::string_view sql) : conn_(conn), sql_(sql) {
    const auto n = static_cast<size_t>(translate(sql, {}).second);
    values_.resize(n);
    types_.assign(n, Param::kNull);
  }

  void bind(int index, int64_t value) override { set(index, std::to_string(value), Param::kInt8); }
  void bind(int index, double value) override {
    // The shortest text that reads back as the same double.
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    set(index, std::string(buf, end), Param::kFloat8);
  }
  void bind(int index, std::string_view value) override {
    set(index, std::string(value), Param::kText);
  }
  void bind_blob(int index, std::span<const uint8_t> value) override {
    // bytea's hex input form: text parameters throughout, whatever the bytes.
    static constexpr char kHex[] = "0123456789abcdef";
    std::string text = "\\x";
    text.reserve(2 + 2 * value.size());
    for (uint8_t b : value) {
      text += kHex[b >> 4];
      text += kHex[b & 15];
    }
    set(index, std::move(text), Param::kBytea);
  }
  void bind_null(int index) override {
    slot(index);
    values_[static_cast<size_t>(index - 1)].reset();
    types_[static_cast<size_t>(index - 1)] = Param::kNull;
  }
  bool step() override;
  void reset() override {
    result_.reset();
    row_ = -1;
    for (auto& v : values_) v.reset();
  }
  bool is_null(int column) const override { return field(column).is_null(); }
  int64_t column_int(int column) const override {
    const char* text = field(column).c_str();
    // A boolean expression reads as 1 or 0, as on SQLite.
    if (text[0] == 't' && text[1] == 0) return 1;
    if (text[0] == 'f' && text[1] == 0) return 0;
    return std::strtoll(text, nullptr, 10);
  }
  double column_double(int column) const override {
    return std::strtod(field(column).c_str(), nullptr);
  }
  std::string column_text(int column) const override {
    const pqxx::field f = field(column);
    return std::string(f.c_str(), f.size());
  }
  std::vector<uint8_t> column_blob(int column) const override {
    const pqxx::binarystring bytes(field(column));
    return std::vector<uint8_t>(bytes.data(), bytes.data() + bytes.size());
  }

 private:
  pqxx::field field(int column) const {
    return (*result_)[static_cast<pqxx::result::size_type>(row_)]
                     [static_cast<pqxx::row::size_type>(column)];
  }
  void slot(int index) const {
    if (index < 1 || index > static_cast<int>(values_.size()))
      throw Error(ErrorKind::kInternal, "parameter ?" + std::to_string(index) + " is not in '" +
                                            sql_.substr(0, 60) + "'");
  }
  void set(int index, std::string value, Param type) {
    slot(index);
    const auto i = static_cast<size_t>(index - 1);
    values_[i] = std::move(value);
    types_[i] = type;
  }

  PgConnection& conn_;
  std::string sql_;
  std::vector<std::optional<std::string>> values_;
  std::vector<Param> types_;
  std::optional<pqxx::result> result_;  // all rows of the executed statement
  int row_ = -1;
};

// Notices (a warning of the server, ...) are not for the user's terminal.
class Silent final : public pqxx::errorhandler {
 public:
  using pqxx::errorhandler::errorhandler;
  bool operator()(const char[]) noexcept override { return false; }
};

class PgConnection final : public ConnectionDriver {
 public:
  PgConnection(std::string url, std::string location)
      : url_(std::move(url)), location_(std::move(location)) {
    try {
      connect();
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kDatabase,
                  "cannot open tuning log '" + location_ + "': " + one_line(e.what()));
    }
  }
  ~PgConnection() override { tx_.reset(); }

  // Runs a statement with parameters: prepared on this connection the first time its text is run
  // with these parameter types, executed by name from then on (the server parses and plans it
  // once). Throws Error(kDatabase).
  pqxx::result run(const std::string& sql, const std::vector<Param>& types,
                   const std::vector<std::optional<std::string>>& values) {
    std::string key = sql;
    for (Param t : types) key += static_cast<char>('0' + static_cast<int>(t));
    std::vector<const char*> params(values.size());
    for (size_t i = 0; i < values.size(); ++i) params[i] = values[i] ? values[i]->c_str() : nullptr;
    return guard(sql, Step::kStatement, [&] {
      auto it = prepared_.find(key);
      if (it == prepared_.end()) {
        const std::string name = "ktune_" + std::to_string(prepared_.size());
        conn_->prepare(name, translate(sql, types).first);
        it = prepared_.emplace(std::move(key), name).first;
      }
      const std::string& name = it->second;
      return in_work([&](pqxx::transaction_base& t) {
        return t.exec_prepared(name, pqxx::prepare::make_dynamic_params(params));
      });
    });
  }

  Backend backend() const override { return Backend::kPostgres; }
  const std::string& location() const override { return location_; }
  std::string_view kind() const override { return "a PostgreSQL database"; }

  std::unique_ptr<StatementDriver> prepare(std::string_view sql) override {
    return std::make_unique<PgStatement>(*this, sql);
  }
  void exec(std::string_view sql) override {
    const std::string text(sql);
    guard(text, Step::kStatement,
          [&] { return in_work([&](pqxx::transaction_base& t) { return t.exec(text); }); });
  }
  int64_t last_insert_id() override { return query_int("SELECT lastval()"); }
  int64_t changes() const override { return changes_; }
  bool last_error_was_busy() const override {
    return last_state_ == kLockNotAvailable || last_state_ == kDeadlock;
  }
  void begin(TransactionMode mode) override {
    guard("BEGIN", Step::kBegin, [&] {
      if (mode == TransactionMode::kDeferred)
        tx_ = std::make_unique<pqxx::transaction<pqxx::repeatable_read>>(*conn_);
      else
        // READ COMMITTED: each statement after the lock sees every write committed before it.
        tx_ = std::make_unique<pqxx::work>(*conn_);
      return pqxx::result();
    });
    if (mode == TransactionMode::kDeferred) return;
    try {
      exec("SELECT pg_advisory_xact_lock(" + std::to_string(kWriteLock) + ")");
    } catch (...) {
      rollback();
      throw;
    }
  }
  void commit() override {
    guard("COMMIT", Step::kCommit, [&] {
      std::unique_ptr<pqxx::transaction_base> tx = std::move(tx_);
      tx->commit();
      return pqxx::result();
    });
  }
  void rollback() noexcept override {
    try {
      if (tx_) tx_->abort();
    } catch (...) {
    }
    tx_.reset();
  }
  void set_busy_timeout(int ms) override {
    // 0 would mean "wait forever" here, where SQLite's 0 means "do not wait".
    exec(settings_.emplace_back("SET lock_timeout = " + std::to_string(std::max(1, ms))));
  }
  void set_read_only() override {
    exec(settings_.emplace_back("SET default_transaction_read_only = on"));
  }
  void set_reconnect_for(double seconds, std::function<bool()> stop) override {
    reconnect_for_s_ = std::max(0.0, seconds);
    stop_waiting_ = std::move(stop);
  }
  Lost last_error_lost() const override { return lost_; }
  void set_after_reconnect(std::function<void()> check) override {
    after_reconnect_ = std::move(check);
  }

  std::string ddl(std::string_view sqlite_ddl) const override { return postgres_ddl(sqlite_ddl); }
  // The meta table (from schema version 1) holds both; an empty database has none.
  int64_t application_id() override { return meta_int("application_id"); }
  int64_t schema_version() override { return meta_int("schema_version"); }
  void set_version(int32_t application_id, int version) override {
    PgStatement s(*this,
                  "INSERT INTO meta(key, value) VALUES (?1, ?2) "
                  "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    s.bind(1, std::string_view("application_id"));
    s.bind(2, std::to_string(application_id));
    while (s.step()) {
    }
    s.reset();
    s.bind(1, std::string_view("schema_version"));
    s.bind(2, std::to_string(version));
    while (s.step()) {
    }
  }
  int64_t schema_objects() override {
    return query_int(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i', 'v', 'S', 'p')");
  }
  bool has_object(std::string_view type, std::string_view name) override {
    PgStatement s(*this,
                  "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                  "WHERE n.nspname = current_schema() AND c.relname = ?2 AND "
                  "c.relkind = CASE WHEN ?1 = 'table' THEN 'r' ELSE 'i' END");
    s.bind(1, type);
    s.bind(2, name);
    return s.step();
  }
  // SQLite's integrity_check and foreign_key_check have these counterparts: every reference
  // between the log's tables is looked up (PostgreSQL enforces them on every write, but a
  // restore or a session with triggers off can leave a dangling one); the pages that failed
  // their checksum (a cluster initialised with data checksums counts them as it reads); and,
  // where the amcheck extension is installed in the database, the structure of every index.
  std::vector<std::string> integrity_problems() override {
    std::vector<std::string> problems;
    struct Reference {
      const char *table, *column, *target;
    };
    const Reference references[] = {{"records", "workload_id", "workloads"},
                                    {"records", "target_id", "targets"},
                                    {"records", "device_id", "devices"},
                                    {"records", "run_id", "runs"},
                                    {"models", "target_id", "targets"},
                                    {"run_batches", "run_id", "runs"},
                                    {"jobs", "run_id", "runs"}};
    for (const auto& [table, column, target] : references) {
      if (!has_object("table", table)) continue;
      PgStatement s(*this, std::string("SELECT x.") + column + " FROM " + table + " x WHERE x." +
                               column + " IS NOT NULL AND NOT EXISTS (SELECT 1 FROM " + target +
                               " t WHERE t.id = x." + column + ") LIMIT 100");
      while (s.step())
        problems.push_back(std::string("foreign key: a row of table ") + table +
                           " references a missing " + target + " row " + s.column_text(0));
    }
    if (const int64_t failures =
            query_int("SELECT coalesce(checksum_failures, 0) FROM pg_stat_database "
                      "WHERE datname = current_database()");
        failures > 0)
      problems.push_back("integrity: " + std::to_string(failures) +
                         " page checksum failures in this database");
    if (query_int("SELECT count(*) FROM pg_extension WHERE extname = 'amcheck'") > 0) {
      PgStatement indexes(*this,
                          "SELECT c.relname FROM pg_class c "
                          "JOIN pg_namespace n ON n.oid = c.relnamespace "
                          "JOIN pg_am a ON a.oid = c.relam "
                          "WHERE n.nspname = current_schema() AND c.relkind = 'i' AND "
                          "a.amname = 'btree' ORDER BY c.relname");
      while (indexes.step()) {
        const std::string index = indexes.column_text(0);
        try {
          PgStatement check(*this, "SELECT bt_index_check(?1::regclass)");
          check.bind(1, std::string_view(index));
          check.step();
        } catch (const Error& e) {
          problems.push_back("integrity: index " + index + ": " + e.what());
        }
      }
    }
    return problems;
  }

  // A session-level advisory lock of the two-key form, which PostgreSQL keeps apart from the
  // one-key write lock above.
  bool try_hold(int32_t space, int32_t key) override {
    const bool held = query_int(hold_sql(space, key)) == 1;
    if (held) holds_.insert({space, key});
    return held;
  }
  void release_hold(int32_t space, int32_t key) override {
    holds_.erase({space, key});
    exec("SELECT pg_advisory_unlock(" + std::to_string(space) + ", " + std::to_string(key) + ")");
  }
  std::vector<LostHold> lost_holds() override { return std::exchange(lost_holds_, {}); }

 private:
  // Where in a transaction a statement runs: what a lost connection did to it.
  enum class Step { kBegin, kStatement, kCommit };

  static std::string hold_sql(int32_t space, int32_t key) {
    return "SELECT pg_try_advisory_lock(" + std::to_string(space) + ", " + std::to_string(key) +
           ")";
  }
  // A new connection to the server, with this connection's settings and holds.
  void connect() {
    tx_.reset();
    silent_.reset();
    conn_.reset();
    prepared_.clear();
    conn_ = std::make_unique<pqxx::connection>(url_);
    silent_ = std::make_unique<Silent>(*conn_);
    // This driver keeps the session's state (settings, holds) and reconnects itself: libpqxx
    // must not reconnect behind its back.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    conn_->inhibit_reactivation(true);
#pragma GCC diagnostic pop
    pqxx::nontransaction session(*conn_);
    // Text columns hold UTF-8 (JSON, keys); notices below warnings are not for the user.
    session.exec("SET client_encoding = 'UTF8'; SET client_min_messages = warning");
    for (const std::string& setting : settings_) session.exec(setting);
    for (auto it = holds_.begin(); it != holds_.end();) {
      const auto [space, key] = *it;
      if (session.exec(hold_sql(space, key))[0][0].as<bool>()) {
        ++it;
        continue;
      }
      lost_holds_.push_back({space, key, holder_of(session, space, key)});
      it = holds_.erase(it);
    }
  }
  // The connection that holds the lock (space, key) of this database, as pg_stat_activity shows
  // it: its application name (when it set one), client address and backend pid. "" when no one
  // holds it or the server does not say.
  static std::string holder_of(pqxx::nontransaction& session, int32_t space, int32_t key) {
    pqxx::result r;
    try {
      r = session.exec(
          "SELECT a.application_name, coalesce(host(a.client_addr), 'local'), a.pid "
          "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
          "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND "
          "l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND "
          "l.classid = " +
          std::to_string(static_cast<uint32_t>(space)) +
          "::oid AND l.objid = " + std::to_string(static_cast<uint32_t>(key)) + "::oid LIMIT 1");
    } catch (const pqxx::sql_error&) {
      return "";  // not this role's to see
    }
    if (r.empty()) return "";
    std::string name = r[0][0].c_str();
    return (name.empty() ? std::string("a connection") : name) + " (client " + r[0][1].c_str() +
           ", backend pid " + r[0][2].c_str() + ")";
  }
  // Connects again, retrying with growing pauses until reconnect_for_s_ has passed; then throws
  // Error(kDatabase) with the last reason.
  void reconnect() {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto give_up = start + std::chrono::duration<double>(reconnect_for_s_);
    if (stop_waiting_ && stop_waiting_())
      throw Error(ErrorKind::kDatabase, "tuning log '" + location_ +
                                            "': lost the connection to PostgreSQL, and stopped "
                                            "before reconnecting");
    spdlog::warn(
        "tuning log '{}': the connection to PostgreSQL was lost; reconnecting for up to "
        "{} s",
        location_, reconnect_for_s_);
    auto pause = std::chrono::milliseconds(100);
    for (;;) {
      std::string why;
      try {
        connect();
        broken_ = false;
        spdlog::info("tuning log '{}': reconnected after {:.1f} s", location_,
                     std::chrono::duration<double>(Clock::now() - start).count());
        return;
      } catch (const std::exception& e) {
        why = one_line(e.what());
      }
      if (Clock::now() + pause > give_up)
        throw Error(ErrorKind::kDatabase, "tuning log '" + location_ +
                                              "': lost the connection to PostgreSQL, which did not "
                                              "come back within " +
                                              format_seconds(reconnect_for_s_) + " s: " + why);
      // In slices, so that a stop ends the wait at once.
      for (auto slept = std::chrono::milliseconds(0); slept < pause;
           slept += std::chrono::milliseconds(50)) {
        if (stop_waiting_ && stop_waiting_())
          throw Error(ErrorKind::kDatabase, "tuning log '" + location_ +
                                                "': lost the connection to PostgreSQL, and "
                                                "stopped waiting for it: " +
                                                why);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      pause = std::min(pause * 2, std::chrono::milliseconds(2000));
    }
  }
  static std::string format_seconds(double s) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, s);
    return std::string(buf, end);
  }
  // Runs `statement` on the open transaction, or on its own (autocommit) outside one.
  template <class Statement>
  pqxx::result in_work(Statement&& statement) {
    if (tx_) return statement(*tx_);
    pqxx::nontransaction alone(*conn_);
    return statement(alone);
  }
  // Runs `body` (libpqxx calls for statement `sql`, at `step` of a transaction), keeping its
  // count of changed rows; turns a failure into Error(kDatabase) with the server's message. A
  // lost connection (see set_reconnect_for) is waited for and the statement run again when no
  // transaction is open; inside one, the transaction is gone and the failure says so (lost_).
  template <class Body>
  pqxx::result guard(const std::string& sql, Step step, Body&& body) {
    lost_ = Lost::kNo;
    for (;;) {
      std::string lost_because;
      try {
        if (broken_) {
          if (reconnect_for_s_ <= 0) fail(sql, "the connection to PostgreSQL was lost");
          reconnect();
          if (after_reconnect_) after_reconnect_();
        }
        pqxx::result result = body();
        changes_ = static_cast<int64_t>(result.affected_rows());
        last_state_.clear();
        return result;
      } catch (const pqxx::broken_connection& e) {
        lost_because = e.what();
      } catch (const pqxx::in_doubt_error& e) {
        lost_because = e.what();
      } catch (const pqxx::sql_error& e) {
        // The server's last words before it closed the connection (it was shut down) come as an
        // error of the statement.
        if (conn_->is_open()) {
          last_state_ = e.sqlstate();
          fail(sql, e.what());
        }
        lost_because = e.what();
      } catch (const pqxx::deadlock_detected& e) {
        last_state_ = std::string(kDeadlock);
        fail(sql, e.what());
      } catch (const pqxx::failure& e) {
        if (conn_->is_open()) {
          last_state_.clear();
          fail(sql, e.what());
        }
        lost_because = e.what();
      }
      broken_ = true;
      last_state_.clear();
      const bool in_transaction = tx_ || step == Step::kCommit;
      tx_.reset();
      if (reconnect_for_s_ <= 0) fail(sql, lost_because);
      if (in_transaction) {
        lost_ = step == Step::kCommit ? Lost::kAtCommit : Lost::kBeforeCommit;
        fail(sql, "the connection to PostgreSQL was lost mid-transaction: " + lost_because);
      }
    }
  }
  [[noreturn]] void fail(const std::string& sql, const std::string& message) {
    std::string hint;
    if (last_error_was_busy())
      hint = " (another connection holds the log's lock beyond the busy timeout)";
    throw Error(ErrorKind::kDatabase, "tuning log '" + location_ + "': '" + sql.substr(0, 60) +
                                          "': " + one_line(message) + hint);
  }
  int64_t query_int(std::string_view sql) {
    PgStatement s(*this, sql);
    return s.step() && !s.is_null(0) ? s.column_int(0) : 0;
  }
  int64_t meta_int(std::string_view key) {
    if (query_int("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                  "WHERE n.nspname = current_schema() AND c.relname = 'meta'") == 0)
      return 0;
    PgStatement s(*this, "SELECT value FROM meta WHERE key = ?1");
    s.bind(1, key);
    return s.step() ? std::strtoll(s.column_text(0).c_str(), nullptr, 10) : 0;
  }

  const std::string url_;  // as given, password included: what reconnect() dials
  std::string location_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<Silent> silent_;
  std::unique_ptr<pqxx::transaction_base> tx_;  // the open transaction, if any
  // Statements prepared on this connection: their text and parameter types -> their name.
  std::unordered_map<std::string, std::string> prepared_;
  // What every new connection is set up with again: SET statements, and the holds it has.
  std::vector<std::string> settings_;
  std::set<std::pair<int32_t, int32_t>> holds_;
  std::vector<LostHold> lost_holds_;  // taken by another connection at a reconnect, not yet told
  double reconnect_for_s_ = 0;
  std::function<bool()> stop_waiting_;     // ends a wait for the server when it returns true
  std::function<void()> after_reconnect_;  // may throw to stop a reconnected statement
  bool broken_ = false;  // the connection was lost: the next statement reconnects first
  Lost lost_ = Lost::kNo;
  int64_t changes_ = 0;
  std::string last_state_;  // SQLSTATE of the last failure, "" after a success
};

bool PgStatement::step() {
  if (!result_) result_ = conn_.run(sql_, types_, values_);
  return ++row_ < static_cast<int>(result_->size());
}

}  // namespace

std::unique_ptr<ConnectionDriver> open_postgres(const std::string& url) {
  return std::make_unique<PgConnection>(url, shown_location(url));
}

}  // namespace ktune::tuning_db::sql
