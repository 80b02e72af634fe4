// The backend-neutral SQL layer: the choice of driver by location, and what every driver shares.
#include "tuning_db/sql.h"

#include <utility>

#include "tuning_db/postgres_driver.h"
#include "tuning_db/sqlite_driver.h"

namespace ktune::tuning_db::sql {

bool is_postgres_url(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

Connection Connection::open(const std::string& location, bool create) {
  if (is_postgres_url(location)) return Connection(open_postgres(location));
  return Connection(open_sqlite(location, create));
}

Connection Connection::open_read_only(const std::string& path, bool immutable) {
  return Connection(open_sqlite_read_only(path, immutable));
}

Connection::Connection(std::unique_ptr<ConnectionDriver> driver) : driver_(std::move(driver)) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

std::string Connection::query_text(std::string_view sql) {
  Statement stmt(*this, sql);
  return stmt.step() && !stmt.is_null(0) ? stmt.column_text(0) : std::string();
}

int64_t Connection::query_int(std::string_view sql) {
  Statement stmt(*this, sql);
  return stmt.step() && !stmt.is_null(0) ? stmt.column_int(0) : 0;
}

Statement::Statement(Connection& conn, std::string_view sql)
    : driver_(conn.driver().prepare(sql)) {}
Statement::Statement(Statement&&) noexcept = default;
Statement::~Statement() = default;

void Statement::run() {
  while (step()) {
  }
  reset();
}

Transaction::Transaction(Connection& conn, Mode mode) : conn_(conn) { conn_.driver().begin(mode); }

Transaction::~Transaction() {
  if (!done_) conn_.driver().rollback();
}

void Transaction::commit() {
  conn_.driver().commit();
  done_ = true;
}

}  // namespace ktune::tuning_db::sql
