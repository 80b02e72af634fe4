// Fault tests of `ktune server` processes on a PostgreSQL log (a cluster of each test's own, with
// 1 MB WAL files): the database's disk full mid-job (the cluster's processes under a file-size
// limit, as storage_fault_test does to a SQLite log; PostgreSQL ignores SIGXFSZ, so a write past
// the limit fails as on a full disk, "could not extend file", for any user and with no mount); a
// server whose connection was cut long enough for another server to take its job over (its role
// refused logins meanwhile), which stops running the job when it is back; and a server told to stop
// while PostgreSQL is away, which stops at once.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/rpc_runner/server/postgres_service_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/sql.h"

namespace ktune::rpc_runner {
namespace {

using testing::lines_of;
using testing::matmul_job;
using testing::wait_until;
using testing_process::Child;
using testing_process::read_file;

class PostgresFault : public testing::PostgresService {
 protected:
  void SetUp() override {
    std::string why;
    const auto bin = tuning_db::testing::PostgresServer::bin_dir(&why);
    if (!bin) GTEST_SKIP() << "PostgreSQL not tested: " << why;
    own_ = std::make_unique<tuning_db::testing::PostgresServer>(*bin, /*wal_segment_mb=*/1);
    postgres_ = own_.get();
    log_ = postgres_->create_database();
  }
  // The records of the job's workload once it runs, each config at most once.
  std::vector<tuning_db::Record> job_records(ServiceClient& client, uint64_t id) {
    return records_once(client.job(id).workload);
  }

  // Starts the mid-job server again on its port and watches the job to its end: done, each trial
  // recorded once in its run, and the fallback config.
  void restart_and_expect_done(MidJob& m, const std::string& port) {
    m.server = start_server("server", m.address, port, "60");
    ASSERT_FALSE(m.address.empty()) << err_of("server");
    const JobEvent last = m.client->watch(m.id);
    ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
    EXPECT_EQ(last.job.done, kMidJobTrials);
    EXPECT_EQ(job_records(*m.client, m.id).size(), kMidJobTrials + 1);
    expect_done_in_log(m.id, kMidJobTrials);
  }

  std::unique_ptr<tuning_db::testing::PostgresServer> own_;
};

TEST_F(PostgresFault, AFullDiskFailsTheJobInOneLineKeepsWhatItWroteAndARestartResumesIt) {
  // Past the size of a WAL file (1 MB), so that only the growth of a larger file fails.
  constexpr rlim_t kLimit = (1u << 20) + (128u << 10);
  {
    // Records of another workload, until the records table is larger than the limit: the job's
    // records then need the table to grow past it.
    auto db = tuning_db::Database::open(log_, {});
    auto conn = tuning_db::sql::Connection::open(log_, false);
    for (int64_t from = 0;
         conn.query_int("SELECT pg_relation_size('records')") <= static_cast<int64_t>(kLimit);
         from += 500) {
      std::vector<tuning_db::Record> batch;
      for (int64_t i = from; i < from + 500; ++i)
        batch.push_back(tuning_db::testing::make_record(96, i, {1e-3}));
      db.add(batch);
    }
  }
  MidJob m;
  ASSERT_NO_FATAL_FAILURE(start_mid_job(m, "60"));
  auto& client = m.client;
  const uint64_t id = m.id;
  constexpr uint64_t kTrials = kMidJobTrials;
  const std::string port = m.address.substr(m.address.rfind(':') + 1);

  // The disk fills up mid-job: the job fails with the reason, in one line.
  postgres_->limit_file_size(kLimit);
  ASSERT_TRUE(wait_until([&] { return client->job(id).finished(); }, 60))
      << postgres_->server_log();
  const JobStatus failed = client->job(id);
  EXPECT_EQ(failed.state, tuning_db::JobState::kFailed);
  EXPECT_NE(failed.message.find("the tuning log failed"), std::string::npos) << failed.message;
  EXPECT_NE(failed.message.find("could not extend file"), std::string::npos) << failed.message;
  EXPECT_EQ(failed.message.find('\n'), std::string::npos) << failed.message;
  EXPECT_LT(failed.done, kTrials);
  EXPECT_EQ(m.watcher->wait(20), 1) << read_file(temp_.path / "watch.err");
  const auto said = lines_of(read_file(temp_.path / "watch.err"));
  ASSERT_EQ(said.size(), 1u) << read_file(temp_.path / "watch.err");
  EXPECT_NE(said[0].find("could not extend file"), std::string::npos) << said[0];

  // The server goes on serving: its devices, its jobs, the log's best record of the workload.
  EXPECT_EQ(client->devices().size(), 1u);
  const auto listed = client->jobs(true);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].state, tuning_db::JobState::kFailed);

  // What the log kept: the records written before, each config once and whole, in the job's run;
  // the job's row unfinished.
  const auto before = job_records(*client, id);
  EXPECT_GE(before.size(), 16u);
  for (const auto& r : before) EXPECT_EQ(r.costs.empty(), r.error.has_value()) << r.config_index;
  {
    auto db = tuning_db::Database::open(log_, {.create = false});
    const auto row = tuning_db::JobStore(db).get(static_cast<int64_t>(id));
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->state, tuning_db::JobState::kRunning) << row->message;
    EXPECT_EQ(tuning_db::RunStore(db).count_records(row->run_id),
              static_cast<int64_t>(failed.done));
  }

  // Room made, the server restarted: it resumes the job, which ends done, each config once.
  postgres_->limit_file_size(RLIM_INFINITY);
  ::kill(m.server->pid, SIGTERM);
  EXPECT_EQ(m.server->wait(10), 0) << err_of("server");
  restart_and_expect_done(m, port);
}

// A server told to stop while PostgreSQL is away, with a write of its job waiting for it
// (--db-retry-s 60): it stops within seconds, saying so in one line, and a server started with
// PostgreSQL back resumes the job.
TEST_F(PostgresFault, AServerStoppedWhilePostgreSQLIsAwayStopsAtOnceAndARestartResumesTheJob) {
  MidJob m;
  ASSERT_NO_FATAL_FAILURE(start_mid_job(m, "60"));
  const std::string port = m.address.substr(m.address.rfind(':') + 1);

  postgres_->stop("fast");
  ASSERT_TRUE(wait_until(
      [&] { return err_of("server").find("reconnecting for up to 60 s") != std::string::npos; },
      20))
      << err_of("server");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto asked = std::chrono::steady_clock::now();
  ::kill(m.server->pid, SIGTERM);
  EXPECT_EQ(m.server->wait(10), 0) << err_of("server");
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(5));
  // It says that it shuts down, once; the job did not fail (its row waits for the next server).
  const auto said = lines_of(err_of("server"));
  EXPECT_EQ(std::count_if(
                said.begin(), said.end(),
                [](const std::string& l) { return l.find("SIGTERM: shutting down") != l.npos; }),
            1)
      << err_of("server");
  EXPECT_EQ(err_of("server").find("failed"), std::string::npos) << err_of("server");

  postgres_->start();
  restart_and_expect_done(m, port);
}

// Server "a" runs a job; its connections to the log are cut and its role may not log in, long
// enough for server "b" to take the job over; when "a" can connect again it stops running the
// job (nothing more measured or written for it there), says so naming the job and its holder,
// and a client watching there sees it run elsewhere and end. The job ends done under "b", no
// config measured twice.
TEST_F(PostgresFault, AServerBackAfterAnotherTookItsJobStopsRunningIt) {
  auto admin = tuning_db::sql::Connection::open(log_, false);
  admin.exec("CREATE ROLE server_a LOGIN SUPERUSER");
  std::string log_a = log_;
  log_a.replace(log_a.find("ktune@"), 6, "server_a@");

  Served a, b;
  a.server = start_server("a", a.address, "0", "60", log_a);
  ASSERT_FALSE(a.address.empty()) << err_of("a");
  b.server = start_server("b", b.address, "0", "60");
  ASSERT_FALSE(b.address.empty()) << err_of("b");
  for (Served* s : {&a, &b}) {
    s->device = device(s->address);
    s->client = client_of(s->address);
  }
  ASSERT_TRUE(wait_until(
      [&] { return a.client->devices().size() == 1 && b.client->devices().size() == 1; }, 20));
  constexpr uint64_t kTrials = 120;
  const uint64_t id = a.client->submit(matmul_job("cpu", kTrials)).id;
  Child watcher({KTUNE_BIN, "jobs", "watch", std::to_string(id), "--json", "--server", a.address},
                temp_.path / "watch.out", temp_.path / "watch.err");
  ASSERT_TRUE(wait_until([&] { return a.client->job(id).done >= 16; }, 60));
  ASSERT_TRUE(wait_until(
      [&] {
        try {
          return b.client->job(id).message == "run by another server of this log";
        } catch (const Error&) {
          return false;  // b has not read the log yet
        }
      },
      20));

  // a's connections cut, and a kept out: b takes the job over and runs it.
  admin.exec("ALTER ROLE server_a NOLOGIN");
  EXPECT_GE(admin.query_int("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE usename = 'server_a'"),
            2);
  ASSERT_TRUE(wait_until([&] { return b.device->received() > 0; }, 30)) << err_of("b");
  const size_t a_before = a.device->received();

  // a back: it stops running the job, in one line naming the job and its holder.
  admin.exec("ALTER ROLE server_a LOGIN");
  const std::string line_start = "job " + std::to_string(id) + ": another server of this log";
  ASSERT_TRUE(wait_until([&] { return err_of("a").find(line_start) != std::string::npos; }, 30))
      << err_of("a");
  const auto said = lines_of(err_of("a"));
  const auto line = std::find_if(said.begin(), said.end(), [&](const std::string& l) {
    return l.find(line_start) != std::string::npos;
  });
  ASSERT_NE(line, said.end());
  EXPECT_NE(line->find("held by "), std::string::npos) << *line;
  EXPECT_EQ(
      std::count_if(said.begin(), said.end(),
                    [&](const std::string& l) { return l.find(line_start) != std::string::npos; }),
      1)
      << err_of("a");

  // The job ends done under b; a's client sees it run elsewhere, then end.
  const JobEvent last = b.client->watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(last.job.done, kTrials);
  EXPECT_TRUE(wait_until([&] { return a.client->job(id).finished(); }, 10));
  EXPECT_EQ(a.client->job(id).state, tuning_db::JobState::kDone);
  EXPECT_EQ(watcher.wait(20), 0) << read_file(temp_.path / "watch.err");
  // From the cut on, a measured nothing more for it.
  EXPECT_EQ(a.device->received(), a_before) << "a went on running the job";

  // Every trial recorded once, of the job's run, and the fallback config. (The batch a measured
  // when its connection was cut is never written there; b may measure those configs again.)
  EXPECT_EQ(records_once().size(), kTrials + 1);
  expect_done_in_log(id, kTrials);
}

}  // namespace
}  // namespace ktune::rpc_runner
