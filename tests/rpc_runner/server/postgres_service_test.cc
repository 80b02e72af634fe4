// End-to-end tests of `ktune server` on a PostgreSQL log (a throwaway cluster of the test's own),
// as processes on 127.0.0.1: one server with a `ktune worker` runs a job to the end; two servers
// share one log, each with its device, and tune the same workload without measuring a config
// twice; a server takes over the job of a server that died; PostgreSQL stopping mid-job pauses the
// job until it is back; PostgreSQL away for longer than --db-retry-s fails the job in one line,
// and a restart resumes it.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/rpc_runner/server/postgres_service_util.h"

namespace ktune::rpc_runner {
namespace {

using testing::matmul_job;
using testing::PostgresService;
using testing::wait_until;
using testing_process::Child;
using testing_process::read_file;

TEST_F(PostgresService, OneServerRunsAJobWithADeviceWorkerToTheEnd) {
  std::string address;
  auto server = start_server("server", address);
  ASSERT_FALSE(address.empty()) << err_of("server");
  Child worker({KTUNE_BIN, "worker", "--server", address, "--key", "k", "--runner",
                KTUNE_RUNNER_PATH, "--slots", "1"},
               temp_.path / "worker.out", temp_.path / "worker.err");
  auto client = client_of(address);
  ASSERT_TRUE(wait_until([&] { return client->devices().size() == 1; }, 20))
      << read_file(temp_.path / "worker.err");

  constexpr uint64_t kTrials = 12;
  const uint64_t id = client->submit(matmul_job("k", kTrials)).id;
  const JobEvent last = client->watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(last.job.done, kTrials);

  // The trials and the fallback config, each once, all of the job's run but the fallback.
  EXPECT_EQ(records_once().size(), kTrials + 1);
  expect_done_in_log(id, kTrials);
  // The server names its log.
  EXPECT_NE(read_file(temp_.path / "server.err").find("log postgresql://"), std::string::npos)
      << read_file(temp_.path / "server.err");
}

TEST_F(PostgresService, TwoServersOnOneLogTuneTheSameWorkloadWithoutMeasuringAConfigTwice) {
  Served a, b;
  ASSERT_NO_FATAL_FAILURE(start_two(a, b));
  auto& device_a = a.device;
  auto& device_b = b.device;
  auto& client_a = a.client;
  auto& client_b = b.client;

  // The same search (random, same seed) on both: every config one proposes, the other does too.
  constexpr uint64_t kTrials = 48;
  const uint64_t on_a = client_a->submit(matmul_job("cpu", kTrials)).id;
  const uint64_t on_b = client_b->submit(matmul_job("cpu", kTrials)).id;
  EXPECT_NE(on_a, on_b);
  const JobEvent end_a = client_a->watch(on_a);
  const JobEvent end_b = client_b->watch(on_b);
  ASSERT_EQ(end_a.job.state, tuning_db::JobState::kDone) << end_a.job.message;
  ASSERT_EQ(end_b.job.state, tuning_db::JobState::kDone) << end_b.job.message;
  EXPECT_EQ(end_a.job.done, kTrials);
  EXPECT_EQ(end_b.job.done, kTrials);

  // Every measurement is a record, once: the two jobs' trials and one fallback config.
  const auto records = records_once();
  EXPECT_EQ(records.size(), 2 * kTrials + 1);
  // Measured again on purpose: the fallback config, which each job measures for its own
  // speed-up (one of them logs it), and the best configs, which each job re-times at its end.
  std::set<int64_t> again;
  for (const auto& r : records)
    if (r.tuner == "fallback" || !r.retimed_costs.empty()) again.insert(r.config_index);
  EXPECT_GE(again.size(), 2u);
  // Every other config reached one device, once.
  std::set<int64_t> sent;
  for (const auto* d : {device_a.get(), device_b.get()}) {
    EXPECT_GT(d->received(), 0u);
    for (uint64_t config : d->configs()) {
      const auto index = static_cast<int64_t>(config);
      EXPECT_TRUE(sent.insert(index).second || again.count(index) > 0)
          << "config " << config << " was measured twice";
    }
  }
  EXPECT_EQ(sent.size(), records.size());
}

TEST_F(PostgresService, AServerTakesOverTheJobOfAServerThatDied) {
  // Both servers run before the job is submitted: the second learns of it from the log. The
  // first's device answers 24 candidates and then holds the rest, so the job is mid-way for as
  // long as the test looks at it, however fast the machine.
  Served a, b;
  ASSERT_NO_FATAL_FAILURE(start_two(a, b, 24));
  auto& device_b = b.device;
  auto& client_a = a.client;
  auto& client_b = b.client;
  constexpr uint64_t kTrials = 120;
  const uint64_t id = client_a->submit(matmul_job("cpu", kTrials)).id;
  ASSERT_TRUE(wait_until([&] { return client_a->job(id).done >= 16; }, 60));

  // The second server sees the job running on the first and leaves it there.
  // (Until it has read the log, the second server answers "no job".)
  std::string seen;
  ASSERT_TRUE(wait_until(
      [&] {
        try {
          seen = client_b->job(id).message;
        } catch (const Error& e) {
          seen = e.what();
        }
        return seen == "run by another server of this log";
      },
      20))
      << seen;
  try {
    client_b->cancel(id);
    ADD_FAILURE() << "a job of another server was cancelled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run by another server of this log"), std::string::npos)
        << e.what();
  }
  // The second shows the first's progress, read from the log: its trials done catch up with
  // those the first reports, while the job runs there.
  const uint64_t done_on_a = client_a->job(id).done;
  JobStatus on_b;
  EXPECT_TRUE(wait_until(
      [&] {
        on_b = client_b->job(id);
        return on_b.done >= done_on_a;
      },
      10))
      << on_b.done << " of " << done_on_a;
  EXPECT_EQ(on_b.state, tuning_db::JobState::kRunning);
  EXPECT_EQ(on_b.message, "run by another server of this log");
  EXPECT_EQ(device_b->received(), 0u);
  EXPECT_FALSE(client_a->job(id).finished());

  // The first dies mid-job: the second takes the job over and ends it, with the trials left.
  a.server->kill(SIGKILL);
  const JobEvent last = client_b->watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(last.job.done, kTrials);
  EXPECT_GT(device_b->received(), 0u);
  EXPECT_EQ(records_once().size(), kTrials + 1);
  expect_done_in_log(id, kTrials);
}

// PostgreSQL stopped by its administrator mid-job and started again a few seconds later: the job
// waits for it and goes on, every trial logged once, and a client watching it sees no error.
TEST_F(PostgresService, PostgreSQLStoppingMidJobPausesTheJobUntilItIsBack) {
  MidJob m;
  ASSERT_NO_FATAL_FAILURE(start_mid_job(m, "60"));
  auto& client = m.client;
  const uint64_t id = m.id;
  constexpr uint64_t kTrials = kMidJobTrials;

  postgres_->stop("fast");
  std::this_thread::sleep_for(std::chrono::seconds(4));
  // Away for 4 s: the job waits, unfinished, and the server answers.
  const JobStatus paused = client->job(id);
  EXPECT_FALSE(paused.finished()) << paused.message;
  EXPECT_LT(paused.done, kTrials);
  postgres_->start();

  const JobEvent last = client->watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(last.job.done, kTrials);
  EXPECT_EQ(m.watcher->wait(60), 0) << read_file(temp_.path / "watch.err");
  EXPECT_EQ(read_file(temp_.path / "watch.err"), "");
  // Every trial once, in the job's run, and the fallback config.
  EXPECT_EQ(records_once().size(), kTrials + 1);
  expect_done_in_log(id, kTrials);
  const std::string said = err_of("server");
  EXPECT_NE(said.find("the connection to PostgreSQL was lost"), std::string::npos) << said;
  EXPECT_NE(said.find("reconnected after"), std::string::npos) << said;
}

// As the SQLite log that cannot be written (storage_fault_test), for PostgreSQL away for longer
// than the server waits for it.
TEST_F(PostgresService,
       PostgreSQLAwayLongerThanTheRetryBoundFailsTheJobInOneLineAndARestartResumesIt) {
  MidJob m;
  ASSERT_NO_FATAL_FAILURE(start_mid_job(m, "2"));
  auto& server = m.server;
  auto& client = m.client;
  std::string& address = m.address;
  const std::string port = address.substr(address.rfind(':') + 1);
  const uint64_t id = m.id;
  constexpr uint64_t kTrials = kMidJobTrials;

  // PostgreSQL goes away mid-job: the job fails with the reason, the server goes on serving.
  postgres_->stop();
  ASSERT_TRUE(wait_until([&] { return client->job(id).finished(); }, 60));
  const JobStatus failed = client->job(id);
  EXPECT_EQ(failed.state, tuning_db::JobState::kFailed);
  EXPECT_NE(failed.message.find("the tuning log failed"), std::string::npos) << failed.message;
  EXPECT_NE(failed.message.find("did not come back within 2 s"), std::string::npos)
      << failed.message;
  EXPECT_LT(failed.done, kTrials);
  EXPECT_EQ(m.watcher->wait(20), 1) << read_file(temp_.path / "watch.err");
  const std::string said = read_file(temp_.path / "watch.err");
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  EXPECT_NE(said.find("failed: the tuning log failed"), std::string::npos) << said;
  ::kill(server->pid, SIGTERM);
  EXPECT_EQ(server->wait(10), 0) << err_of("server");
  server.reset();

  // PostgreSQL back, the server restarted: it resumes the job from the records the log holds.
  postgres_->start();
  server = start_server("server", address, port, "2");
  ASSERT_FALSE(address.empty()) << err_of("server");
  const JobEvent last = client->watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(last.job.done, kTrials);
  EXPECT_EQ(records_once().size(), kTrials + 1);
}

}  // namespace
}  // namespace ktune::rpc_runner
