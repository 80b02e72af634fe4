// Tests print_tune_summary: the text `ktune tune` ends with, errors by kind included.
#include <gtest/gtest.h>

#include <sstream>

#include "tools/tune_summary.h"

namespace ktune::tools {
namespace {

TEST(TuneSummary, CountsEveryErrorKindAndTheBest) {
  const auto summary = nlohmann::json::parse(R"js({
    "workload": "matmul(M=1,N=1000,K=512)", "target": "host", "measured": 32, "ok": 29,
    "errors": {"build_timeout": 1, "wrong_answer": 2}, "wall_s": 12.5,
    "best": {"gflops": 40.25, "mean_cost_s": 0.0000254, "config": {"index": 7}}})js");
  std::ostringstream out;
  print_tune_summary(summary, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("measured: 32 configs (29 ok, 1 build_timeout, 2 wrong_answer) in 12.5 s"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("40.25 GFLOP/s"), std::string::npos) << text;
}

}  // namespace
}  // namespace ktune::tools
