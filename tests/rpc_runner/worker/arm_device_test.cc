// End-to-end tests of ktune-device, the device program without LLVM: the AArch64 binary a board
// would run, here under qemu-aarch64-static, attached to a tuning server over 127.0.0.1 beside an
// x86 worker; and the same program built for this machine, for the bad-input cases.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/server/tuning_server.h"
#include "rpc_runner/worker/device_worker.h"
#include "tests/process_util.h"
#include "tests/rpc_runner/runner/fault_template.h"
#include "tests/rpc_runner/server/service_test_util.h"

namespace ktune::rpc_runner {
namespace {

using testing::kinds_of;
using testing::TempDir;
using testing::wait_until;
using testing_process::Child;
using testing_process::read_file;

TuningServerOptions server_options(const TempDir& dir) {
  TuningServerOptions o;
  o.port = 0;
  o.db_path = dir.file("server.db");
  o.heartbeat_s = 0.5;
  o.worker_timeout_s = 5;  // qemu is slow to answer heartbeats while it runs a kernel
  return o;
}

std::string address(const TuningServer& server) {
  return "127.0.0.1:" + std::to_string(server.port());
}

ServiceClientOptions client_options(const TuningServer& server) {
  ServiceClientOptions o;
  o.server = address(server);
  o.reconnect_for_s = 20;
  return o;
}

// The AArch64 ktune-device under qemu, as an RK3399's big core; its runner children go through
// qemu too. Its output goes to dir/<name>.out and .err.
std::unique_ptr<Child> start_arm_device(const TempDir& dir, const std::string& server,
                                        const std::string& name,
                                        const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"/usr/bin/qemu-aarch64-static",
                                   KTUNE_DEVICE_AARCH64,
                                   "--server",
                                   server,
                                   "--key",
                                   "rk3399",
                                   "--cpu",
                                   "cortex-a72",
                                   "--emulated",
                                   "--runner-wrapper",
                                   "qemu-aarch64-static",
                                   "--reconnect-max",
                                   "0.5"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<Child>(args, dir.file(name + ".out"), dir.file(name + ".err"));
}

JobSpec job(const std::string& template_name, std::map<std::string, std::string> args,
            const std::string& key, uint64_t trials) {
  JobSpec s;
  s.template_name = template_name;
  s.args = std::move(args);
  s.session.device_key = key;
  s.session.trials = trials;
  s.session.tuner = "random";
  s.session.seed = 7;
  s.session.batch_size = 8;
  // qemu runs kernels 10-50x slower than the board would: one timing each is enough to check
  // the plumbing, and the timeouts must allow for it.
  s.measure.number = 1;
  s.measure.repeat = 1;
  s.measure.run_timeout_s = 30;
  return s;
}

const DeviceInfo* find_device(const std::vector<DeviceInfo>& devices, const std::string& key) {
  for (const DeviceInfo& d : devices)
    if (d.key == key) return &d;
  return nullptr;
}

TEST(ArmDevice, AnEmulatedBoardAndAnX86WorkerTuneTheirOwnJobsThroughOneServer) {
  TempDir dir;
  TuningServer server(server_options(dir));
  auto board = start_arm_device(dir, address(server), "board");
  DeviceWorkerOptions x86;
  x86.server = address(server);
  x86.key = "x86";
  x86.runner_path = KTUNE_RUNNER_PATH;
  x86.slots = 1;
  DeviceWorker worker(x86);
  ServiceClient client(client_options(server));
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 2; }, 60))
      << read_file(dir.file("board.err"));

  // The board said what it is without LLVM; the server canonicalized it.
  const auto devices = client.devices();
  const DeviceInfo* arm = find_device(devices, "rk3399");
  ASSERT_NE(arm, nullptr);
  EXPECT_EQ(arm->target.rfind("llvm -mtriple=aarch64-", 0), 0u) << arm->target;
  EXPECT_NE(arm->target.find(" -mcpu=cortex-a72"), std::string::npos) << arm->target;
  EXPECT_TRUE(arm->emulated);
  EXPECT_FALSE(find_device(devices, "x86")->emulated);

  // Three jobs at once: two for the board (cross-built, linked, run under qemu), one for x86.
  const uint64_t matmul =
      client.submit(job("matmul", {{"M", "32"}, {"N", "48"}, {"K", "40"}}, "rk3399", 32)).id;
  const uint64_t conv = client
                            .submit(job("conv2d_nchwc",
                                        {{"C", "16"},
                                         {"H", "10"},
                                         {"W", "10"},
                                         {"K", "16"},
                                         {"R", "3"},
                                         {"S", "3"},
                                         {"pad", "1"}},
                                        "rk3399", 32))
                            .id;
  const uint64_t host =
      client.submit(job("matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}}, "x86", 16)).id;
  for (uint64_t id : {matmul, conv, host}) {
    const JobEvent last = client.watch(id);
    ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message << "\n"
                                                          << read_file(dir.file("board.err"));
    const auto records = testing::log_records(server_options(dir).db_path, last.job.workload);
    const bool on_board = id != host;
    ASSERT_GE(records.size(), on_board ? 32u : 16u);
    std::set<int64_t> configs;
    size_t ok = 0;
    for (const auto& r : records) {
      configs.insert(r.config_index);
      EXPECT_EQ(r.device_key, on_board ? "rk3399" : "x86");
      EXPECT_EQ(r.target.target.find(on_board ? "aarch64" : "x86_64") != std::string::npos, true)
          << r.target.target;
      EXPECT_EQ(r.emulated, on_board)
          << "records of the board under qemu are marked emulated, others not";
      if (r.ok())
        ++ok;
      else
        EXPECT_EQ(r.error, ErrorKind::kInstantiation)
            << r.error_message;  // never a wrong answer or crash
    }
    EXPECT_EQ(configs.size(), records.size()) << "a config was recorded twice";
    EXPECT_GE(ok, records.size() * 3 / 4)
        << "most candidates must build, run and match the reference";
    // Look-ups never serve the emulator's timings as the board's unless asked to.
    EXPECT_EQ(client.best(last.job.workload, last.job.target, "", 3).size(), on_board ? 0u : 3u);
    const auto asked =
        client.best(last.job.workload, last.job.target, "", 3, /*include_emulated=*/true);
    ASSERT_EQ(asked.size(), 3u);
    for (const auto& r : asked) EXPECT_EQ(r.emulated, on_board);
  }
  EXPECT_EQ(board->wait(0), -1) << "the device program exited";
}

TEST(ArmDevice, CrashingAndHangingKernelsAreTypedAndTheBoardSurvives) {
  testing::register_fault_template();
  TempDir dir;
  TuningServer server(server_options(dir));
  auto board = start_arm_device(dir, address(server), "board");
  ServiceClient client(client_options(server));
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 60))
      << read_file(dir.file("board.err"));
  JobSpec faults = testing::fault_job("rk3399");
  faults.measure.run_timeout_s = 4;  // the "ok" kernels end in well under a second under qemu
  const JobEvent last = client.watch(client.submit(faults).id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  const auto kinds = kinds_of(testing::log_records(server_options(dir).db_path, last.job.workload));
  EXPECT_EQ(kinds, (std::map<std::string, int>{
                       {"ok", 4}, {"run", 4}, {"run_timeout", 4}, {"wrong_answer", 4}}));
  EXPECT_EQ(board->wait(0), -1) << "the device program exited";
  EXPECT_EQ(client.devices().size(), 1u);
}

TEST(ArmDevice, ABoardKilledMidJobHasItsCandidatesRequeuedAndNothingIsRecordedTwice) {
  TempDir dir;
  TuningServer server(server_options(dir));
  auto first = start_arm_device(dir, address(server), "first");
  ServiceClient client(client_options(server));
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 60))
      << read_file(dir.file("first.err"));
  const uint64_t id =
      client.submit(job("matmul", {{"M", "24"}, {"N", "24"}, {"K", "24"}}, "rk3399", 32)).id;
  ASSERT_TRUE(wait_until([&] { return client.job(id).done >= 8; }, 300));
  first->kill(SIGKILL);  // mid-job: it holds a candidate the server must give to another board
  auto second = start_arm_device(dir, address(server), "second");
  const JobEvent last = client.watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  const auto records = testing::log_records(server_options(dir).db_path, last.job.workload);
  std::set<int64_t> configs;
  for (const auto& r : records) configs.insert(r.config_index);
  EXPECT_EQ(configs.size(), records.size()) << "a config was recorded twice";
  EXPECT_GE(records.size(), 32u);
  EXPECT_EQ(last.job.done, 32u);
  // The second board finished the job: the first really was killed with work left.
  const auto devices = client.devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_GT(devices[0].served, 0u);
}

// Bad input, with `ktune server` and ktune-device (built for this machine: the same program,
// no emulator needed) as real processes: one clear line on both sides, nothing recorded.
struct ServerProcess {
  TempDir& dir;
  std::unique_ptr<Child> child;
  std::string address;

  ServerProcess(TempDir& d, const std::vector<std::string>& extra) : dir(d) {
    std::vector<std::string> args = {KTUNE_PATH, "server", "--port",
                                     "0",        "--db",   dir.file("server.db")};
    args.insert(args.end(), extra.begin(), extra.end());
    child = std::make_unique<Child>(args, dir.file("server.out"), dir.file("server.err"));
    address = testing_process::wait_for_address(dir.file("server.out"));
  }
};

std::unique_ptr<Child> start_native_device(const TempDir& dir, const std::string& server,
                                           const std::string& name,
                                           const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {KTUNE_DEVICE_NATIVE, "--server", server, "--key", "x86-board"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<Child>(args, dir.file(name + ".out"), dir.file(name + ".err"));
}

TEST(ArmDevice, ADeviceOfAnotherProtocolVersionOrWithAWrongTokenIsRefusedWithOneLineOnBothSides) {
  TempDir dir;
  const std::string tokens =
      dir.write("tokens", "worker: right-worker-token\nclient: right-client-token\n");
  const std::string wrong = dir.write("wrong", "not-the-right-worker-token\n");
  const std::string right = dir.write("right", "right-worker-token\n");
  ServerProcess server(dir, {"--token-file", tokens});
  ASSERT_FALSE(server.address.empty()) << read_file(dir.file("server.err"));

  auto bad_token = start_native_device(dir, server.address, "bad-token", {"--token-file", wrong});
  EXPECT_EQ(bad_token->wait(30), 1);
  const std::string token_err = read_file(dir.file("bad-token.err"));
  EXPECT_NE(token_err.find("refused this device"), std::string::npos) << token_err;

  auto old = start_native_device(dir, server.address, "old",
                                 {"--token-file", right, "--protocol-version", "2"});
  EXPECT_EQ(old->wait(30), 1);
  const std::string old_err = read_file(dir.file("old.err"));
  EXPECT_NE(old_err.find("the worker speaks version 2, this server version 4"), std::string::npos)
      << old_err;

  const std::string server_err = read_file(dir.file("server.err"));
  EXPECT_NE(server_err.find("version 2"), std::string::npos) << server_err;
  EXPECT_NE(server_err.find("token"), std::string::npos) << server_err;
  EXPECT_TRUE(testing::log_records(dir.file("server.db")).empty());
}

TEST(ArmDevice, AJobForAnotherArchitectureFailsWithOneLineAndRecordsNothing) {
  TempDir dir;
  TuningServer server(server_options(dir));
  auto board = start_native_device(dir, address(server), "board");
  ServiceClient client(client_options(server));
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 30))
      << read_file(dir.file("board.err"));
  JobSpec spec = job("matmul", {{"M", "16"}, {"N", "16"}, {"K", "16"}}, "x86-board", 8);
  spec.target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  const JobEvent last = client.watch(client.submit(spec).id);
  EXPECT_EQ(last.job.state, tuning_db::JobState::kFailed);
  EXPECT_NE(last.job.message.find("differs from the target"), std::string::npos)
      << last.job.message;
  EXPECT_TRUE(testing::log_records(server_options(dir).db_path, last.job.workload).empty());
  EXPECT_EQ(board->wait(0), -1) << "the device program exited";
  EXPECT_EQ(client.devices().size(), 1u);
}

}  // namespace
}  // namespace ktune::rpc_runner
