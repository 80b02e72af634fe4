// Defines PostgresService, the fixture of the end-to-end tests of `ktune server` processes on a
// PostgreSQL log: servers, crafted devices and clients on 127.0.0.1, a job started mid-way, and
// what the log holds at the end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>
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

namespace ktune::rpc_runner::testing {

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

  // A `ktune server` process on the log (`db`: its URL as this server dials it; "" = log_),
  // waiting `db_retry_s` for PostgreSQL when it goes away; its address (host:port) in `address`.
  std::unique_ptr<Child> start_server(const std::string& name, std::string& address,
                                      const std::string& port = "0",
                                      const std::string& db_retry_s = "60",
                                      const std::string& db = "") {
    // So that the new "listening on" line is the one read.
    std::filesystem::remove(temp_.path / (name + ".out"));
    auto server = std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "server", "--port", port, "--db",
                                 db.empty() ? log_ : db, "--heartbeat", "0.5", "--worker-timeout",
                                 "5", "--db-retry-s", db_retry_s},
        temp_.path / (name + ".out"), temp_.path / (name + ".err"));
    address = testing_process::wait_for_address(temp_.path / (name + ".out"));
    return server;
  }
  std::string err_of(const std::string& name) const {
    return read_file(temp_.path / (name + ".err"));
  }

  // A crafted device of key "cpu" on the server at `address`, answering its first `answers`
  // candidates in 15 ms each and silent on the rest.
  static std::unique_ptr<testing::FakePeer> device(const std::string& address,
                                                   size_t answers = SIZE_MAX) {
    return testing::quick_matmul_peer(address, "cpu", codegen::Target::host().str(), answers);
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
  // Starts servers "a" and "b" on the log, each with its device attached (a's answering its first
  // `a_answers` candidates); fails the test (the caller's ASSERT_NO_FATAL_FAILURE returns) when
  // one does not come up.
  void start_two(Served& a, Served& b, size_t a_answers = SIZE_MAX) {
    for (auto [name, s] : {std::pair<const char*, Served*>{"a", &a}, {"b", &b}}) {
      s->server = start_server(name, s->address);
      ASSERT_FALSE(s->address.empty()) << err_of(name);
    }
    for (Served* s : {&a, &b}) {
      s->device = device(s->address, s == &a ? a_answers : SIZE_MAX);
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

  // The log's records (of `workload`; "" = all), each config at most once (what every test here
  // requires).
  std::vector<tuning_db::Record> records_once(const std::string& workload = "") {
    const auto records = testing::log_records(log_, workload);
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

}  // namespace ktune::rpc_runner::testing
