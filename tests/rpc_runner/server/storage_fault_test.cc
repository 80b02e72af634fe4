// Fault test of the tuning server's log failing mid-job, for real: `ktune server` runs with SIGXFSZ
// ignored, and mid-job the test lowers its file-size limit (prlimit(2) on RLIMIT_FSIZE) under the
// size of the log's WAL, so the next write of a record, a claim or a job row fails with EFBIG,
// which SQLite reports as SQLITE_IOERR_WRITE (SQLITE_FULL for a short write). This works for any
// user, root or not, in a container or not, at a moment the test chooses. (A tmpfs mount needs
// CAP_SYS_ADMIN, which root in a CI container usually lacks; SQLite's max_page_count needs a
// test-only flag in the product and bounds the database file, not the WAL that a mid-job write
// goes to.) A crafted worker answers quickly, so the log grows fast.
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "codegen/target.h"
#include "rpc_runner/client/service_client.h"
#include "tests/process_util.h"
#include "tests/rpc_runner/server/fake_peer.h"
#include "tests/rpc_runner/server/service_test_util.h"
#include "tuning_db/job_store.h"

namespace ktune::rpc_runner {
namespace {

namespace fs = std::filesystem;
using testing::lines_of;
using testing::matmul_job;
using testing::wait_until;
using testing_process::Child;
using testing_process::read_file;

class StorageFault : public ::testing::Test {
 protected:
  void SetUp() override {
    // Ignored signals stay ignored in the processes this test starts: a write over the limit
    // then fails with EFBIG instead of killing the server.
    previous_ = std::signal(SIGXFSZ, SIG_IGN);
    db_ = temp_.file("server.db");
  }
  void TearDown() override { std::signal(SIGXFSZ, previous_); }

  std::unique_ptr<Child> start_server(const std::string& port) {
    fs::remove(temp_.path / "server.out");  // so that the new "listening on" line is the one read
    auto server = std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "server", "--port", port, "--db", db_, "--heartbeat",
                                 "0.5", "--worker-timeout", "5"},
        temp_.path / "server.out", temp_.path / "server.err");
    address_ = testing_process::wait_for_address(temp_.path / "server.out");
    return server;
  }

  testing::TempDir temp_;  // first: removed after the processes below are gone
  void (*previous_)(int) = SIG_DFL;
  std::string db_, address_;
};

TEST_F(StorageFault, ALogThatCannotBeWrittenFailsTheJobClearlyAndARestartResumesIt) {
  auto server = start_server("0");
  ASSERT_FALSE(address_.empty()) << read_file(temp_.path / "server.err");
  const std::string port = address_.substr(address_.rfind(':') + 1);

  // 15 ms an answer: quick, yet the job (about 2.4 s) outlasts the wait for the fault's moment,
  // which polls every 50 ms.
  const auto peer = testing::quick_matmul_peer(address_, "cpu", codegen::Target::host().str());
  testing::FakePeer& quick = *peer;
  ServiceClientOptions options;
  options.server = address_;
  options.timeout_s = 30;
  options.reconnect_for_s = 60;
  ServiceClient client(options);
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 20));

  constexpr uint64_t kTrials = 160;
  const uint64_t id = client.submit(matmul_job("cpu", kTrials, 5)).id;
  // A job waiting for a device no one has, with a client watching it through the fault and the
  // SIGTERM: that client is attached when the server is told to stop.
  const uint64_t waiting = client.submit(matmul_job("nobody", 4)).id;
  std::optional<std::string> waiting_end;
  std::thread waiting_watch([&] {
    ServiceClientOptions once = options;
    once.reconnect_for_s = 0;
    ServiceClient own(once);
    try {
      waiting_end = std::string(tuning_db::to_string(own.watch(waiting).job.state));
    } catch (const Error& e) {
      waiting_end = e.what();
    }
  });
  Child watcher({KTUNE_BIN, "jobs", "watch", std::to_string(id), "--json", "--server", address_},
                temp_.path / "watch.out", temp_.path / "watch.err");

  // Mid-job, the limit goes under the WAL's size: every write that appends to it fails. The
  // server's own output files stay under the limit, with room for its error lines.
  const fs::path wal = db_ + "-wal";
  uintmax_t limit = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        limit = fs::file_size(temp_.path / "server.err") + (64u << 10);
        return client.job(id).done >= 24 && fs::exists(wal) && fs::file_size(wal) > limit;
      },
      120))
      << "done " << client.job(id).done;
  const rlimit fsize{limit, RLIM_INFINITY};
  ASSERT_EQ(::prlimit(server->pid, RLIMIT_FSIZE, &fsize, nullptr), 0) << std::strerror(errno);

  // The job fails with the reason; the server goes on serving.
  ASSERT_TRUE(wait_until([&] { return client.job(id).finished(); }, 60));
  const JobStatus failed = client.job(id);
  EXPECT_EQ(failed.state, tuning_db::JobState::kFailed);
  EXPECT_NE(failed.message.find("the tuning log failed"), std::string::npos) << failed.message;
  EXPECT_TRUE(failed.message.find("disk I/O error") != std::string::npos ||
              failed.message.find("disk is full") != std::string::npos)
      << failed.message;
  EXPECT_LT(failed.done, kTrials);
  // A client watching it: one line, exit 1.
  EXPECT_EQ(watcher.wait(20), 1) << read_file(temp_.path / "watch.err");
  const auto said = lines_of(read_file(temp_.path / "watch.err"));
  ASSERT_EQ(said.size(), 1u) << read_file(temp_.path / "watch.err");
  EXPECT_NE(said[0].find("failed: the tuning log failed"), std::string::npos) << said[0];
  const auto listed = client.jobs(true);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].state, tuning_db::JobState::kFailed);
  EXPECT_EQ(listed[1].state, tuning_db::JobState::kQueued);

  // SIGTERM while the log still cannot be written and a client watches: the server stops within
  // 5 s, and the watching client hears that it went away.
  ::kill(server->pid, SIGTERM);
  EXPECT_EQ(server->wait(5), 0) << read_file(temp_.path / "server.err");
  server.reset();
  waiting_watch.join();
  ASSERT_TRUE(waiting_end.has_value());
  EXPECT_NE(*waiting_end, "done");

  // What the log kept: each config once, and the failed job still unfinished in its row.
  const auto before = testing::log_records(db_);
  std::set<int64_t> logged;
  for (const auto& r : before) logged.insert(r.config_index);
  EXPECT_EQ(logged.size(), before.size()) << "a config was recorded twice";
  EXPECT_GE(before.size(), 24u);
  {
    auto db = tuning_db::Database::open(db_, {.create = false});
    const auto row = tuning_db::JobStore(db).get(static_cast<int64_t>(id));
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->state, tuning_db::JobState::kRunning) << row->message;
  }
  const size_t received_before = quick.received();

  // Restarted with room (a new process has no limit), the server resumes the job from the log.
  server = start_server(port);
  ASSERT_FALSE(address_.empty()) << read_file(temp_.path / "server.err");
  const JobEvent last = client.watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(last.job.done, kTrials);
  const auto records = testing::log_records(db_);
  EXPECT_EQ(records.size(), kTrials + 1);  // the trials and the fallback config
  std::set<int64_t> configs;
  for (const auto& r : records) configs.insert(r.config_index);
  EXPECT_EQ(configs.size(), records.size()) << "a config was recorded twice";
  // No trial the log held was measured again after the restart. (The fallback config is: every
  // session measures it for its own speed-up, and logs it once.)
  for (const auto& r : before)
    if (r.tuner == "fallback") logged.erase(r.config_index);
  const std::vector<uint64_t> sent = quick.configs();
  for (size_t i = received_before; i < sent.size(); ++i)
    EXPECT_EQ(logged.count(static_cast<int64_t>(sent[i])), 0u)
        << "config " << sent[i] << " was measured again";
  EXPECT_EQ(client.job(waiting).state, tuning_db::JobState::kQueued);
}

}  // namespace
}  // namespace ktune::rpc_runner
