// End-to-end test of the service's commands as processes on 127.0.0.1: `ktune server`, two
// `ktune worker`s, `ktune tune --server` (streamed and --detach), `ktune jobs` (list, watch,
// cancel), `ktune best/build --server`, `ktune db export --server`, and their errors.
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/process_util.h"
#include "tuning_db/database.h"

#define KTUNE_BINARY KTUNE_BIN
#include "tests/cli_util.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::count_lines;
using testing_cli::expect_one_line_error;
using testing_cli::quote;
using testing_process::Child;
using testing_process::read_file;

class CliRemote : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ktune_cli_remote_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(CliRemote, TuneJobsBestBuildAndExportThroughTheServer) {
  const std::string ktune = KTUNE_BIN;
  Child server({ktune, "server", "--port", "0", "--db", path("server.db")}, dir_ / "server.out",
               dir_ / "server.err");
  const std::string address = testing_process::wait_for_address(dir_ / "server.out");
  ASSERT_FALSE(address.empty()) << read_file(dir_ / "server.err");
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  Child w1({ktune, "worker", "--server", address, "--key", "k", "--runner", KTUNE_RUNNER_PATH,
            "--slots", "1"},
           dir_ / "w1.out", dir_ / "w1.err");
  Child w2({ktune, "worker", "--server", address, "--key", "k", "--runner", KTUNE_RUNNER_PATH,
            "--slots", "1"},
           dir_ / "w2.out", dir_ / "w2.err");
  const std::string srv = " --server " + address;
  for (int i = 0; i < 250; ++i) {
    auto listed = testing_cli::ktune("server devices --json" + srv);
    if (listed.status == 0 && nlohmann::json::parse(listed.out).size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  const std::string workload = "matmul M=64 N=64 K=64";

  // A streamed job: progress on stderr, the local run's summary on stdout.
  auto tuned = testing_cli::ktune(
      "tune " + workload + " --tuner random --trials 16" + srv + " --device-key k", true);
  ASSERT_EQ(tuned.status, 0) << tuned.out << tuned.err;
  EXPECT_NE(tuned.out.find("measured: 16 configs (16 ok)"), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.out.find("job:      1 (done) on key k"), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.err.find("trials 16/16"), std::string::npos) << tuned.err;

  // A detached job returns at once with its id and finishes with no client; watch re-attaches.
  auto detached =
      testing_cli::ktune("tune " + workload + " --tuner random --seed 5 --trials 16 --detach" +
                         srv + " --device-key k");
  ASSERT_EQ(detached.status, 0) << detached.out;
  EXPECT_EQ(detached.out, "job 2 submitted\n");
  auto watched = testing_cli::ktune("jobs watch 2" + srv, true);
  ASSERT_EQ(watched.status, 0) << watched.out << watched.err;
  EXPECT_NE(watched.out.find("measured: 16 configs"), std::string::npos) << watched.out;
  auto all = testing_cli::ktune("jobs --all --json" + srv);
  ASSERT_EQ(all.status, 0);
  const auto jobs = nlohmann::json::parse(all.out);
  ASSERT_EQ(jobs.size(), 2u);
  for (const auto& j : jobs) {
    EXPECT_EQ(j["state"], "done");
    EXPECT_EQ(j["done"], 16);
    EXPECT_GT(j["best_gflops"].get<double>(), 0);
  }

  // Build-time look-ups ask the server's log: the best record is the log's fastest.
  auto best = testing_cli::ktune("best " + workload + " --json" + srv);
  ASSERT_EQ(best.status, 0) << best.out;
  const auto best_json = nlohmann::json::parse(best.out);
  {
    auto db = tuning_db::Database::open(path("server.db"), {.create = false});
    const auto top = db.best(best_json["workload"].get<std::string>(),
                             {best_json["target"].get<std::string>(), ""});
    ASSERT_TRUE(top.has_value());
    EXPECT_EQ(best_json["best"]["config"]["index"], top->config_index);
    // The server's log numbers its records, not the client's: no id comes over the wire.
    EXPECT_FALSE(best_json["best"].contains("id")) << best.out;
    EXPECT_EQ(db.stats().records, 32 + 1);  // two jobs of 16 trials, and the fallback once
    // --top K: the server's k fastest, in the log's order.
    auto top5 = testing_cli::ktune("best " + workload + " --top 5 --json" + srv);
    ASSERT_EQ(top5.status, 0) << top5.out;
    const auto listed = nlohmann::json::parse(top5.out)["top"];
    const auto expected = db.top_k(best_json["workload"].get<std::string>(),
                                   {best_json["target"].get<std::string>(), ""}, 5);
    ASSERT_EQ(listed.size(), 5u);
    ASSERT_EQ(expected.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(listed[i]["config"]["index"], expected[i].config_index) << i;
      // The record's figure: the median of the job's re-timing where it re-timed the record.
      EXPECT_DOUBLE_EQ(listed[i]["mean_cost_s"].get<double>(), expected[i].cost()) << i;
    }
  }
  auto built = testing_cli::ktune("build " + workload + srv + " --require-tuned -o " +
                                      quote(path("k.o")) + " --header " + quote(path("k.h")),
                                  true);
  ASSERT_EQ(built.status, 0) << built.err;
  EXPECT_NE(read_file(path("k.h")).find(best_json["best"]["config"]["entity"].dump()),
            std::string::npos);
  auto exported = testing_cli::ktune("db export" + srv);
  ASSERT_EQ(exported.status, 0);
  EXPECT_EQ(count_lines(exported.out), 32u + 1);

  // A key without workers: the job waits and says so; cancel ends it.
  auto waiting = testing_cli::ktune("tune " + workload + " --trials 8 --detach" + srv +
                                    " --device-key nobody");
  ASSERT_EQ(waiting.out, "job 3 submitted\n");
  std::string listed;
  for (int i = 0;
       i < 100 && listed.find("waiting for a device with key 'nobody'") == std::string::npos; ++i) {
    listed = testing_cli::ktune("jobs" + srv).out;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(listed.find("waiting for a device with key 'nobody'"), std::string::npos) << listed;
  auto cancelled = testing_cli::ktune("jobs cancel 3" + srv);
  EXPECT_EQ(cancelled.status, 0);
  EXPECT_NE(cancelled.out.find("job 3: cancelled"), std::string::npos) << cancelled.out;
  expect_one_line_error(testing_cli::ktune("jobs watch 3" + srv, true), "job 3 cancelled");

  // Bad input: one line, exit 1, and the server keeps serving.
  expect_one_line_error(testing_cli::ktune("jobs watch 99" + srv, true), "no job 99");
  expect_one_line_error(testing_cli::ktune("jobs cancel 99" + srv, true), "no job 99");
  expect_one_line_error(testing_cli::ktune("tune nosuch" + srv + " --device-key k", true),
                        "nosuch");
  expect_one_line_error(testing_cli::ktune("tune " + workload + srv, true), "--device-key");
  expect_one_line_error(testing_cli::ktune("jobs --server 127.0.0.1:1", true),
                        "cannot reach the tuning server");
  expect_one_line_error(
      testing_cli::ktune("tune " + workload + " --server 127.0.0.1:1 --device-key k", true),
      "cannot reach the tuning server");
  EXPECT_EQ(testing_cli::ktune("jobs --all" + srv).status, 0);
}

}  // namespace
}  // namespace ktune
