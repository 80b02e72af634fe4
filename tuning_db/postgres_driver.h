// Defines the PostgreSQL driver of the tuning log's SQL layer (over libpqxx): a log in a database.
#pragma once

#include <memory>
#include <string>

#include "tuning_db/sql.h"

namespace ktune::tuning_db::sql {

// Connects to the database at `url` (postgresql://user@host:port/db?host=/socket/dir ...).
// Throws Error(kDatabase) when the server cannot be reached or refuses the connection.
std::unique_ptr<ConnectionDriver> open_postgres(const std::string& url);

}  // namespace ktune::tuning_db::sql
