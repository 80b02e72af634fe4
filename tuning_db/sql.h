// Defines the tuning log's SQL layer: Connection, Statement and Transaction over a backend driver
// (SQLite or PostgreSQL, chosen by the log's location), and the driver interfaces.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "support/error.h"

namespace ktune::tuning_db::sql {

enum class Backend { kSqlite, kPostgres };

// Whether `location` names a PostgreSQL database (a postgresql:// or postgres:// URL); anything
// else is the path of a SQLite file.
bool is_postgres_url(std::string_view location);
// `location` as messages show it: a URL's password (user:PASSWORD@ or password=) masked.
std::string shown_location(std::string_view location);

enum class TransactionMode {
  kDeferred,   // reads: one consistent snapshot
  kImmediate,  // writes: one writer at a time on the whole log, taken at BEGIN
};

// What losing the connection to the server did to the transaction of the statement that failed.
enum class Lost {
  kNo,            // the connection was not lost (or the driver does not reconnect)
  kBeforeCommit,  // lost inside a transaction, which therefore did not commit
  kAtCommit,      // lost while committing: the transaction may have committed
};

// A hold (ConnectionDriver::try_hold) that a connection had and lost: the connection broke, and
// another connection took the lock before this one came back.
struct LostHold {
  int32_t space = 0, key = 0;
  // Who holds it now, as the server describes that connection ("" when it does not say).
  std::string holder;
};

// One prepared statement of a backend. Shared SQL writes parameters as ?1, ?2, ...; a driver
// translates them to its own form. Bind indices start at 1, column indices at 0.
class StatementDriver {
 public:
  virtual ~StatementDriver() = default;
  virtual void bind(int index, int64_t value) = 0;
  virtual void bind(int index, double value) = 0;
  virtual void bind(int index, std::string_view value) = 0;
  virtual void bind_blob(int index, std::span<const uint8_t> value) = 0;
  virtual void bind_null(int index) = 0;
  virtual bool step() = 0;
  virtual void reset() = 0;
  virtual bool is_null(int column) const = 0;
  virtual int64_t column_int(int column) const = 0;
  virtual double column_double(int column) const = 0;
  virtual std::string column_text(int column) const = 0;
  virtual std::vector<uint8_t> column_blob(int column) const = 0;
};

// One connection of a backend, and everything about the log that differs between backends: how a
// write transaction excludes other writers, where the schema version is kept, the DDL types, the
// catalog. (Shared SQL keeps to what both accept: ?N parameters, ON CONFLICT ... DO UPDATE.) Shared
// code never branches on the backend; it asks its driver.
class ConnectionDriver {
 public:
  virtual ~ConnectionDriver() = default;
  virtual Backend backend() const = 0;
  // The log's location as shown in messages (a URL's password is masked).
  virtual const std::string& location() const = 0;
  // "a SQLite file", "a PostgreSQL database": what a foreign log is called in messages.
  virtual std::string_view kind() const = 0;

  virtual std::unique_ptr<StatementDriver> prepare(std::string_view sql) = 0;
  virtual void exec(std::string_view sql) = 0;
  virtual int64_t last_insert_id() = 0;
  virtual int64_t changes() const = 0;
  virtual bool last_error_was_busy() const = 0;
  virtual void begin(TransactionMode mode) = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  // How long to wait for another connection's write lock before failing.
  virtual void set_busy_timeout(int ms) = 0;
  // No write of this connection can succeed from now on.
  virtual void set_read_only() = 0;
  // How long to wait for the server to come back when the connection to it is lost (PostgreSQL
  // stopped or restarted; no effect on SQLite). A statement outside a transaction, and the BEGIN
  // of one, then wait for a new connection, retrying with growing pauses, and run on it (with this
  // connection's settings and holds taken again); past the bound they fail. A transaction the loss
  // cut fails (last_error_lost()). 0, the default: a lost connection fails the statement. When
  // `stop` (may be empty) returns true, a wait ends at once and the statement fails.
  virtual void set_reconnect_for(double seconds, std::function<bool()> stop) = 0;
  // Whether the last failure was the loss of the connection inside a transaction of a driver that
  // reconnects (see set_reconnect_for): the transaction is gone, and may run again.
  virtual Lost last_error_lost() const = 0;
  // Called after every reconnect, before anything runs on the new connection: a check that throws
  // fails the statement instead (an owner that may not write any more). Empty: none.
  virtual void set_after_reconnect(std::function<void()> check) = 0;

  // The schema's DDL, written with SQLite's types, in this backend's types.
  virtual std::string ddl(std::string_view sqlite_ddl) const = 0;
  // The log's application id and schema version (0 when never set).
  virtual int64_t application_id() = 0;
  virtual int64_t schema_version() = 0;
  // Written inside the caller's transaction, after the schema's tables exist.
  virtual void set_version(int32_t application_id, int version) = 0;
  // How many schema objects (tables, indexes, ...) the log holds: 0 for an empty log.
  virtual int64_t schema_objects() = 0;
  // Whether a table (`type` "table") or an index ("index") of that name exists.
  virtual bool has_object(std::string_view type, std::string_view name) = 0;
  // What the backend's own checks of storage and foreign keys find; empty when sound.
  virtual std::vector<std::string> integrity_problems() = 0;

  // Takes the lock `key` (one of its kind `space`) for this connection without waiting, if no
  // other connection holds it; held until released or the connection closes (its process ends),
  // whatever transactions do meanwhile. Returns whether this connection holds it. On SQLite,
  // where one server holds the whole file (LogLock), every hold is granted at once.
  virtual bool try_hold(int32_t space, int32_t key) = 0;
  virtual void release_hold(int32_t space, int32_t key) = 0;
  // The holds this connection lost at reconnects since the last call, each once. A reconnect
  // takes every hold again; one that another connection took meanwhile is no longer this one's.
  virtual std::vector<LostHold> lost_holds() = 0;
};

// A connection to the log at `location`. Movable, not copyable. Not thread-safe: use one
// Connection per thread (each backend coordinates several connections itself).
class Connection {
 public:
  // Opens the log at `location`: a PostgreSQL URL (its database must exist; `create` does not
  // apply) or a SQLite path (created when missing with `create`). Throws Error(kDatabase) when
  // the backend cannot open it.
  static Connection open(const std::string& location, bool create);
  // Opens a SQLite file read-only: nothing is written to it or beside it when SQLite can avoid it.
  // With `immutable`, SQLite takes the file as one no process changes (no locks, no -shm): the way
  // to read a WAL log in a directory this process cannot write. Throws as open().
  static Connection open_read_only(const std::string& path, bool immutable);

  Connection() = default;
  explicit Connection(std::unique_ptr<ConnectionDriver> driver);
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  ConnectionDriver& driver() { return *driver_; }
  Backend backend() const { return driver_->backend(); }
  const std::string& path() const { return driver_->location(); }

  // Runs `sql` (one or more statements without parameters). Throws Error(kDatabase).
  void exec(std::string_view sql) { driver_->exec(sql); }
  // Runs a one-row query without parameters and returns its first column as text ("" on NULL
  // or no row). Throws Error(kDatabase).
  std::string query_text(std::string_view sql);
  // Same, first column as an integer (0 on NULL or no row).
  int64_t query_int(std::string_view sql);
  // The id the last INSERT into a table with an id column gave its row.
  int64_t last_insert_rowid() { return driver_->last_insert_id(); }
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t changes() const { return driver_->changes(); }
  // True when the last failed call failed because another connection held a lock.
  bool last_error_was_busy() const { return driver_->last_error_was_busy(); }

 private:
  std::unique_ptr<ConnectionDriver> driver_;
};

// One prepared statement on a Connection (which must outlive it).
class Statement {
 public:
  // Prepares `sql` (parameters ?1, ?2, ...). Throws Error(kDatabase).
  Statement(Connection& conn, std::string_view sql);
  Statement(Statement&&) noexcept;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  Statement& bind(int index, int64_t value) { return driver_->bind(index, value), *this; }
  Statement& bind(int index, double value) { return driver_->bind(index, value), *this; }
  Statement& bind(int index, std::string_view value) { return driver_->bind(index, value), *this; }
  Statement& bind_blob(int index, std::span<const uint8_t> value) {
    return driver_->bind_blob(index, value), *this;
  }
  Statement& bind_null(int index) { return driver_->bind_null(index), *this; }

  // Advances to the next row. Returns true when a row is available, false when done.
  // Throws Error(kDatabase) on failure (busy beyond the busy timeout, corrupt file, constraint).
  bool step() { return driver_->step(); }
  // Runs a statement that returns no rows, then resets it. Throws Error(kDatabase).
  void run();
  // Resets the statement and clears its bindings, ready for reuse.
  void reset() { driver_->reset(); }

  bool is_null(int column) const { return driver_->is_null(column); }
  int64_t column_int(int column) const { return driver_->column_int(column); }
  double column_double(int column) const { return driver_->column_double(column); }
  std::string column_text(int column) const { return driver_->column_text(column); }
  std::vector<uint8_t> column_blob(int column) const { return driver_->column_blob(column); }

 private:
  std::unique_ptr<StatementDriver> driver_;
};

// A transaction on a Connection, begun on construction (see TransactionMode) and rolled back by
// the destructor unless commit() was called.
class Transaction {
 public:
  using Mode = TransactionMode;
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

// Runs `body(again)` in a transaction of `mode` and commits it. When the connection is lost
// meanwhile and its driver reconnects (ConnectionDriver::set_reconnect_for), runs it again, in a
// new transaction on the new connection; `again` is then true if an earlier attempt's commit may
// have been applied, so that a body that inserts rows skips those the log holds already. Returns
// what `body` returns. Throws what `body` or the commit throws otherwise.
template <class Body>
auto with_transaction(Connection& conn, TransactionMode mode, Body&& body) {
  // A connection that keeps breaking mid-transaction gets this many attempts.
  constexpr int kAttempts = 10;
  bool again = false;
  for (int attempt = 1;; ++attempt) {
    try {
      Transaction txn(conn, mode);
      if constexpr (std::is_void_v<decltype(body(again))>) {
        body(again);
        txn.commit();
        return;
      } else {
        auto result = body(again);
        txn.commit();
        return result;
      }
    } catch (const Error& e) {
      const Lost lost = conn.driver().last_error_lost();
      if (e.kind() != ErrorKind::kDatabase || lost == Lost::kNo || attempt == kAttempts) throw;
      again = again || lost == Lost::kAtCommit;
    }
  }
}

}  // namespace ktune::tuning_db::sql
