// End-to-end tests of what a tuning server serves for a device key, with `ktune best` and `ktune
// build` run as processes against a server and workers in this process over 127.0.0.1: the
// re-timed figure of a job's best configs is stored and served; `--device-key` means the target
// of the key's devices (attached, else as the server's log recorded it) and refuses a --target of
// another architecture, for a kernel and for a whole model; the note on emulated-only records is
// given over a server too.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "codegen/target.h"
#include "rpc_runner/client/service_client.h"
#include "rpc_runner/server/tuning_server.h"
#include "rpc_runner/worker/device_worker.h"
#include "schedule_space/task.h"
#include "schedule_space/workload.h"
#include "tests/rpc_runner/server/fake_peer.h"
#include "tests/rpc_runner/server/in_process_service.h"
#include "tests/rpc_runner/server/service_test_util.h"
#include "tuning_db/database.h"

#define KTUNE_BINARY KTUNE_BIN
#include "tests/cli_util.h"
#include "tests/frontend/test_models.h"

namespace ktune::rpc_runner {
namespace {

using testing::TempDir;
using testing::wait_until;
using testing_cli::expect_one_line_error;
using testing_cli::quote;

const std::string kWorkload = "matmul M=64 N=64 K=64";

using testing::client_options;
using testing::server_options;
using testing::worker_options;

std::string canonical(const std::string& target) { return codegen::Target::parse(target).str(); }

// Logs a successful record of the matmul workload's fallback config on `target` for `key`.
void log_record(const std::string& db_path, const std::string& target, const std::string& key,
                bool emulated) {
  const codegen::Target t = codegen::Target::parse(target);
  const auto task = schedule_space::Task::create(
      "matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}},
      schedule_space::make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores()));
  tuning_db::Record r;
  r.workload_key = task.workload_key();
  r.template_name = "matmul";
  r.args = task.args_json();
  r.flop = task.flop();
  r.target = {t.str(), "19.1.7"};
  r.device_key = key;
  r.config_index = static_cast<int64_t>(task.fallback_config().index());
  r.config = task.fallback_config().to_json();
  r.costs = {1e-3, 1e-3};
  r.tuner = "seeded";
  r.emulated = emulated;
  auto db = tuning_db::Database::open(db_path);
  db.add({r});
}

// The ELF machine of an object file: 62 x86-64, 183 AArch64.
int elf_machine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char header[20] = {};
  in.read(header, sizeof header);
  return static_cast<unsigned char>(header[18]) | (static_cast<unsigned char>(header[19]) << 8);
}

// The ELF machine of every object in an archive (each member's header found by its magic).
std::vector<int> elf_machines_in(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<int> out;
  for (size_t at = bytes.find("\x7f"
                              "ELF");
       at != std::string::npos && at + 20 <= bytes.size(); at = bytes.find("\x7f"
                                                                           "ELF",
                                                                           at + 4))
    out.push_back(static_cast<unsigned char>(bytes[at + 18]) |
                  (static_cast<unsigned char>(bytes[at + 19]) << 8));
  return out;
}

TEST(DeviceKey, AJobsBestConfigsAreRetimedAndTheRetimedFigureIsServed) {
  TempDir dir;
  TuningServer server(server_options(dir));
  DeviceWorker worker(worker_options(server, "cpu"));
  ServiceClient client(client_options(server));
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 10));
  JobSpec spec;
  spec.template_name = "matmul";
  spec.args = {{"M", "64"}, {"N", "64"}, {"K", "64"}};
  spec.session.device_key = "cpu";
  spec.session.trials = 8;
  spec.session.tuner = "random";
  spec.session.batch_size = 8;
  const JobEvent last = client.watch(client.submit(spec).id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  const auto summary = nlohmann::json::parse(last.summary_json);
  ASSERT_TRUE(summary.contains("retimed")) << summary.dump();
  EXPECT_EQ(summary["retimed"]["rounds"], 3);
  // Five configs, and five more per further pass (when every one of them was demoted).
  EXPECT_GE(summary["retimed"]["configs"].size(), 5u);
  std::set<int64_t> retimed;
  for (const auto& c : summary["retimed"]["configs"]) retimed.insert(c["config"].get<int64_t>());

  // The server's log holds the rounds; QueryBest ranks and serves by their median. A re-timed
  // config that came out slower may rank below one that was never re-timed; the best never does.
  const std::string host = codegen::Target::host().str();
  const auto best = client.best(last.job.workload, host, "cpu", 5);
  ASSERT_EQ(best.size(), 5u);
  EXPECT_EQ(retimed.count(best.front().config_index), 1u) << best.front().config_index;
  for (const auto& r : best) {
    if (retimed.count(r.config_index) == 0) {
      EXPECT_TRUE(r.retimed_costs.empty()) << r.config_index;
      continue;
    }
    EXPECT_EQ(r.retimed_costs.size(), 3u) << r.config_index;
    EXPECT_DOUBLE_EQ(r.cost(), tuning_db::median(r.retimed_costs));
  }
  for (size_t i = 1; i < best.size(); ++i) EXPECT_LE(best[i - 1].cost(), best[i].cost());
  EXPECT_EQ(summary["retimed"]["best_after_config"], best.front().config_index);
  EXPECT_DOUBLE_EQ(summary["retimed"]["best_after_s"].get<double>(), best.front().cost());
  // The job's summary names the config the log serves, at the figure it serves it with.
  EXPECT_EQ(summary["best"]["retimed"], true);
  EXPECT_EQ(summary["best"]["config"]["index"], best.front().config_index);
  EXPECT_DOUBLE_EQ(summary["best"]["mean_cost_s"].get<double>(), best.front().cost());
  EXPECT_DOUBLE_EQ(last.job.best_gflops, summary["best"]["gflops"].get<double>());  // ktune jobs
  const auto addr = " --server 127.0.0.1:" + std::to_string(server.port());
  const auto served = testing_cli::ktune("best " + kWorkload + addr + " --device-key cpu --json");
  ASSERT_EQ(served.status, 0) << served.out;
  const auto j = nlohmann::json::parse(served.out);
  EXPECT_EQ(j["best"]["retimed"], true);
  EXPECT_EQ(j["best"]["config"]["index"], best.front().config_index);
  EXPECT_DOUBLE_EQ(j["best"]["mean_cost_s"].get<double>(), best.front().cost());
  EXPECT_EQ(j["best"]["noisy"], best.front().noisy());
}

TEST(DeviceKey, MeansTheTargetOfTheKeysDevices) {
  TempDir dir;
  const std::string a72 = canonical("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72");
  const std::string a53 = canonical("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53");
  // Records of a board no longer attached, and of an emulated one only.
  log_record(dir.file("server.db"), a72, "rk3399", false);
  log_record(dir.file("server.db"), a53, "qemu-board", true);
  // No calibration proof: the crafted board below cannot run an AArch64 proof on this host.
  TuningServerOptions options = server_options(dir);
  options.calibration_proof_s = 0;
  TuningServer server(options);
  // A device of another key, attached: an AArch64 board that builds nothing itself (crafted: this
  // host cannot run its calibration kernel, so it answers that as a board would).
  WorkerSessionOptions arm;
  arm.server = "127.0.0.1:" + std::to_string(server.port());
  arm.key = "pi3";
  arm.target = a53;
  arm.can_build = false;
  arm.reconnect_initial_s = 0.1;
  arm.reconnect_max_s = 0.5;
  testing::FakePeer board(
      arm, [](size_t) -> std::optional<rpc::CandidateResult> { return std::nullopt; });
  ServiceClient client(client_options(server));
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 10));
  const auto addr = " --server 127.0.0.1:" + std::to_string(server.port());

  // No device of rk3399 attached: the target its records were measured for, and its record.
  auto r = testing_cli::ktune("best " + kWorkload + addr + " --device-key rk3399 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["target"], a72);
  ASSERT_FALSE(j["best"].is_null()) << r.out;
  EXPECT_EQ(j["best"]["input"][0], a72);

  // A device of pi3 attached: its target, though the log holds nothing of it.
  r = testing_cli::ktune("best " + kWorkload + addr + " --device-key pi3 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["target"], a53);
  EXPECT_TRUE(j["best"].is_null());

  // A --target of the same architecture is kept; of another one, refused.
  r = testing_cli::ktune("best " + kWorkload + addr + " --device-key rk3399 --json --target " +
                         quote("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["target"], a53);
  const std::string x86 = quote("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake");
  expect_one_line_error(
      testing_cli::ktune("best " + kWorkload + addr + " --device-key rk3399 --target " + x86, true),
      "but the devices of key 'rk3399' are aarch64");
  expect_one_line_error(
      testing_cli::ktune("build " + kWorkload + addr + " --device-key pi3 --target " + x86 +
                             " -o " + quote(dir.file("x.o")),
                         true),
      "but the devices of key 'pi3' are aarch64");
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.o")));
  // A key with neither devices nor records.
  expect_one_line_error(
      testing_cli::ktune("best " + kWorkload + addr + " --device-key nokey", true),
      "device key 'nokey' has no device attached");

  // build: an AArch64 object of the record's config.
  r = testing_cli::ktune("build " + kWorkload + addr + " --device-key rk3399 --json -o " +
                         quote(dir.file("k.o")) + " --header " + quote(dir.file("k.h")));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(elf_machine(dir.file("k.o")), 183);
  j = nlohmann::json::parse(r.out);
  EXPECT_NE(j.dump().find("\"tuned\""), std::string::npos) << r.out;

  // build --model: the whole model for the key's devices, every object of the library AArch64;
  // a --target of another architecture is refused and writes nothing.
  const std::string small_cnn = quote(testing_models::model("small_cnn.onnx"));
  r = testing_cli::ktune("build --model " + small_cnn + addr + " --device-key rk3399 -o " +
                         quote(dir.file("libm.a")) + " --header " + quote(dir.file("m.h")));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<int> machines = elf_machines_in(dir.file("libm.a"));
  ASSERT_FALSE(machines.empty());
  for (int m : machines) EXPECT_EQ(m, 183);
  expect_one_line_error(
      testing_cli::ktune("build --model " + small_cnn + addr + " --device-key rk3399 --target " +
                             x86 + " -o " + quote(dir.file("libx.a")) + " --header " +
                             quote(dir.file("x.h")),
                         true),
      "but the devices of key 'rk3399' are aarch64");
  EXPECT_FALSE(std::filesystem::exists(dir.file("libx.a")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.h")));

  // Only emulated records of the key: none served, and the note names them and the flag.
  r = testing_cli::ktune("best " + kWorkload + addr + " --device-key qemu-board --json");
  ASSERT_EQ(r.status, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["target"], a53);
  EXPECT_TRUE(j["best"].is_null());
  ASSERT_TRUE(j.contains("note")) << r.out;
  EXPECT_NE(j["note"].get<std::string>().find("1 successful record"), std::string::npos);
  EXPECT_NE(j["note"].get<std::string>().find("--emulated"), std::string::npos);
  r = testing_cli::ktune("best " + kWorkload + addr + " --device-key qemu-board --emulated --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["best"]["emulated"], true);
}

}  // namespace
}  // namespace ktune::rpc_runner
