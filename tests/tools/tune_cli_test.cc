// Tests of `ktune tune`'s numeric options: out-of-range, negative, NaN, infinite and huge values
// are refused with one line and exit status 1, before any log is created.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli_util.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::ktune;

TEST(TuneCli, BadNumbersAreOneLineAndNoLog) {
  const fs::path db =
      fs::temp_directory_path() / ("ktune_tune_cli_" + std::to_string(::getpid()) + ".db");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--trials -1", "is not a number from 1 to 1e+07"},
      {"--trials 0", "is not a number from 1 to 1e+07"},
      {"--trials 99999999999999999999999", "is not a number from 1 to 1e+07"},
      {"--trials many", "is not a number from 1 to 1e+07"},
      {"--threads 100000", "is not a number from 0 to 256"},
      {"--timeout -1", "is not a number from 0.001 to 86400"},
      {"--timeout nan", "is not a number from 0.001 to 86400"},
      {"--timeout inf", "is not a number from 0.001 to 86400"},
      {"--min-repeat-ms -5", "is not a number from 0 to 60000"},
      {"--number 0", "is not a number from 1 to 1e+06"},
      {"--repeat 1e400", "is not a number from 1 to 1000"},
      {"--batch-size 100000", "is not a number from 1 to 4096"},
      {"--early-stopping -3", "is not a number from 0 to 1e+07"},
  };
  for (const auto& [option, message] : cases) {
    const auto r = ktune(
        "tune matmul M=16 N=16 K=16 --db " + testing_cli::quote(db.string()) + " " + option, true);
    EXPECT_EQ(r.status, 1) << option;
    EXPECT_NE(r.err.find(message), std::string::npos) << option << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << option << ": " << r.err;
    EXPECT_FALSE(fs::exists(db)) << option << " created the log";
  }
  // A long bad value is quoted with at most 80 characters.
  const auto r = ktune("tune matmul --trials " + std::string(500, '9') + "x", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_LT(r.err.size(), 200u) << r.err;
}

// Words a command does not take are named in the order typed (CLI11 lists them last first), and
// tune's NAME=VALUE syntax given to a command of workload keys says what it takes instead.
TEST(TuneCli, UnexpectedArgumentsAreNamedInTheOrderTyped) {
  testing_cli::expect_one_line_error(ktune("tune-model none.onnx --trails 5", true),
                                     "arguments not expected here: --trails 5 (see --help)");
  testing_cli::expect_one_line_error(
      ktune("db best matmul M=512 N=512 K=512 --db none.db", true),
      "arguments not expected here: M=512 N=512 K=512 (see --help; a workload key is one quoted "
      "argument, e.g. 'matmul(M=512,N=512,K=512,layout=nn,dtype=float32)')");
}

}  // namespace
}  // namespace ktune
