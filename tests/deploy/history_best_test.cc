// Tests of apply_history_best: the tuned record, the nearest tuned workload and the fallback, from
// a log file and from a `ktune server` process on 127.0.0.1; kernels checked against te's
// interpreter; each error by its kind; warnings counted; the server's QueryBest preferring its own
// toolchain.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "deploy/history_best.h"
#include "rpc_runner/client/service_client.h"
#include "support/error.h"
#include "tests/deploy/history_test_util.h"
#include "tests/process_util.h"
#include "tests/rpc_runner/server/service_test_util.h"
#include "tests/schedule_space/template_cases.h"
#include "tests/warning_capture.h"
#include "tuning_db/database.h"

#define KTUNE_BINARY KTUNE_BIN
#include "tests/cli_util.h"

namespace ktune {
namespace {

using deploy::testing::kind_of;
using deploy::testing::kOldLlvm;
using deploy::testing::matmul;
using deploy::testing::other_configs;
using deploy::testing::record_of;
using deploy::testing::write_log;
using rpc_runner::testing::TempDir;
using schedule_space::Config;
using schedule_space::Task;
using testing_cli::quote;
using testing_process::Child;
using Source = AppliedKernel::Source;

// The kernel's largest relative error against te's interpreter (outputs pre-filled with NaN).
double error_of(const Task& task, const codegen::Kernel& kernel) {
  const schedule_space::testing::Oracle oracle(task, 11);
  return oracle.check([&](const std::vector<void*>& args) { EXPECT_EQ(kernel.run(args), 0); });
}

using testing_log::WarningCapture;

TEST(HistoryBest, ServesTheFastestRecordAsAKernelThatComputesTheReference) {
  TempDir dir;
  const Task task = matmul(64, 48, 32);
  const auto configs = other_configs(task, 2);
  ASSERT_EQ(configs.size(), 2u);
  write_log(dir.file("log.db"),
            {record_of(task, configs[0], 2e-3), record_of(task, configs[1], 1e-3)});

  WarningCapture capture;
  const AppliedKernel k = apply_history_best(HistorySource::log(dir.file("log.db")), task);
  EXPECT_EQ(k.source, Source::kTuned);
  ASSERT_TRUE(k.record.has_value());
  EXPECT_EQ(k.record->config_index, static_cast<int64_t>(configs[1].index()));
  EXPECT_EQ(k.config.index(), configs[1].index());
  EXPECT_NE(k.note.find("tuning log " + dir.file("log.db")), std::string::npos) << k.note;
  EXPECT_LT(error_of(task, k.kernel), 1e-4);
  EXPECT_TRUE(
      capture.warnings().empty());  // its own toolchain's record, a real device: nothing to say
}

TEST(HistoryBest, PrefersThisToolchainsRecordsAndWarnsOnceForAnOlderOne) {
  TempDir dir;
  const Task mine = matmul(32, 32, 48), old_only = matmul(32, 32, 40);
  const auto configs = other_configs(mine, 2);
  const auto old_configs = other_configs(old_only, 1);
  // The older toolchain's record is faster; this LLVM's is served all the same.
  write_log(dir.file("log.db"),
            {record_of(mine, configs[0], 1e-3, kOldLlvm), record_of(mine, configs[1], 2e-3),
             record_of(old_only, old_configs[0], 1e-3, kOldLlvm)});
  const auto from = HistorySource::log(dir.file("log.db"));
  WarningCapture capture;
  const AppliedKernel k = apply_history_best(from, mine);
  EXPECT_EQ(k.source, Source::kTuned);
  EXPECT_EQ(k.config.index(), configs[1].index());
  EXPECT_TRUE(capture.warnings().empty());

  // Only an older toolchain's record: served, with one warning however often it is asked for.
  for (int i = 0; i < 3; ++i) {
    const AppliedKernel o = apply_history_best(from, old_only);
    EXPECT_EQ(o.source, Source::kTuned);
    EXPECT_EQ(o.record->target.llvm_version, kOldLlvm);
    EXPECT_LT(error_of(old_only, o.kernel), 1e-4);
  }
  const auto w = capture.warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find(std::string("measured with LLVM ") + kOldLlvm), std::string::npos) << w[0];
}

TEST(HistoryBest, AnUntunedShapeTakesTheNearestTunedWorkload) {
  TempDir dir;
  const Task tuned = matmul(64, 64, 64), far = matmul(256, 256, 256), untuned = matmul(64, 64, 128);
  const auto configs = other_configs(tuned, 1);
  write_log(dir.file("log.db"),
            {record_of(tuned, configs[0], 1e-3), record_of(far, far.fallback_config(), 1e-3)});

  WarningCapture capture;
  const AppliedKernel k = apply_history_best(HistorySource::log(dir.file("log.db")), untuned);
  EXPECT_EQ(k.source, Source::kNearest);
  ASSERT_TRUE(k.record.has_value());
  EXPECT_EQ(k.record->workload_key, tuned.workload_key());
  EXPECT_NE(k.note.find("nearest tuned workload " + tuned.workload_key()), std::string::npos)
      << k.note;
  EXPECT_LT(error_of(untuned, k.kernel), 1e-4);
  const auto w = capture.warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find(tuned.workload_key()), std::string::npos) << w[0];
}

TEST(HistoryBest, AnotherTemplateOnlyGivesTheFallbackWithOneWarning) {
  TempDir dir;
  const Task tuned = matmul(64, 64, 64);
  const Task task =
      make_task("batch_matmul", {{"batch", "2"}, {"M", "32"}, {"N", "32"}, {"K", "32"}});
  write_log(dir.file("log.db"), {record_of(tuned, tuned.fallback_config(), 1e-3)});
  const auto from = HistorySource::log(dir.file("log.db"));

  WarningCapture capture;
  for (int i = 0; i < 3; ++i) {
    const AppliedKernel k = apply_history_best(from, task);
    EXPECT_EQ(k.source, Source::kFallback);
    EXPECT_FALSE(k.record.has_value());
    EXPECT_EQ(k.config.index(), task.fallback_config().index());
    EXPECT_NE(k.note.find("fallback"), std::string::npos) << k.note;
    EXPECT_LT(error_of(task, k.kernel), 1e-4);
  }
  const auto w = capture.warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find(task.workload_key()), std::string::npos) << w[0];
}

TEST(HistoryBest, ErrorsByKind) {
  TempDir dir;
  const Task task = matmul(16, 16, 16);
  EXPECT_EQ(kind_of([&] { apply_history_best(HistorySource::log(dir.file("missing.db")), task); }),
            ErrorKind::kNotFound);
  const std::string not_a_log = dir.write("not_a_log.db", "this is not SQLite\n");
  EXPECT_EQ(kind_of([&] { apply_history_best(HistorySource::log(not_a_log), task); }),
            ErrorKind::kDatabase);
  // A JIT runs host code only.
  write_log(dir.file("log.db"), {});
  const Task arm = make_task("matmul", {{"M", "16"}, {"N", "16"}, {"K", "16"}},
                             "llvm -mtriple=aarch64-linux-gnu");
  EXPECT_EQ(kind_of([&] { apply_history_best(HistorySource::log(dir.file("log.db")), arm); }),
            ErrorKind::kUnsupported);
  // Nobody listens on port 1.
  rpc_runner::ServiceClientOptions nowhere;
  nowhere.server = "127.0.0.1:1";
  nowhere.timeout_s = 2;
  EXPECT_EQ(kind_of([&] { apply_history_best(HistorySource::server(nowhere), task); }),
            ErrorKind::kIo);
  EXPECT_EQ(kind_of([&] { make_task("no_such_template", {}); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              make_task("matmul", {{"M", "8"}, {"N", "8"}, {"K", "8"}}, "llvm -mtriple=nonsense");
            }),
            ErrorKind::kUnsupported);
}

// A `ktune server` process serving the log at db_path on 127.0.0.1.
struct Server {
  Server(const TempDir& dir, const std::string& db_path)
      : child({KTUNE_BIN, "server", "--port", "0", "--db", db_path}, dir.path / "server.out",
              dir.path / "server.err") {
    address = testing_process::wait_for_address(dir.path / "server.out");
    options.server = address;
  }
  Child child;
  std::string address;
  rpc_runner::ServiceClientOptions options;
};

TEST(HistoryBest, AServerServesWhatTheLogServesAndPrefersItsOwnToolchain) {
  TempDir dir;
  const Task task = matmul(48, 64, 64), untuned = matmul(48, 64, 128),
             old_only = matmul(48, 64, 32);
  const auto configs = other_configs(task, 3);
  const auto old_configs = other_configs(old_only, 1);
  // The fastest record of `task` is an older toolchain's: the server must serve this LLVM's.
  write_log(
      dir.file("log.db"),
      {record_of(task, configs[0], 1e-3, kOldLlvm), record_of(task, configs[1], 3e-3),
       record_of(task, configs[2], 2e-3), record_of(old_only, old_configs[0], 1e-3, kOldLlvm)});
  const auto from_log = HistorySource::log(dir.file("log.db"));
  const AppliedKernel local = apply_history_best(from_log, task);
  const AppliedKernel local_nearest = apply_history_best(from_log, untuned);

  Server server(dir, dir.file("log.db"));
  ASSERT_FALSE(server.address.empty()) << testing_process::read_file(dir.path / "server.err");
  const auto from_server = HistorySource::server(server.options);
  const AppliedKernel remote = apply_history_best(from_server, task);
  EXPECT_EQ(remote.source, Source::kTuned);
  EXPECT_EQ(remote.config.index(), configs[2].index());
  EXPECT_EQ(remote.config.index(), local.config.index());
  EXPECT_EQ(remote.record->target.llvm_version, codegen::llvm_version());
  EXPECT_NE(remote.note.find("the best record of tuning server " + server.address),
            std::string::npos)
      << remote.note;
  EXPECT_LT(error_of(task, remote.kernel), 1e-4);

  // QueryBest itself: this LLVM's records first (k of them), the older one only when there is none.
  rpc_runner::ServiceClient client(server.options);
  const auto top = client.best(task.workload_key(), task.target().key, "", 5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].config_index, static_cast<int64_t>(configs[2].index()));
  EXPECT_EQ(top[1].config_index, static_cast<int64_t>(configs[1].index()));
  const auto old_top = client.best(old_only.workload_key(), old_only.target().key, "", 5);
  ASSERT_EQ(old_top.size(), 1u);
  EXPECT_EQ(old_top[0].target.llvm_version, kOldLlvm);

  // The nearest tuned workload, found through the server's exported log: the log's answer.
  const AppliedKernel remote_nearest = apply_history_best(from_server, untuned);
  EXPECT_EQ(remote_nearest.source, Source::kNearest);
  EXPECT_EQ(remote_nearest.record->workload_key, task.workload_key());
  EXPECT_EQ(remote_nearest.config.index(), local_nearest.config.index());
  EXPECT_LT(error_of(untuned, remote_nearest.kernel), 1e-4);

  // `ktune best/build --server` say when they serve an older toolchain's record, and not otherwise.
  const std::string old_args = " matmul M=48 N=64 K=32 --server " + server.address;
  auto best_old = testing_cli::ktune("best" + old_args + " --json", true);
  ASSERT_EQ(best_old.status, 0) << best_old.err;
  EXPECT_NE(best_old.err.find(std::string("measured with LLVM ") + kOldLlvm), std::string::npos)
      << best_old.err;
  auto built_old = testing_cli::ktune(
      "build" + old_args + " -o " + quote(dir.file("k.o")) + " --header " + quote(dir.file("k.h")),
      true);
  ASSERT_EQ(built_old.status, 0) << built_old.err;
  EXPECT_NE(built_old.err.find(std::string("measured with LLVM ") + kOldLlvm), std::string::npos)
      << built_old.err;
  auto best_mine =
      testing_cli::ktune("best matmul M=48 N=64 K=64 --json --server " + server.address, true);
  ASSERT_EQ(best_mine.status, 0) << best_mine.err;
  EXPECT_EQ(best_mine.err.find("measured with LLVM"), std::string::npos) << best_mine.err;
  EXPECT_EQ(nlohmann::json::parse(best_mine.out)["best"]["config"]["index"], configs[2].index());

  // `ktune build --server` of the untuned shape builds what apply_history_best took, and says so.
  auto built_nearest =
      testing_cli::ktune("build matmul M=48 N=64 K=128 --json --server " + server.address + " -o " +
                             quote(dir.file("n.o")) + " --header " + quote(dir.file("n.h")),
                         true);
  ASSERT_EQ(built_nearest.status, 0) << built_nearest.err;
  const auto built_json = nlohmann::json::parse(built_nearest.out);
  EXPECT_EQ(built_json["config_source"], "nearest");
  EXPECT_EQ(built_json["nearest"]["workload"], task.workload_key());
  EXPECT_EQ(built_json["config"]["index"], remote_nearest.config.index());
  EXPECT_NE(built_nearest.err.find("nearest tuned workload " + task.workload_key() +
                                   " (tuning server " + server.address),
            std::string::npos)
      << built_nearest.err;
}

}  // namespace
}  // namespace ktune
