// Defines the SQLite driver of the tuning log's SQL layer: a log that is a SQLite file.
#pragma once

#include <memory>
#include <string>

#include "tuning_db/sql.h"

namespace ktune::tuning_db::sql {

// Opens (and with `create`, creates) the file at `path` read-write. Throws Error(kDatabase) when
// SQLite cannot open it.
std::unique_ptr<ConnectionDriver> open_sqlite(const std::string& path, bool create);
// Opens the file read-only (see Connection::open_read_only). Throws as open_sqlite().
std::unique_ptr<ConnectionDriver> open_sqlite_read_only(const std::string& path, bool immutable);

}  // namespace ktune::tuning_db::sql
