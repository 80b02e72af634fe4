// Smoke test of the SQLite dependency: a WAL-mode database round-trips rows, and a
// second connection reads what the first committed while the first keeps its file open.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "tests/tuning_db/test_util.h"

namespace {

void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  ASSERT_EQ(rc, SQLITE_OK) << (err ? err : "") << " in " << sql;
}

TEST(SqliteWalSmoke, RoundTripsRowsInWalMode) {
  ktune::tuning_db::testing::TempDir dir;
  std::string path = dir.file("smoke.db");
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &writer), SQLITE_OK);

  sqlite3_stmt* mode = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(writer, "PRAGMA journal_mode = WAL", -1, &mode, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(mode), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(mode, 0)), "wal");
  sqlite3_finalize(mode);

  exec(writer, "CREATE TABLE t(k INTEGER PRIMARY KEY, v REAL, s TEXT)");
  exec(writer, "BEGIN");
  sqlite3_stmt* ins = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(writer, "INSERT INTO t VALUES (?, ?, ?)", -1, &ins, nullptr),
            SQLITE_OK);
  for (int i = 0; i < 100; ++i) {
    sqlite3_bind_int(ins, 1, i);
    sqlite3_bind_double(ins, 2, i * 0.25);
    std::string s = "row" + std::to_string(i);
    sqlite3_bind_text(ins, 3, s.c_str(), -1, SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(ins), SQLITE_DONE);
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  exec(writer, "COMMIT");

  // The -wal file exists while the writer is open: the rows live in the WAL, not yet the db.
  EXPECT_TRUE(std::filesystem::exists(path + "-wal"));

  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &reader), SQLITE_OK);
  sqlite3_stmt* sel = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(reader, "SELECT k, v, s FROM t ORDER BY k", -1, &sel, nullptr),
            SQLITE_OK);
  int n = 0;
  double sum = 0;
  while (sqlite3_step(sel) == SQLITE_ROW) {
    EXPECT_EQ(sqlite3_column_int(sel, 0), n);
    EXPECT_EQ(reinterpret_cast<const char*>(sqlite3_column_text(sel, 2)),
              "row" + std::to_string(n));
    sum += sqlite3_column_double(sel, 1);
    ++n;
  }
  sqlite3_finalize(sel);
  EXPECT_EQ(n, 100);
  EXPECT_DOUBLE_EQ(sum, 0.25 * 99 * 100 / 2);
  sqlite3_close(reader);
  sqlite3_close(writer);
}

}  // namespace
