// End-to-end test of the bfloat16 GEMM through the ktune command: `tune matmul_bf16 ...` (K odd,
// with the bias + relu epilogue) measures every trial, each checked by the runner against the
// task's reference on bfloat16 inputs, and logs them all as records without an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/tools/tune_cli_util.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::quote;

TEST(Bf16Cli, TuneLogsEveryTrial) {
  const fs::path dir = fs::temp_directory_path() / ("ktune_bf16_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = quote((dir / "log.db").string());
  testing_cli::expect_tune_logs_every_trial("matmul_bf16 M=24 N=40 K=37 epilogue=bias_relu",
                                            "matmul_bf16(M=24,N=40,K=37,epilogue=bias_relu)", 8,
                                            db);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ktune
