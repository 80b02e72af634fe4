// Defines the tuning log's SQL schema, its version, the migrations and the schema check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tuning_db/sql.h"

namespace ktune::tuning_db {

// Version of the schema this build writes (a SQLite file keeps its version in PRAGMA user_version,
// a PostgreSQL log in its meta table).
inline constexpr int kSchemaVersion = 9;
// The first version whose records have the emulated column.
inline constexpr int kEmulatedSchemaVersion = 5;
// The first version whose records and jobs name their client (and records their worker).
inline constexpr int kTenantsSchemaVersion = 6;
// The first version whose records have the re-timing and spread columns (retimed_costs, noisy).
inline constexpr int kRetimedSchemaVersion = 7;
// The first version with the per-step thread counts of built models (step_threads).
inline constexpr int kStepThreadsSchemaVersion = 8;
// The first version whose records have the disputed flag (Record::disputed).
inline constexpr int kDisputedSchemaVersion = 9;
// The application id of every ktune tuning log ("ktun"): tells ours from other databases.
inline constexpr int32_t kApplicationId = 0x6b74756e;

// Throws Error(kDatabase) unless the file behind `conn` is empty or a ktune tuning log of a
// version this build can read: a corrupt file, another application's SQLite file, a newer
// schema. Only reads, so a foreign file is left untouched.
void refuse_foreign(sql::Connection& conn);

// Makes the file behind `conn` a ktune tuning log of kSchemaVersion: initializes an empty file,
// or migrates an older one in place (one transaction; concurrent openers are safe), or accepts
// a current one. Call before switching to WAL so a foreign file is refused untouched.
// Returns the version found before any migration (0 for a new file).
// Throws Error(kDatabase): corrupt file, not a ktune log (other application_id or an unknown
// non-empty file), a newer schema than kSchemaVersion, an older one with `migrate` false.
int prepare_schema(sql::Connection& conn, bool migrate);

// Returns the problems of a tuning log's schema (application_id, version, every table and
// index this version needs); empty when it is sound. Throws Error(kDatabase) if unreadable.
std::vector<std::string> check_schema(sql::Connection& conn);

// Applies the migrations from version `from` up to `to` (both in [0, kSchemaVersion]) inside
// the caller's transaction. Exposed so tests can build a file of an older version.
void apply_migrations(sql::Connection& conn, int from, int to);

}  // namespace ktune::tuning_db
