// The SQLite driver: RAII over the sqlite3 C API, and the SQLite side of every backend difference
// (PRAGMA user_version and application_id, sqlite_master, BEGIN IMMEDIATE).
#include "tuning_db/sqlite_driver.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "support/error.h"

namespace ktune::tuning_db::sql {
namespace {

// Opens `name` (a path or a file: URI) with `flags`; errors name `path`.
sqlite3* open_handle(const std::string& path, const std::string& name, int flags, const char* why) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(name.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (db) sqlite3_close_v2(db);
    throw Error(ErrorKind::kDatabase,
                "cannot open tuning log '" + path + "'" + why + ": " + message);
  }
  sqlite3_extended_result_codes(db, 1);
  return db;
}

class SqliteConnection;

class SqliteStatement final : public StatementDriver {
 public:
  SqliteStatement(SqliteConnection& conn, std::string_view sql);
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }

  void bind(int index, int64_t value) override { check(sqlite3_bind_int64(stmt_, index, value)); }
  void bind(int index, double value) override { check(sqlite3_bind_double(stmt_, index, value)); }
  void bind(int index, std::string_view value) override {
    // An empty string_view may have a null data(), which SQLite would bind as NULL, not ''.
    const char* data = value.data() ? value.data() : "";
    check(sqlite3_bind_text64(stmt_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  void bind_blob(int index, std::span<const uint8_t> value) override {
    // A zero-length blob must still be a blob, not NULL: SQLite needs a non-null pointer.
    static const uint8_t kEmpty = 0;
    const void* data = value.empty() ? &kEmpty : value.data();
    check(sqlite3_bind_blob64(stmt_, index, data, value.size(), SQLITE_TRANSIENT));
  }
  void bind_null(int index) override { check(sqlite3_bind_null(stmt_, index)); }
  bool step() override;
  void reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  bool is_null(int column) const override {
    return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
  }
  int64_t column_int(int column) const override { return sqlite3_column_int64(stmt_, column); }
  double column_double(int column) const override { return sqlite3_column_double(stmt_, column); }
  std::string column_text(int column) const override {
    const auto* text = sqlite3_column_text(stmt_, column);
    if (!text) return {};
    return std::string(reinterpret_cast<const char*>(text),
                       static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
  }
  std::vector<uint8_t> column_blob(int column) const override {
    const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, column));
    int n = sqlite3_column_bytes(stmt_, column);
    if (!data || n <= 0) return {};
    return std::vector<uint8_t>(data, data + n);
  }

 private:
  void check(int rc);
  SqliteConnection& conn_;
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteConnection final : public ConnectionDriver {
 public:
  SqliteConnection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  // close_v2 defers the close until every statement is finalized, so the destruction order of a
  // Database's members cannot leak the handle.
  ~SqliteConnection() override { sqlite3_close_v2(db_); }

  sqlite3* get() const { return db_; }

  // Throws Error(kDatabase) describing result code `rc` of the operation `what`.
  [[noreturn]] void fail(int rc, std::string_view what) const {
    std::string message = sqlite3_errmsg(db_);
    int primary = rc & 0xff;
    std::string hint;
    if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) {
      hint = " (the file is corrupt or not a SQLite database)";
    } else if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
      hint = " (another process holds the lock beyond the busy timeout)";
    }
    throw Error(ErrorKind::kDatabase,
                "tuning log '" + path_ + "': " + std::string(what) + ": " + message + hint);
  }

  Backend backend() const override { return Backend::kSqlite; }
  const std::string& location() const override { return path_; }
  std::string_view kind() const override { return "a SQLite file"; }

  std::unique_ptr<StatementDriver> prepare(std::string_view sql) override {
    return std::make_unique<SqliteStatement>(*this, sql);
  }
  void exec(std::string_view sql) override {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      if (err) sqlite3_free(err);
      fail(rc, sql.substr(0, 60));
    }
  }
  int64_t last_insert_id() override { return sqlite3_last_insert_rowid(db_); }
  int64_t changes() const override { return sqlite3_changes64(db_); }
  bool last_error_was_busy() const override {
    const int primary = sqlite3_errcode(db_) & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
  }
  void begin(TransactionMode mode) override {
    exec(mode == TransactionMode::kImmediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED");
  }
  void commit() override { exec("COMMIT"); }
  void rollback() noexcept override {
    // A failed ROLLBACK (no transaction active after an automatic rollback) is harmless here.
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  // A file has no connection to lose.
  void set_reconnect_for(double, std::function<bool()>) override {}
  Lost last_error_lost() const override { return Lost::kNo; }
  void set_after_reconnect(std::function<void()>) override {}
  void set_busy_timeout(int ms) override {
    exec("PRAGMA busy_timeout = " + std::to_string(std::max(0, ms)));
  }
  void set_read_only() override { exec("PRAGMA query_only = ON"); }

  std::string ddl(std::string_view sqlite_ddl) const override { return std::string(sqlite_ddl); }
  int64_t application_id() override { return query_int("PRAGMA application_id"); }
  int64_t schema_version() override { return query_int("PRAGMA user_version"); }
  void set_version(int32_t application_id, int version) override {
    exec("PRAGMA application_id = " + std::to_string(application_id));
    exec("PRAGMA user_version = " + std::to_string(version));
  }
  int64_t schema_objects() override { return query_int("SELECT count(*) FROM sqlite_master"); }
  bool has_object(std::string_view type, std::string_view name) override {
    SqliteStatement stmt(*this, "SELECT 1 FROM sqlite_master WHERE type = ?1 AND name = ?2");
    stmt.bind(1, type);
    stmt.bind(2, name);
    return stmt.step();
  }
  // A SQLite log has one server (its LogLock): nothing to hold apart within it.
  bool try_hold(int32_t, int32_t) override { return true; }
  void release_hold(int32_t, int32_t) override {}
  std::vector<LostHold> lost_holds() override { return {}; }
  std::vector<std::string> integrity_problems() override {
    std::vector<std::string> problems;
    {
      SqliteStatement s(*this, "PRAGMA integrity_check");
      while (s.step()) {
        std::string row = s.column_text(0);
        if (row != "ok") problems.push_back("integrity: " + row);
      }
    }
    SqliteStatement s(*this, "PRAGMA foreign_key_check");
    while (s.step()) {
      problems.push_back("foreign key: row " + std::to_string(s.column_int(1)) + " of table " +
                         s.column_text(0) + " references a missing " + s.column_text(2));
    }
    return problems;
  }

 private:
  int64_t query_int(std::string_view sql) {
    SqliteStatement stmt(*this, sql);
    return stmt.step() ? stmt.column_int(0) : 0;
  }
  sqlite3* db_;
  std::string path_;
};

SqliteStatement::SqliteStatement(SqliteConnection& conn, std::string_view sql) : conn_(conn) {
  int rc = sqlite3_prepare_v3(conn.get(), sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) conn.fail(rc, "prepare '" + std::string(sql.substr(0, 60)) + "'");
}

void SqliteStatement::check(int rc) {
  if (rc != SQLITE_OK) conn_.fail(rc, "bind");
}

bool SqliteStatement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Reset first so that the statement releases its read lock before the error propagates.
  sqlite3_reset(stmt_);
  conn_.fail(rc, "step '" + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "'");
}

}  // namespace

std::unique_ptr<ConnectionDriver> open_sqlite(const std::string& path, bool create) {
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (create) flags |= SQLITE_OPEN_CREATE;
  return std::make_unique<SqliteConnection>(open_handle(path, path, flags, ""), path);
}

std::unique_ptr<ConnectionDriver> open_sqlite_read_only(const std::string& path, bool immutable) {
  // A URI, so that immutable can be asked for; the path is percent-encoded where URIs need it.
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      uri += buf;
    } else {
      uri += c;
    }
  }
  uri += immutable ? "?mode=ro&immutable=1" : "?mode=ro";
  sqlite3* db = open_handle(path, uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI,
                            " to read");
  return std::make_unique<SqliteConnection>(db, path);
}

}  // namespace ktune::tuning_db::sql
