// Fault tests of the tuning service with real processes on 127.0.0.1: a worker SIGKILLed mid-batch,
// and the server SIGKILLed mid-job and restarted on the same port and log (KTUNE_ROUNDS times).
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "rpc_runner/client/service_client.h"
#include "tests/process_util.h"
#include "tests/rpc_runner/server/service_test_util.h"
#include "tuning_db/database.h"

#ifndef KTUNE_ROUNDS
#define KTUNE_ROUNDS 3
#endif

namespace ktune::rpc_runner {
namespace {

namespace fs = std::filesystem;
using testing::wait_until;
using testing_process::Child;

class ServiceFault : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ktune-service-fault-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "server.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Child> start_server(const std::string& port) {
    auto server = std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "server", "--port", port, "--db", db_, "--heartbeat",
                                 "0.5", "--worker-timeout", "3"},
        dir_ / "server.out", dir_ / "server.err");
    return server;
  }

  std::unique_ptr<Child> start_worker(const std::string& address, const std::string& name) {
    return std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "worker", "--server", address, "--key", "cpu",
                                 "--slots", "1", "--runner", KTUNE_RUNNER_PATH, "--description",
                                 name, "--reconnect-max", "0.5"},
        dir_ / (name + ".out"), dir_ / (name + ".err"));
  }

  // The log's records, read beside the server (WAL).
  std::vector<tuning_db::Record> records(const std::string& workload) {
    return testing::log_records(db_, workload);
  }

  static JobSpec slow_matmul(uint64_t trials) {
    JobSpec s;
    s.template_name = "matmul";
    s.args = {{"M", "64"}, {"N", "64"}, {"K", "64"}};
    s.session.device_key = "cpu";
    s.session.trials = trials;
    s.session.tuner = "random";
    s.session.seed = 7;
    s.session.batch_size = 8;
    s.measure.min_repeat_ms = 40;  // each candidate takes over 0.1 s: kills land mid-candidate
    return s;
  }

  fs::path dir_;
  std::string db_;
};

// The job's trials and the fallback it measured first, each config once.
void expect_each_config_once(const std::vector<tuning_db::Record>& records, size_t trials) {
  EXPECT_EQ(records.size(), trials + 1);
  std::set<int64_t> configs;
  for (const auto& r : records) configs.insert(r.config_index);
  EXPECT_EQ(configs.size(), records.size()) << "a config was recorded twice";
}

TEST_F(ServiceFault, AWorkerKilledMidBatchLosesNothing) {
  auto server = start_server("0");
  const std::string address = testing_process::wait_for_address(dir_ / "server.out");
  ASSERT_FALSE(address.empty()) << testing_process::read_file(dir_ / "server.err");
  std::map<std::string, std::unique_ptr<Child>> workers;
  for (const char* name : {"a", "b", "c"}) workers[name] = start_worker(address, name);
  ServiceClientOptions options;
  options.server = address;
  ServiceClient client(options);
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 3; }, 20));

  const uint64_t id = client.submit(slow_matmul(32)).id;
  // Kill a worker that holds a candidate, once the job is under way.
  std::string victim;
  ASSERT_TRUE(wait_until(
      [&] {
        if (client.job(id).done < 8) return false;
        for (const DeviceInfo& d : client.devices())
          if (d.in_flight > 0) victim = d.description;
        return !victim.empty();
      },
      60));
  workers[victim]->kill(SIGKILL);
  const JobEvent last = client.watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(client.devices().size(), 2u);
  expect_each_config_once(records(last.job.workload), 32);
  EXPECT_NE(testing_process::read_file(dir_ / "server.err").find("go back to the queue"),
            std::string::npos)
      << "the killed worker held a candidate that was requeued";
}

// A worker that falls silent with its connection open (SIGSTOP: what a network cut or a frozen
// board looks like) is taken for lost after the worker timeout; its candidate goes to another
// worker, and when it wakes up its stale result is dropped.
TEST_F(ServiceFault, ASilentWorkerIsTakenForLostAndItsLateResultDropped) {
  auto server = start_server("0");
  const std::string address = testing_process::wait_for_address(dir_ / "server.out");
  ASSERT_FALSE(address.empty()) << testing_process::read_file(dir_ / "server.err");
  auto a = start_worker(address, "a");
  auto b = start_worker(address, "b");
  ServiceClientOptions options;
  options.server = address;
  ServiceClient client(options);
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 2; }, 20));
  const uint64_t id = client.submit(slow_matmul(24)).id;
  std::string frozen;
  ASSERT_TRUE(wait_until(
      [&] {
        if (client.job(id).done < 4) return false;
        for (const DeviceInfo& d : client.devices())
          if (d.in_flight > 0) frozen = d.description;
        return !frozen.empty();
      },
      60));
  Child& victim = frozen == "a" ? *a : *b;
  ::kill(victim.pid, SIGSTOP);
  // The server's worker timeout is 3 s: the frozen worker leaves the registry, the job goes on.
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 20));
  ::kill(victim.pid, SIGCONT);
  const JobEvent last = client.watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  expect_each_config_once(records(last.job.workload), 24);
  const std::string log = testing_process::read_file(dir_ / "server.err");
  EXPECT_NE(log.find("no heartbeat for 3 s"), std::string::npos) << log;
  // Woken up, the worker reconnects as a new device.
  EXPECT_TRUE(wait_until([&] { return client.devices().size() == 2; }, 20));
}

TEST_F(ServiceFault, TheServerKilledMidJobResumesWithNoRecordLostOrTwice) {
  const int rounds = KTUNE_ROUNDS;
  const uint64_t trials = 8 * rounds + 16;
  auto server = start_server("0");
  const std::string address = testing_process::wait_for_address(dir_ / "server.out");
  ASSERT_FALSE(address.empty()) << testing_process::read_file(dir_ / "server.err");
  const std::string port = address.substr(address.rfind(':') + 1);
  auto w1 = start_worker(address, "a");
  auto w2 = start_worker(address, "b");
  ServiceClientOptions options;
  options.server = address;
  options.reconnect_for_s = 60;
  ServiceClient client(options);
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 2; }, 20));
  const JobStatus job = client.submit(slow_matmul(trials));

  // A client watching through every restart: it reconnects and sees the end.
  JobEvent watched;
  std::thread watcher([&] {
    ServiceClient own(options);
    watched = own.watch(job.id);
  });

  uint64_t acknowledged = 0;
  for (int round = 0; round < rounds; ++round) {
    ASSERT_TRUE(wait_until(
        [&] {
          try {
            acknowledged = client.job(job.id).done;
          } catch (const Error&) {
            return false;  // the server is still starting
          }
          return acknowledged >= 8u * (round + 1);
        },
        90))
        << "round " << round;
    server->kill(SIGKILL);
    // Everything the server acknowledged is in the log, once.
    const auto before = records("");  // this job's are the only records of the log
    EXPECT_GE(before.size(), acknowledged) << "round " << round;
    std::set<int64_t> configs;
    for (const auto& r : before) configs.insert(r.config_index);
    EXPECT_EQ(configs.size(), before.size()) << "round " << round;
    fs::remove(dir_ / "server.out");  // so that the new "listening on" line is the one read
    server = start_server(port);
    ASSERT_EQ(testing_process::wait_for_address(dir_ / "server.out"), address);
  }
  watcher.join();
  EXPECT_EQ(watched.job.state, tuning_db::JobState::kDone) << watched.job.message;
  const JobStatus end = client.job(job.id);
  EXPECT_EQ(end.state, tuning_db::JobState::kDone);
  EXPECT_EQ(end.done, trials);
  expect_each_config_once(records(end.workload), trials);
}

}  // namespace
}  // namespace ktune::rpc_runner
