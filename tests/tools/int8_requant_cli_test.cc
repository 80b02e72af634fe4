// End-to-end tests of the requantized int8 kernels through the ktune command: `tune matmul_u8s8s32
// ... out=u8` measures every trial without an error, and `build` of its best record writes an
// object and a header whose kernel takes the epilogue's inputs and writes uint8 C; `tune
// conv2d_nchwc_u8s8s32 ... out=u8` and `tune depthwise_conv2d_nchwc_u8s8s32 ... out=s8` log every
// trial as a correct record.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/tools/tune_cli_util.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::ktune;
using testing_cli::quote;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Int8RequantCli, TuneLogsEveryTrialAndBuildWritesAUint8Kernel) {
  const fs::path dir =
      fs::temp_directory_path() / ("ktune_int8_requant_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = quote((dir / "log.db").string());
  const std::string workload = "matmul_u8s8s32 M=24 N=40 K=36 out=u8 scale=per_channel relu=1";

  ASSERT_NO_FATAL_FAILURE(testing_cli::expect_tune_logs_every_trial(
      workload, "matmul_u8s8s32(M=24,N=40,K=36,out=u8,scale=per_channel,relu=1)", 8, db));

  const fs::path obj = dir / "k.o", header = dir / "k.h";
  const auto build = ktune("build " + workload + " --db " + db + " -o " + quote(obj.string()) +
                               " --header " + quote(header.string()),
                           true);
  ASSERT_EQ(build.status, 0) << build.err;
  ASSERT_TRUE(fs::exists(obj));
  EXPECT_GT(fs::file_size(obj), 0u);
  const std::string h = read_text(header);
  EXPECT_NE(h.find("const int32_t* bias"), std::string::npos) << h;
  EXPECT_NE(h.find("const float* scale"), std::string::npos) << h;
  EXPECT_NE(h.find("const int32_t* zero_point"), std::string::npos) << h;
  EXPECT_NE(h.find("uint8_t* C"), std::string::npos) << h;
  EXPECT_EQ(h.find("int32_t* C"), std::string::npos) << h;
  fs::remove_all(dir);
}

// As testing_cli::expect_tune_logs_every_trial, in a folder of its own.
void expect_tune_logs_every_trial(const std::string& workload, const std::string& key, int trials) {
  const fs::path dir =
      fs::temp_directory_path() / ("ktune_int8_conv_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  testing_cli::expect_tune_logs_every_trial(workload, key, trials,
                                            quote((dir / "log.db").string()));
  fs::remove_all(dir);
}

TEST(Int8RequantCli, TuneConvLogsEveryTrial) {
  expect_tune_logs_every_trial(
      "conv2d_nchwc_u8s8s32 C=8 H=9 W=7 K=20 stride=2 pad=1 data_zero_point=7 out=u8 "
      "scale=per_channel relu=1",
      "conv2d_nchwc_u8s8s32(N=1,C=8,H=9,W=7,K=20,R=3,S=3,stride=2,pad=1,ic_block=8,"
      "data_zero_point=7,out=u8,scale=per_channel,relu=1)",
      6);
}

TEST(Int8RequantCli, TuneDepthwiseLogsEveryTrial) {
  expect_tune_logs_every_trial(
      "depthwise_conv2d_nchwc_u8s8s32 C=20 H=9 W=7 stride=2 pad=1 data_zero_point=7 out=s8 "
      "scale=per_channel",
      "depthwise_conv2d_nchwc_u8s8s32(N=1,C=20,H=9,W=7,R=3,S=3,stride=2,pad=1,dilation=1,"
      "data_zero_point=7,out=s8,scale=per_channel)",
      6);
}

}  // namespace
}  // namespace ktune
