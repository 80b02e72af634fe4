// Tests of JobStore and JobState: the states round-trip through the words the jobs table has
// always stored, terminal states set finished_at, the unfinished filter, unknown ids, holds.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "support/error.h"
#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/job_store.h"
#include "tuning_db/run_store.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {
namespace {

using testing::TempDir;

// Jobs run on both backends.
class JobStoreOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, JobStoreOn, testing::kBothBackends, testing::backend_test_name);

TEST(JobState, EveryStateHasOneWordAndReadsBack) {
  const std::pair<JobState, std::string> words[] = {{JobState::kQueued, "queued"},
                                                    {JobState::kRunning, "running"},
                                                    {JobState::kDone, "done"},
                                                    {JobState::kFailed, "failed"},
                                                    {JobState::kCancelled, "cancelled"}};
  int terminal = 0;
  for (const auto& [state, word] : words) {
    EXPECT_EQ(to_string(state), word);
    EXPECT_EQ(job_state_from_string(word), state);
    terminal += is_terminal(state);
  }
  EXPECT_EQ(terminal, 3);
  EXPECT_FALSE(is_terminal(JobState::kQueued));
  EXPECT_FALSE(is_terminal(JobState::kRunning));
  try {
    job_state_from_string("paused");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'paused'"), std::string::npos);
  }
}

TEST_P(JobStoreOn, StatesAreStoredAsTheirWordsAndTerminalOnesSetFinishedAt) {
  const std::string path = fresh("jobs.db");
  {
    Database db = Database::open(path);
    JobStore jobs(db);
    JobRow row;
    row.spec = {{"template", "matmul"}};
    row.device_key = "x86";
    row.priority = 3;
    row.owner = "alice";
    const int64_t a = jobs.add(row);
    const int64_t b = jobs.add(row);
    EXPECT_EQ(b, a + 1);
    const int64_t run = RunStore(db).begin({"xgb", "matmul(8,8,8)", "llvm", {}});
    jobs.update(a, JobState::kRunning, "", run);
    jobs.set_target(a, "llvm -mcpu=znver3");
    jobs.set_summary(a, "{\"best\":1}");
    jobs.update(b, JobState::kCancelled, "cancelled by a client");

    const JobRow got = *jobs.get(a);
    EXPECT_EQ(got.state, JobState::kRunning);
    EXPECT_EQ(got.run_id, run);
    EXPECT_EQ(got.priority, 3);
    EXPECT_EQ(got.owner, "alice");
    EXPECT_EQ(got.target, "llvm -mcpu=znver3");
    EXPECT_EQ(got.summary, "{\"best\":1}");
    EXPECT_EQ(got.spec["template"], "matmul");
    EXPECT_FALSE(got.finished_at.has_value());
    const JobRow cancelled = *jobs.get(b);
    EXPECT_EQ(cancelled.state, JobState::kCancelled);
    EXPECT_EQ(cancelled.message, "cancelled by a client");
    ASSERT_TRUE(cancelled.finished_at.has_value());
    EXPECT_GE(*cancelled.finished_at, cancelled.created_at);

    EXPECT_EQ(jobs.all().size(), 2u);
    ASSERT_EQ(jobs.all(true).size(), 1u);
    EXPECT_EQ(jobs.all(true)[0].id, a);
    // Back to queued clears finished_at; run id 0 keeps the run.
    jobs.update(b, JobState::kQueued, "", 0);
    EXPECT_FALSE(jobs.get(b)->finished_at.has_value());
    EXPECT_EQ(jobs.get(b)->run_id, 0);
    jobs.update(a, JobState::kDone, "");
    EXPECT_EQ(jobs.get(a)->run_id, run);
    EXPECT_TRUE(jobs.get(a)->finished_at.has_value());
  }
  // The table holds the words a log of an earlier version holds.
  sql::Connection conn = sql::Connection::open(path, false);
  sql::Statement states(conn, "SELECT state FROM jobs ORDER BY id");
  std::vector<std::string> words;
  while (states.step()) words.push_back(states.column_text(0));
  EXPECT_EQ(words, (std::vector<std::string>{"done", "queued"}));
}

TEST_P(JobStoreOn, UnknownJobsAndEmptyDeviceKeysAreRefused) {
  Database db = Database::open(fresh("jobs.db"));
  JobStore jobs(db);
  EXPECT_FALSE(jobs.get(42).has_value());
  for (auto call : {+[](JobStore& j) { j.update(42, JobState::kDone, ""); },
                    +[](JobStore& j) { j.set_target(42, "x"); },
                    +[](JobStore& j) { j.set_summary(42, "{}"); }}) {
    try {
      call(jobs);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    }
  }
  try {
    jobs.add(JobRow{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
  EXPECT_TRUE(jobs.all().empty());
}

// What a server watching a shared log reads each time: the jobs stored since its last look, by id,
// whichever connection stored them and whatever state they reached.
TEST_P(JobStoreOn, SinceGivesTheJobsStoredAfterAnIdInOrder) {
  const std::string path = fresh("jobs.db");
  Database db = Database::open(path);
  Database other = Database::open(path);
  JobStore mine(db), theirs(other);
  JobRow row;
  row.device_key = "x86";
  const int64_t a = mine.add(row);
  const int64_t b = theirs.add(row);
  theirs.update(b, JobState::kDone, "");
  EXPECT_TRUE(mine.since(b).empty());
  const std::vector<JobRow> after_a = mine.since(a);
  ASSERT_EQ(after_a.size(), 1u);
  EXPECT_EQ(after_a[0].id, b);
  EXPECT_EQ(after_a[0].state, JobState::kDone);
  const int64_t c = theirs.add(row);
  std::vector<int64_t> ids;
  for (const JobRow& r : mine.since(0)) ids.push_back(r.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{a, b, c}));
}

// Servers sharing a PostgreSQL log: a job is held by one connection at a time, from its
// insertion, until released or that connection closes. A SQLite log has one server: every hold
// is granted.
TEST_P(JobStoreOn, AJobIsHeldByOneConnectionUntilReleasedOrClosed) {
  const std::string log = fresh("jobs.db");
  const bool shared = GetParam() == sql::Backend::kPostgres;
  Database a = Database::open(log);
  JobRow row;
  row.device_key = "cpu";
  const int64_t first = JobStore(a).add(row, /*hold=*/true);
  const int64_t second = JobStore(a).add(row);
  std::optional<Database> b = Database::open(log);
  JobStore other(*b);
  EXPECT_EQ(other.try_hold(first), !shared);
  EXPECT_TRUE(other.try_hold(second));
  EXPECT_EQ(JobStore(a).try_hold(second), !shared);
  JobStore(a).release(first);
  EXPECT_TRUE(other.try_hold(first));
  b.reset();  // its holds go with its connection, once the server has seen it close
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!JobStore(a).try_hold(first) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(JobStore(a).try_hold(first));
  EXPECT_TRUE(JobStore(a).try_hold(second));
}

}  // namespace
}  // namespace ktune::tuning_db
