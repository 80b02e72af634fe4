// Crash safety: a child process adds batches in a loop and reports each committed batch; the
// test SIGKILLs it at random moments, 20 rounds. After each kill the log passes
// PRAGMA integrity_check and every batch the child reported is present exactly once (and no
// batch is present in part).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {
namespace {

constexpr int kRounds = 20;
constexpr int kBatchSize = 50;

struct Child {
  pid_t pid = -1;
  int out = -1;  // read end of the child's stdout
};

Child spawn_writer(const std::string& db, int64_t first_batch) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::string first = std::to_string(first_batch);
  std::string size = std::to_string(kBatchSize);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execl(KTUNE_DB_CRASH_WRITER, KTUNE_DB_CRASH_WRITER, db.c_str(), first.c_str(), size.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

// Reads everything the child wrote until EOF; returns the reported batch ids.
std::vector<int64_t> drain(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  std::vector<int64_t> ids;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    ids.push_back(std::stoll(text.substr(start, nl - start)));
  }
  return ids;
}

TEST(CrashSafety, SigkillNeverLosesOrDuplicatesACommittedBatch) {
  testing::TempDir dir;
  std::string path = dir.file("crash.db");
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> delay_ms(5, 300);
  std::set<int64_t> reported;
  int64_t next_batch = 0;
  int64_t total_reported_this_run = 0;

  for (int round = 0; round < kRounds; ++round) {
    Child child = spawn_writer(path, next_batch);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ASSERT_EQ(::kill(child.pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child.pid, &status, 0), child.pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited by itself, status " << status;
    ASSERT_EQ(WTERMSIG(status), SIGKILL);
    std::vector<int64_t> ids = drain(child.out);
    total_reported_this_run += static_cast<int64_t>(ids.size());
    reported.insert(ids.begin(), ids.end());

    // Opening recovers the WAL left by the dead writer.
    Database db = Database::open(path);
    CheckReport check = db.check();
    ASSERT_TRUE(check.ok()) << "round " << round << ": " << check.problems.front();

    auto conn = sql::Connection::open(path, false);
    EXPECT_EQ(conn.query_text("PRAGMA integrity_check"), "ok");
    std::map<int64_t, int64_t> present;
    sql::Statement s(conn, "SELECT batch, count(*) FROM records GROUP BY batch");
    while (s.step()) present[s.column_int(0)] = s.column_int(1);
    for (int64_t id : reported) {
      auto it = present.find(id);
      ASSERT_NE(it, present.end()) << "round " << round << ": reported batch " << id << " lost";
      EXPECT_EQ(it->second, kBatchSize) << "round " << round << ": batch " << id;
    }
    // A batch committed just before the kill may be unreported, but never partial.
    for (const auto& [id, count] : present) {
      EXPECT_EQ(count, kBatchSize) << "round " << round << ": batch " << id << " is partial";
    }
    next_batch = present.empty() ? next_batch : present.rbegin()->first + 1;
  }
  // The child must have committed batches in most rounds for the test to mean something.
  EXPECT_GT(total_reported_this_run, kRounds);
  std::printf("crash test: %lld batches reported over %d kills, %zu unique\n",
              static_cast<long long>(total_reported_this_run), kRounds, reported.size());
}

}  // namespace
}  // namespace ktune::tuning_db
