// Tests of a PostgreSQL log whose server goes away and comes back (a cluster of the test's own,
// stopped and started): a Database that waits for it adds records across the gap, each once, and
// keeps its settings and job holds; one that does not wait, or waits less than the gap, fails
// with one line that says so.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/error.h"
#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/job_store.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {
namespace {

using testing::make_record;

class PostgresReconnect : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const auto bin = testing::PostgresServer::bin_dir(&why);
    if (!bin) GTEST_SKIP() << "PostgreSQL not tested: " << why;
    server_ = std::make_unique<testing::PostgresServer>(*bin);
    log_ = server_->create_database();
  }
  // Records of configs [from, to) of matmul 64.
  static std::vector<Record> records(int64_t from, int64_t to) {
    std::vector<Record> out;
    for (int64_t i = from; i < to; ++i) out.push_back(make_record(64, i, {1e-3 + 1e-6 * i}));
    return out;
  }
  // How many records the log holds.
  int64_t logged() { return Database::open(log_, {.create = false}).stats().records; }

  std::unique_ptr<testing::PostgresServer> server_;
  std::string log_;
};

TEST_F(PostgresReconnect, ADatabaseThatWaitsAddsAcrossTheGapEachRecordOnceAndKeepsItsHolds) {
  Database db = Database::open(log_, {.reconnect_for_s = 30});
  JobStore jobs(db);
  JobRow row;
  row.device_key = "x86";
  const int64_t id = jobs.add(row, /*hold=*/true);
  EXPECT_EQ(db.add(records(0, 10)).size(), 10u);

  server_->stop("fast");
  // Back in 2 s; meanwhile the next write waits for it.
  auto back = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    server_->start();
  });
  const auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(db.add(records(10, 20)).size(), 10u);
  EXPECT_GE(std::chrono::steady_clock::now() - before, std::chrono::seconds(1));
  back.get();
  EXPECT_EQ(db.add(records(20, 30)).size(), 10u);

  // Each once: 30 configs, 30 records.
  EXPECT_EQ(logged(), 30);
  // The job hold was taken again on the new connection: another connection cannot take it.
  Database other = Database::open(log_, {.create = false});
  EXPECT_FALSE(JobStore(other).try_hold(id));
  jobs.release(id);
  EXPECT_TRUE(JobStore(other).try_hold(id));
}

// A connection cut inside a write transaction (its server process ended while it waited for the
// log's write lock): the transaction runs again on a new connection, and its records are added
// once.
TEST_F(PostgresReconnect, AWriteCutMidTransactionRunsAgainAndAddsItsRecordsOnce) {
  Database db = Database::open(log_, {.reconnect_for_s = 30});
  db.add(records(0, 5));
  sql::Connection admin = sql::Connection::open(log_, false);
  std::optional<sql::Transaction> writer(std::in_place, admin);  // holds the log's write lock
  auto writing = std::async(std::launch::async, [&] { return db.add(records(5, 10)).size(); });
  const std::string waiting =
      "FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid != pg_backend_pid() AND "
      "query LIKE '%pg_advisory_xact_lock%'";
  for (int i = 0; i < 200 && admin.query_int("SELECT count(*) " + waiting) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(admin.query_int("SELECT count(pg_terminate_backend(pid)) " + waiting), 1);
  writer->commit();
  writer.reset();
  EXPECT_EQ(writing.get(), 5u);
  EXPECT_EQ(logged(), 10);
}

TEST_F(PostgresReconnect, ADatabaseThatWaitsLessThanTheGapFailsInOneLine) {
  Database waits = Database::open(log_, {.reconnect_for_s = 1});
  Database does_not = Database::open(log_, {.create = false});
  waits.add(records(0, 5));
  server_->stop("fast");
  for (Database* db : {&waits, &does_not}) {
    const auto before = std::chrono::steady_clock::now();
    try {
      db->add(records(5, 10));
      ADD_FAILURE() << "a write succeeded with PostgreSQL stopped";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDatabase);
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      if (db == &waits) {
        EXPECT_NE(what.find("did not come back within 1 s"), std::string::npos) << what;
        EXPECT_GE(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(500));
      }
    }
  }
  server_->start();
  // Back: the one that waits goes on; the records of the failed write are not in the log.
  waits.add(records(10, 15));
  EXPECT_EQ(logged(), 10);
}

}  // namespace
}  // namespace ktune::tuning_db
