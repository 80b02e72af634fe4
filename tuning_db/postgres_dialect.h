// Defines PostgreSQL's dialect of the tuning log's shared SQL (written for both backends with
// SQLite's types and ?N parameters): the typed parameters, the DDL types, one-line messages.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ktune::tuning_db::sql {

// The type a parameter is bound with.
enum class Param { kNull, kInt8, kFloat8, kText, kBytea };

// `sql` with ?N written $N and cast to the type parameter N is bound with (types[N - 1]; none past
// the end of `types`), outside quoted text: the server then plans it with those types, as SQLite
// takes any. And the highest N.
std::pair<std::string, int> translate(std::string_view sql, const std::vector<Param>& types);

// SQLite's INTEGER is 64 bits, REAL a double, and TEXT compares bytewise: on PostgreSQL BIGINT,
// DOUBLE PRECISION and TEXT COLLATE "C" (so ORDER BY gives SQLite's order); an INTEGER PRIMARY KEY
// is an identity column. Returns the DDL `sqlite_ddl` in those types.
std::string postgres_ddl(std::string_view sqlite_ddl);

// A server message on one line: its lines (a hint, a DETAIL) joined by "; ", no trailing space.
std::string one_line(std::string message);

}  // namespace ktune::tuning_db::sql
