// The backend-neutral SQL layer: the choice of driver by location, and what every driver shares.
#include "tuning_db/sql.h"

#include <algorithm>
#include <utility>

#include "tuning_db/postgres_driver.h"
#include "tuning_db/sqlite_driver.h"

namespace ktune::tuning_db::sql {

bool is_postgres_url(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

std::string shown_location(std::string_view location) {
  std::string out(location);
  if (!is_postgres_url(location)) return out;
  // user:PASSWORD@host
  const size_t scheme = out.find("://") + 3;
  const size_t at = out.find('@', scheme);
  const size_t colon = out.find(':', scheme);
  if (at != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  // ?password=PASSWORD&...
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    if (p == 0 || (out[p - 1] != '?' && out[p - 1] != '&')) continue;
    const size_t value = p + 9;
    const size_t end = std::min(out.find('&', value), out.size());
    out.replace(value, end - value, "***");
  }
  return out;
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
