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

#include "codegen/target.h"
#include "rpc_runner/client/service_client.h"
#include "tests/process_util.h"
#include "tests/rpc_runner/server/fake_peer.h"
#include "tests/rpc_runner/server/service_test_util.h"
#include "tests/tuning_db/postgres_util.h"
#include "tuning_db/job_store.h"
#include "tuning_db/run_store.h"

namespace ktune::rpc_runner {
namespace {

using testing::matmul_job;
using testing::wait_until;
using testing_process::Child;
using testing_process::read_file;

class PostgresService : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    postgres_ = tuning_db::testing::shared_postgres(&why);
    if (!postgres_) GTEST_SKIP() << "PostgreSQL not tested: " << why;
    log_ = postgres_->create_database();
  }

  // A `ktune server` process on the log, waiting `db_retry_s` for PostgreSQL when it goes away;
  // its address (host:port) in `address`.
  std::unique_ptr<Child> start_server(const std::string& name, std::string& address,
                                      const std::string& port = "0",
                                      const std::string& db_retry_s = "60") {
    auto server = std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "server", "--port", port, "--db", log_, "--heartbeat",
                                 "0.5", "--worker-timeout", "5", "--db-retry-s", db_retry_s},
        temp_.path / (name + ".out"), temp_.path / (name + ".err"));
    address = testing_process::wait_for_address(temp_.path / (name + ".out"));
    return server;
  }
  std::string err_of(const std::string& name) const {
    return read_file(temp_.path / (name + ".err"));
  }

  // A crafted device of key "cpu" on the server at `address`, answering in 15 ms.
  static std::unique_ptr<testing::FakePeer> device(const std::string& address) {
    return testing::quick_matmul_peer(address, "cpu", codegen::Target::host().str());
  }
  static std::unique_ptr<ServiceClient> client_of(const std::string& address) {
    ServiceClientOptions options;
    options.server = address;
    options.timeout_s = 30;
    options.reconnect_for_s = 60;  // through a server restart
    return std::make_unique<ServiceClient>(options);
  }

  // One server on the log with its device ("cpu") and a client.
  struct Served {
    std::string address;
    std::unique_ptr<Child> server;
    std::unique_ptr<testing::FakePeer> device;
    std::unique_ptr<ServiceClient> client;
  };
  // Starts servers "a" and "b" on the log, each with its device attached; fails the test (the
  // caller's ASSERT_NO_FATAL_FAILURE returns) when one does not come up.
  void start_two(Served& a, Served& b) {
    for (auto [name, s] : {std::pair<const char*, Served*>{"a", &a}, {"b", &b}}) {
      s->server = start_server(name, s->address);
      ASSERT_FALSE(s->address.empty()) << err_of(name);
    }
    for (Served* s : {&a, &b}) {
      s->device = device(s->address);
      s->client = client_of(s->address);
    }
    ASSERT_TRUE(wait_until(
        [&] { return a.client->devices().size() == 1 && b.client->devices().size() == 1; }, 20));
  }

  // A job of kMidJobTrials trials on one server (which waits `db_retry_s` for PostgreSQL) with its
  // device, followed by `ktune jobs watch`: started, and 16 trials into it.
  static constexpr uint64_t kMidJobTrials = 120;
  struct MidJob : Served {
    uint64_t id = 0;
    std::unique_ptr<Child> watcher;
  };
  void start_mid_job(MidJob& m, const std::string& db_retry_s) {
    m.server = start_server("server", m.address, "0", db_retry_s);
    ASSERT_FALSE(m.address.empty()) << err_of("server");
    m.device = device(m.address);
    m.client = client_of(m.address);
    ASSERT_TRUE(wait_until([&] { return m.client->devices().size() == 1; }, 20));
    m.id = m.client->submit(matmul_job("cpu", kMidJobTrials)).id;
    m.watcher = std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "jobs", "watch", std::to_string(m.id), "--json",
                                 "--server", m.address},
        temp_.path / "watch.out", temp_.path / "watch.err");
    ASSERT_TRUE(wait_until([&] { return m.client->job(m.id).done >= 16; }, 60));
  }

  // Job `id` is done in the log, with `trials` records of its run.
  void expect_done_in_log(uint64_t id, uint64_t trials) {
    auto db = tuning_db::Database::open(log_, {.create = false});
    const auto row = tuning_db::JobStore(db).get(static_cast<int64_t>(id));
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->state, tuning_db::JobState::kDone);
    EXPECT_EQ(tuning_db::RunStore(db).count_records(row->run_id), static_cast<int64_t>(trials));
  }

  // The log's records, each config at most once (what every test here requires).
  std::vector<tuning_db::Record> records_once() {
    const auto records = testing::log_records(log_);
    std::set<int64_t> configs;
    for (const auto& r : records)
      EXPECT_TRUE(configs.insert(r.config_index).second)
          << "config " << r.config_index << " was recorded twice";
    return records;
  }

  testing::TempDir temp_;
  tuning_db::testing::PostgresServer* postgres_ = nullptr;
  std::string log_;
};

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
  // Both servers run before the job is submitted: the second learns of it from the log.
  Served a, b;
  ASSERT_NO_FATAL_FAILURE(start_two(a, b));
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
