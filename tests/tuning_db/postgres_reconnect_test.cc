// Tests of a PostgreSQL log whose server goes away and comes back (a cluster of the test's own,
// stopped and started): a Database that waits for it adds records across the gap, each once, and
// keeps its settings and job holds; a write cut mid-transaction or while committing (applied or
// not) runs again and adds each record once; one that does not wait, or waits less than the gap,
// fails with one line that says so.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/error.h"
#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/job_store.h"
#include "tuning_db/run_store.h"
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

// A hold that another connection took while this one was lost is no longer this one's: the
// reconnect reports it, once, with its holder as PostgreSQL shows it; the other holds come back.
// A check after the reconnect that throws fails the call before it writes.
TEST_F(PostgresReconnect, AHoldTakenWhileTheConnectionWasLostIsReportedAndACheckCanRefuseTheCall) {
  bool refuse = false;
  Database db = Database::open(log_, {.reconnect_for_s = 30, .after_reconnect = [&] {
                                        if (refuse) throw Error(ErrorKind::kDatabase, "refused");
                                      }});
  JobStore jobs(db);
  JobRow row;
  row.device_key = "x86";
  const int64_t lost = jobs.add(row, /*hold=*/true);
  const int64_t kept = jobs.add(row, /*hold=*/true);
  db.add(records(0, 5));
  server_->stop("fast");
  server_->start();
  Database other = Database::open(log_, {.create = false});
  ASSERT_TRUE(JobStore(other).try_hold(lost));

  refuse = true;
  try {
    db.add(records(5, 10));
    ADD_FAILURE() << "the check after the reconnect did not refuse the write";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "refused");
  }
  EXPECT_EQ(logged(), 5);
  const auto reported = jobs.lost_holds();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].first, lost);
  EXPECT_NE(reported[0].second.find("backend pid"), std::string::npos) << reported[0].second;
  EXPECT_TRUE(jobs.lost_holds().empty());
  EXPECT_FALSE(JobStore(other).try_hold(kept));
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
  // Watched from a connection of its own: inside the holder's transaction pg_stat_activity would
  // stay what its first read saw (PostgreSQL keeps one snapshot of it per transaction).
  sql::Connection watcher = sql::Connection::open(log_, false);
  const std::string waiting =
      "FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid != pg_backend_pid() AND "
      "query LIKE '%pg_advisory_xact_lock%'";
  for (int i = 0; i < 400 && watcher.query_int("SELECT count(*) " + waiting) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(watcher.query_int("SELECT count(pg_terminate_backend(pid)) " + waiting), 1)
      << watcher.query_text(
             "SELECT string_agg(coalesce(wait_event_type, '-') || ' ' || state || ' ' || query, "
             "' | ') FROM pg_stat_activity WHERE pid != pg_backend_pid()");
  writer->commit();
  writer.reset();
  EXPECT_EQ(writing.get(), 5u);
  EXPECT_EQ(logged(), 10);
}

// Polls `condition` every 50 ms for up to `seconds`; returns whether it held.
template <class Condition>
bool within(double seconds, Condition&& condition) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// The backends, other than the admin's, whose commit waits for a synchronous standby.
const std::string kWaitingForTheStandby =
    "FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND pid != pg_backend_pid()";

// Makes every commit to `log` wait, once applied locally, for a synchronous standby that never
// comes (on), or no longer (off). Whether commits wait is published by the checkpointer when it
// reloads the configuration, which can be well after the admin's backend shows the setting; so
// for `on`, a probe commit on a connection of its own must be seen waiting (it is then cut)
// before the test's write starts. For `off`, a commit still waiting is released when the
// checkpointer catches up.
void wait_for_a_standby(const std::string& log, sql::Connection& admin, bool on) {
  admin.exec("CREATE TABLE IF NOT EXISTS standby_probe(x int)");
  admin.exec(on ? "ALTER SYSTEM SET synchronous_standby_names = 'nobody'"
                : "ALTER SYSTEM RESET synchronous_standby_names");
  admin.exec("SELECT pg_reload_conf()");
  ASSERT_TRUE(within(
      10, [&] { return (admin.query_text("SHOW synchronous_standby_names") == "nobody") == on; }));
  if (!on) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    auto committing = std::async(std::launch::async, [&] {
      sql::Connection connection = sql::Connection::open(log, false);
      try {
        connection.exec("INSERT INTO standby_probe VALUES (1)");
      } catch (const Error&) {
        // cut while it waited
      }
    });
    // Until the probe returns: committed without waiting, or cut once seen waiting.
    bool waited = false;
    while (committing.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (admin.query_int("SELECT count(*) " + kWaitingForTheStandby) != 1) continue;
      admin.query_int("SELECT count(pg_terminate_backend(pid)) " + kWaitingForTheStandby);
      waited = true;
    }
    committing.get();
    if (waited) return;
  }
  FAIL() << "no commit waited for the standby in 20 s";
}

// Terminates the one backend that waits for the standby, once it does.
void cut_the_waiting_commit(sql::Connection& admin) {
  ASSERT_TRUE(
      within(20, [&] { return admin.query_int("SELECT count(*) " + kWaitingForTheStandby) == 1; }));
  ASSERT_EQ(admin.query_int("SELECT count(pg_terminate_backend(pid)) " + kWaitingForTheStandby), 1);
}

// A connection cut while committing, after the commit was applied: the server had committed the
// write locally and waited for a synchronous standby that never comes (synchronous_standby_names
// names none), when the backend was terminated. The outcome is unknown to the writer, which runs
// the write again and finds every record of it in the log: each is there once.
TEST_F(PostgresReconnect, ACommitAppliedButCutRunsAgainAndAddsNothingTwice) {
  Database db = Database::open(log_, {.reconnect_for_s = 30});
  db.add(records(0, 5));
  sql::Connection admin = sql::Connection::open(log_, false);
  wait_for_a_standby(log_, admin, true);
  auto writing = std::async(std::launch::async, [&] { return db.add(records(5, 10)); });
  cut_the_waiting_commit(admin);
  // Applied: its records are in the log, while a run again could not have committed (its commit
  // would wait for the standby as well).
  EXPECT_TRUE(within(10, [&] { return admin.query_int("SELECT count(*) FROM records") == 10; }));
  wait_for_a_standby(log_, admin, false);
  const std::vector<int64_t> ids = writing.get();
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 5u);
  EXPECT_EQ(logged(), 10);
  // Cut after it committed locally, as the probe commit before it.
  const std::string server_log = server_->server_log();
  int cut_after_applied = 0;
  for (size_t at = server_log.find("committed locally"); at != std::string::npos;
       at = server_log.find("committed locally", at + 1))
    ++cut_after_applied;
  EXPECT_EQ(cut_after_applied, 2) << server_log;
}

// The same cut when a tuning run begins: the run again finds the run row the cut commit stored
// and gives its id, instead of storing a second run.
TEST_F(PostgresReconnect, ARunBegunWhoseCommitWasAppliedButCutIsStoredOnce) {
  Database db = Database::open(log_, {.reconnect_for_s = 30});
  sql::Connection admin = sql::Connection::open(log_, false);
  wait_for_a_standby(log_, admin, true);
  auto beginning = std::async(std::launch::async, [&] {
    return RunStore(db).begin({.tuner = "xgb", .workload_key = "matmul_64", .target = "llvm"});
  });
  cut_the_waiting_commit(admin);
  EXPECT_TRUE(within(10, [&] { return admin.query_int("SELECT count(*) FROM runs") == 1; }));
  wait_for_a_standby(log_, admin, false);
  const int64_t id = beginning.get();
  EXPECT_EQ(admin.query_int("SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(admin.query_int("SELECT id FROM runs"), id);
}

// A connection cut while committing, before the commit was applied (a deferred trigger the test
// made keeps COMMIT waiting): the write runs again and adds its records, each once.
TEST_F(PostgresReconnect, ACommitCutBeforeItAppliedRunsAgainAndAddsEachRecordOnce) {
  Database db = Database::open(log_, {.reconnect_for_s = 30});
  db.add(records(0, 5));
  sql::Connection admin = sql::Connection::open(log_, false);
  admin.exec(
      "CREATE TABLE cut_at_commit(x int); INSERT INTO cut_at_commit VALUES (1);"
      "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF EXISTS (SELECT 1 FROM cut_at_commit) THEN PERFORM pg_sleep(60); END IF; RETURN NULL; "
      "END $$;"
      "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON records DEFERRABLE INITIALLY "
      "DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()");
  auto writing = std::async(std::launch::async, [&] { return db.add(records(5, 10)); });
  const std::string waiting =
      "FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND pid != pg_backend_pid()";
  ASSERT_TRUE(within(20, [&] { return admin.query_int("SELECT count(*) " + waiting) == 1; }));
  admin.exec("DELETE FROM cut_at_commit");  // the run again commits at once
  ASSERT_EQ(admin.query_int("SELECT count(pg_terminate_backend(pid)) " + waiting), 1);
  EXPECT_EQ(writing.get().size(), 5u);
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
