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

// After the re-timing the summary's best is the figure the log serves; the speed-up compares two
// re-timed medians, says when the fallback was timed once, and is not quoted from a noisy one.
TEST(TuneSummary, TheBestIsTheRetimedFigureAndANoisySpeedUpIsNotQuoted) {
  auto summary = nlohmann::json::parse(R"js({
    "workload": "matmul(M=256,N=256,K=256)", "target": "host", "measured": 32, "ok": 32,
    "errors": {}, "wall_s": 1.2,
    "best": {"gflops": 319.09, "mean_cost_s": 0.0001052, "retimed": true, "noisy": false,
             "config": {"index": 27363}},
    "first_timing": {"gflops": 314.78, "mean_cost_s": 0.0001066, "config": {"index": 20134}},
    "fallback": {"ok": true, "gflops": 319.09, "mean_cost_s": 0.0001052, "retimed": true,
                 "first_timing_s": 0.0007203, "noisy": false},
    "speedup_over_fallback": 1.0})js");
  std::ostringstream out;
  print_tune_summary(summary, out);
  EXPECT_NE(out.str().find("best:     319.09 GFLOP/s (0.1052 ms, re-timed)\n"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("fallback: 319.09 GFLOP/s (0.1052 ms, re-timed; timed 0.7203 ms first)"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("speed-up over fallback: 1.00x\n"), std::string::npos) << out.str();
  // The log holds the fallback's record too: the count says so.
  EXPECT_NE(out.str().find("measured: 32 configs (32 ok) and the fallback config in 1.2 s"),
            std::string::npos)
      << out.str();
  // When the best is the fallback config itself, the best's line says so.
  summary["fallback"]["config"] = {{"index", 27363}};
  out.str("");
  print_tune_summary(summary, out);
  EXPECT_NE(out.str().find("best:     319.09 GFLOP/s (0.1052 ms, re-timed) [the fallback config: "
                           "no trial beat it]\n"),
            std::string::npos)
      << out.str();

  summary["fallback"] = {
      {"ok", true}, {"gflops", 46.59}, {"mean_cost_s", 0.0007203}, {"retimed", false}};
  summary["speedup_over_fallback"] = 6.85;
  out.str("");
  print_tune_summary(summary, out);
  EXPECT_NE(out.str().find("speed-up over fallback: 6.85x (the fallback timed once)"),
            std::string::npos)
      << out.str();

  summary["best"]["noisy"] = true;
  out.str("");
  print_tune_summary(summary, out);
  EXPECT_NE(out.str().find("(0.1052 ms, re-timed) NOISY: its rounds spread more than 25%"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("speed-up over fallback: not quoted"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("6.85x"), std::string::npos) << out.str();
}

// The re-timing's line counts the best configs, and names the fallback when it was re-timed
// beside them without being one of them.
TEST(TuneSummary, TheRetimingLineNamesTheFallbackReTimedBesideTheBest) {
  auto summary = nlohmann::json::parse(R"js({
    "workload": "matmul(M=64,N=64,K=64)", "target": "host", "measured": 8, "ok": 8,
    "errors": {}, "wall_s": 0.5,
    "retimed": {"rounds": 3, "best_before_s": 0.00002, "best_after_s": 0.000021,
                "best_before_config": 4, "best_after_config": 4, "with_fallback": true,
                "configs": [{}, {}, {}, {}, {}, {}]}})js");
  std::ostringstream out;
  print_tune_summary(summary, out);
  EXPECT_NE(out.str().find("re-timed the 5 best configs and the fallback over 3 interleaved "
                           "rounds: best 0.0200 ms -> 0.0210 ms\n"),
            std::string::npos)
      << out.str();
  summary["retimed"]["with_fallback"] = false;
  out.str("");
  print_tune_summary(summary, out);
  EXPECT_NE(out.str().find("re-timed the 6 best configs over 3"), std::string::npos) << out.str();

  // A job of the server sends the same JSON: its passes and the config now the best are said.
  summary["retimed"]["passes"] = 2;
  summary["retimed"]["best_after_config"] = 7;
  out.str("");
  print_tune_summary(summary, out);
  EXPECT_NE(out.str().find("in 2 passes (the first demoted every config it re-timed) (config #7 is "
                           "now the best, was #4)"),
            std::string::npos)
      << out.str();
}

}  // namespace
}  // namespace ktune::tools
