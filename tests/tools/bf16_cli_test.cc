// End-to-end test of the bfloat16 GEMM through the ktune command: `tune matmul_bf16 ...` (K odd,
// with the bias + relu epilogue) measures every trial, each checked by the runner against the
// task's reference on bfloat16 inputs, and logs them all as records without an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_util.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::ktune;
using testing_cli::quote;

TEST(Bf16Cli, TuneLogsEveryTrial) {
  const fs::path dir = fs::temp_directory_path() / ("ktune_bf16_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = quote((dir / "log.db").string());
  const auto tune = ktune(
      "tune matmul_bf16 M=24 N=40 K=37 epilogue=bias_relu --trials 8 --number 1 --repeat 1 "
      "--min-repeat-ms 0 --db " +
          db,
      true);
  ASSERT_EQ(tune.status, 0) << tune.err;

  const auto stats = ktune("db stats --json --db " + db, true);
  ASSERT_EQ(stats.status, 0) << stats.err;
  const auto j = nlohmann::json::parse(stats.out);
  ASSERT_EQ(j["per_workload"].size(), 1u) << stats.out;
  const auto& w = j["per_workload"][0];
  EXPECT_EQ(w["workload"], "matmul_bf16(M=24,N=40,K=37,epilogue=bias_relu)");
  // The 8 trials and the fallback, all measured and matching the reference.
  EXPECT_EQ(w["records"], 9) << stats.out;
  EXPECT_EQ(w["ok_records"], 9) << stats.out;
  EXPECT_EQ(j["failed_records"], 0) << stats.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ktune
