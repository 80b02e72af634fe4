// RAII wrappers over the sqlite3 C API.
#include "tuning_db/sqlite.h"

#include <sqlite3.h>

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

}  // namespace

Connection Connection::open(const std::string& path, bool create) {
  Connection conn;
  conn.path_ = path;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (create) flags |= SQLITE_OPEN_CREATE;
  conn.db_ = open_handle(path, path, flags, "");
  return conn;
}

Connection Connection::open_read_only(const std::string& path, bool immutable) {
  Connection conn;
  conn.path_ = path;
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
  conn.db_ = open_handle(path, uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI,
                         " to read");
  return conn;
}

Connection::Connection(Connection&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Connection::~Connection() {
  // close_v2 defers the close until every statement is finalized, so destruction order of
  // a Database's members cannot leak the handle.
  if (db_) sqlite3_close_v2(db_);
}

void Connection::fail(int rc, std::string_view what) const {
  std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
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

bool Connection::last_error_was_busy() const {
  const int primary = db_ ? (sqlite3_errcode(db_) & 0xff) : 0;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

void Connection::exec(std::string_view sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    if (err) sqlite3_free(err);
    fail(rc, sql.substr(0, 60));
  }
}

std::string Connection::query_text(std::string_view sql) {
  Statement stmt(*this, sql);
  return stmt.step() ? stmt.column_text(0) : std::string();
}

int64_t Connection::query_int(std::string_view sql) {
  Statement stmt(*this, sql);
  return stmt.step() ? stmt.column_int(0) : 0;
}

int64_t Connection::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

int64_t Connection::changes() const { return sqlite3_changes64(db_); }

Statement::Statement(Connection& conn, std::string_view sql) : conn_(&conn) {
  int rc = sqlite3_prepare_v3(conn.get(), sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) conn.fail(rc, "prepare '" + std::string(sql.substr(0, 60)) + "'");
}

Statement::Statement(Statement&& other) noexcept
    : conn_(other.conn_), stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  // An empty string_view may have a null data(), which SQLite would bind as NULL, not ''.
  const char* data = value.data() ? value.data() : "";
  int rc = sqlite3_bind_text64(stmt_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind_blob(int index, std::span<const uint8_t> value) {
  // A zero-length blob must still be a blob, not NULL: SQLite needs a non-null pointer.
  static const uint8_t kEmpty = 0;
  const void* data = value.empty() ? &kEmpty : value.data();
  int rc = sqlite3_bind_blob64(stmt_, index, data, value.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind_null(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Reset first so that the statement releases its read lock before the error propagates.
  sqlite3_reset(stmt_);
  conn_->fail(rc, "step '" + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "'");
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::column_int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::column_text(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  if (!text) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::vector<uint8_t> Statement::column_blob(int column) const {
  const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, column));
  int n = sqlite3_column_bytes(stmt_, column);
  if (!data || n <= 0) return {};
  return std::vector<uint8_t>(data, data + n);
}

Transaction::Transaction(Connection& conn, Mode mode) : conn_(conn) {
  conn_.exec(mode == Mode::kImmediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED");
}

Transaction::~Transaction() {
  if (!done_) {
    // A failed ROLLBACK (no transaction active after an automatic rollback) is harmless here
    // and a destructor must not throw.
    sqlite3_exec(conn_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Transaction::commit() {
  conn_.exec("COMMIT");
  done_ = true;
}

}  // namespace ktune::tuning_db::sql
