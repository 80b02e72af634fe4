// Defines small RAII wrappers over the sqlite3 C API: Connection, Statement, Transaction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace ktune::tuning_db::sql {

// One sqlite3 connection. Movable, not copyable. Not thread-safe: it is opened with
// SQLITE_OPEN_NOMUTEX, so use one Connection per thread (SQLite itself coordinates
// several connections, in this process or others, through its file locks).
class Connection {
 public:
  // Opens (and with `create`, creates) the file at `path` read-write. Returns the connection;
  // throws Error(kDatabase) when SQLite cannot open it.
  static Connection open(const std::string& path, bool create);
  // Opens the file read-only: nothing is written to it or beside it when SQLite can avoid it.
  // With `immutable`, SQLite takes the file as one no process changes (no locks, no -shm):
  // the way to read a WAL log in a directory this process cannot write. Throws as open().
  static Connection open_read_only(const std::string& path, bool immutable);

  Connection() = default;
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

  // Runs `sql` (one or more statements without parameters: DDL, pragmas, BEGIN/COMMIT).
  // Throws Error(kDatabase) with SQLite's message on failure.
  void exec(std::string_view sql);
  // Runs a one-row query without parameters and returns its first column as text ("" on NULL
  // or no row). Throws Error(kDatabase).
  std::string query_text(std::string_view sql);
  // Same, first column as an integer (0 on NULL or no row).
  int64_t query_int(std::string_view sql);

  int64_t last_insert_rowid() const;
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t changes() const;

  // True when the last failed call on this connection failed because another connection held
  // a lock (SQLITE_BUSY / SQLITE_LOCKED).
  bool last_error_was_busy() const;
  // Throws Error(kDatabase) describing result code `rc` of the operation `what`.
  [[noreturn]] void fail(int rc, std::string_view what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// One prepared statement. Bind indices start at 1, column indices at 0 (as in SQLite).
class Statement {
 public:
  // Prepares `sql` on `conn` (which must outlive the statement). Throws Error(kDatabase).
  Statement(Connection& conn, std::string_view sql);
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind_blob(int index, std::span<const uint8_t> value);
  Statement& bind_null(int index);

  // Advances to the next row. Returns true when a row is available, false when done.
  // Throws Error(kDatabase) on failure (busy after the busy timeout, corrupt file, constraint).
  bool step();
  // Runs a statement that returns no rows, then resets it. Throws Error(kDatabase).
  void run();
  // Resets the statement and clears its bindings, ready for reuse.
  void reset();

  bool is_null(int column) const;
  int64_t column_int(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;
  std::vector<uint8_t> column_blob(int column) const;

 private:
  Connection* conn_;
  sqlite3_stmt* stmt_ = nullptr;
};

// A transaction on a Connection: BEGIN IMMEDIATE (writes) or BEGIN DEFERRED (reads) on
// construction; rolled back by the destructor unless commit() was called.
class Transaction {
 public:
  enum class Mode { kDeferred, kImmediate };
  // Begins; throws Error(kDatabase) (for example: busy beyond the busy timeout).
  explicit Transaction(Connection& conn, Mode mode = Mode::kImmediate);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // Commits; throws Error(kDatabase), in which case the destructor rolls back.
  void commit();

 private:
  Connection& conn_;
  bool done_ = false;
};

}  // namespace ktune::tuning_db::sql
