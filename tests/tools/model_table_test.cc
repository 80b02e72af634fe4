// Tests the summary `ktune tune-model` ends with (tools/model_table.cc), compiled here as a ktune
// built without oneDNN and OpenBLAS (scripts/demo's build) is: the libraries are not timed and
// the summary says why and how to get them; the lead is the built model's measured latency, else
// the tasks' estimate with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "deploy/config_choice.h"
#include "tools/model_table.h"
#include "tools/whole_percents.h"

namespace ktune::tools {
namespace {

// Two tasks: a conv (count 2) whose best and fallback are 1 and 3 ms, a matmul of 0.5 and 1 ms.
tuner::ModelTuningReport two_tasks() {
  tuner::ModelTuningReport r;
  tuner::TaskProgress conv;
  conv.key = conv.tuned_as = "conv2d(N=1)";
  conv.count = 2;
  conv.trials = 16;
  conv.best_s = 1e-3;
  conv.fallback_s = 3e-3;
  conv.layers = {"conv_1", "conv_2"};
  tuner::TaskProgress fc = conv;
  fc.key = fc.tuned_as = "matmul(M=1)";
  fc.count = 1;
  fc.best_s = 0.5e-3;
  fc.fallback_s = 1e-3;
  fc.layers = {"fc_3"};
  r.tasks = {conv, fc};
  r.trials = 32;
  r.tuned_s = 2 * 1e-3 + 0.5e-3;
  r.fallback_s = 2 * 3e-3 + 1e-3;
  return r;
}

// What print_model_summary writes, as a string.
std::string summary_text(const tuner::ModelTuningReport& r, const nlohmann::json& j,
                         const LibraryTimes* libraries) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = ::open_memstream(&buffer, &size);
  print_model_summary(out, r, j, 32, libraries, "");
  std::fclose(out);
  std::string text(buffer, size);
  std::free(buffer);
  return text;
}

TEST(ModelTable, WithoutLibrariesTheSummarySaysWhyAndHowToGetThem) {
  const tuner::ModelTuningReport r = two_tasks();
  nlohmann::json j = {{"model", "tiny"}};
  j["tasks"] = nlohmann::json::array({nlohmann::json::object(), nlohmann::json::object()});
  const LibraryTimes libraries =
      add_library_times(frontend::ModelTasks{}, r, HistorySource::untuned(), 1, 3, j);
  EXPECT_TRUE(libraries.empty());
  EXPECT_EQ(j["library_s"], 0.0);
  ASSERT_TRUE(j.contains("libraries_note")) << j.dump();
  const std::string note = j["libraries_note"];
  EXPECT_NE(note.find("built without oneDNN and OpenBLAS"), std::string::npos) << note;
  EXPECT_NE(note.find("scripts/setup installs them"), std::string::npos) << note;

  const std::string text = summary_text(r, j, &libraries);
  EXPECT_NE(text.find("\n  libraries: " + note + "\n"), std::string::npos) << text;
  // The table's library columns are "-" on every row, the reason under it.
  EXPECT_NE(text.find("conv_1 +1 more"), std::string::npos) << text;
  EXPECT_NE(text.find("fc_3"), std::string::npos) << text;
}

TEST(ModelTable, TheSummaryIsLedByTheBuiltModelsMeasuredLatency) {
  const tuner::ModelTuningReport r = two_tasks();
  nlohmann::json j = {{"model", "tiny"}};
  j["built_model"] = {{"measured_s", 3e-3},
                      {"runs", 30},
                      {"min_s", 2.9e-3},
                      {"max_s", 3.5e-3},
                      {"kernels", 5},
                      {"threads", 2},
                      {"task_kernels_s", 2.4e-3},
                      {"other_kernels_s", 0.6e-3}};
  const std::string text = summary_text(r, j, nullptr);
  const auto lead = text.find("\nmodel tiny: ");
  ASSERT_NE(lead, std::string::npos) << text;
  EXPECT_EQ(text.substr(lead + 1, text.find('\n', lead + 1) - lead - 1),
            "model tiny: 3.0000 ms end to end, measured on the model as build --model ships it "
            "(median of 30 runs at 2 threads, 2.9000 to 3.5000 ms; 5 kernels)");
  EXPECT_NE(text.find("  kernels timed one by one in the model's order: tuned tasks 80%, layout "
                      "and generated kernels 20%; measured / their sum 1.00\n"),
            std::string::npos)
      << text;
  // The tuned tasks in the model's order (2.4 ms) against their count x best_ms sum (2.5 ms).
  EXPECT_NE(text.find("  tuned tasks in the model's order: 0.96x their count x best_ms sum"),
            std::string::npos)
      << text;
  // 7 ms of fallbacks over 2.5 ms tuned.
  EXPECT_NE(text.find("  tuned tasks: 2.80x faster than their untuned fallbacks (2.5000 against "
                      "7.0000 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  trials: 32 of 32\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("estimated"), std::string::npos) << text;
  EXPECT_EQ(text.find("NOISY"), std::string::npos) << text;
  EXPECT_EQ(text.find("slowest run"), std::string::npos) << text;  // 3.5 ms: within 3x the median
  EXPECT_EQ(text.find("failed"), std::string::npos) << text;

  // One run 5x the median while the middle half is tight: said as an outlier.
  j["built_model"]["max_s"] = 15e-3;
  EXPECT_NE(summary_text(r, j, nullptr)
                .find("5 kernels)\n  the slowest run took 5.0x the median: an outlier (the middle "
                      "half of the runs is tight), which the median leaves out\n"),
            std::string::npos)
      << summary_text(r, j, nullptr);
  j["built_model"]["max_s"] = 3.5e-3;
  // A middle half of the runs wider than 25% of the median: said under the figure.
  j["built_model"]["noisy"] = true;
  j["built_model"]["q1_s"] = 2.5e-3;
  j["built_model"]["q3_s"] = 3.4e-3;
  EXPECT_NE(summary_text(r, j, nullptr)
                .find("5 kernels)\n  NOISY: the middle half of the runs spread 30% of the median "
                      "(2.5000 to 3.4000 ms): not a usable figure; run again on a quieter "
                      "machine\n"),
            std::string::npos)
      << summary_text(r, j, nullptr);
}

// Failed trials are said per tuned workload, by kind, and survive a server's JSON report.
TEST(ModelTable, FailedTrialsAreSaidByKind) {
  tuner::ModelTuningReport r = two_tasks();
  r.tasks[0].errors = {{"build_timeout", 3}, {"wrong_answer", 1}};
  const tuner::ModelTuningReport back = tuner::model_report_from_json(tuner::to_json(r));
  ASSERT_EQ(back.tasks.size(), 2u);
  EXPECT_EQ(back.tasks[0].errors, r.tasks[0].errors);
  EXPECT_TRUE(back.tasks[1].errors.empty());
  const std::string text = summary_text(back, {{"model", "tiny"}}, nullptr);
  EXPECT_NE(text.find("  failed: 4 of its 16 trials (build_timeout 3, wrong_answer 1) in "
                      "conv2d(N=1)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(") in matmul(M=1)"), std::string::npos) << text;
}

// A speed-up over the fallbacks resting on a noisy best or fallback is not quoted: the summary
// says why, the row's best_ms is marked ~ and the legend says so; the JSON (a server's report,
// the stored run) keeps the flag and drops speedup_over_fallback. Without the flag, the figure.
TEST(ModelTable, ASpeedUpOnNoisyTimingsIsNotQuoted) {
  const tuner::ModelTuningReport quiet = two_tasks();
  EXPECT_NE(summary_text(quiet, {{"model", "tiny"}}, nullptr)
                .find("  tuned tasks: 2.80x faster than their untuned fallbacks"),
            std::string::npos);
  EXPECT_TRUE(tuner::to_json(quiet).contains("speedup_over_fallback"));

  // fc's best and conv's fallback are noisy; so is the best of an algorithm for fc that does not
  // ship (slower): that one is marked, as `ktune best` calls it NOISY, but not counted.
  tuner::ModelTuningReport r = two_tasks();
  r.tasks[1].best_noisy = true;
  r.tasks[0].fallback_noisy = true;
  tuner::TaskProgress other = r.tasks[1];
  other.key = other.tuned_as = "matmul_other(M=1)";
  other.alternative_of = r.tasks[1].key;
  other.best_s = 0.9e-3;
  other.fallback_s = 2e-3;
  r.tasks.push_back(other);
  const nlohmann::json j = tuner::to_json(r);
  EXPECT_FALSE(j.contains("speedup_over_fallback")) << j.dump();
  EXPECT_EQ(j.value("noisy_in_sums", 0), 2) << j.dump();
  const tuner::ModelTuningReport back = tuner::model_report_from_json(j);
  ASSERT_EQ(back.tasks.size(), 3u);
  EXPECT_FALSE(back.tasks[0].best_noisy);
  EXPECT_TRUE(back.tasks[0].fallback_noisy);
  EXPECT_TRUE(back.tasks[1].best_noisy);
  EXPECT_FALSE(back.tasks[1].fallback_noisy);
  const std::string text = summary_text(back, {{"model", "tiny"}}, nullptr);
  EXPECT_EQ(text.find("faster than their untuned fallbacks"), std::string::npos) << text;
  EXPECT_NE(text.find("  tuned tasks: no speed-up over their untuned fallbacks quoted: the "
                      "timings of 2 rows behind the sums (the best of a row that ships, the "
                      "fallback of a layer's first algorithm) spread more than 25% (marked ~)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("0.5000~"), std::string::npos) << text;  // fc's best
  EXPECT_NE(text.find("3.0000~"), std::string::npos) << text;  // conv's fallback
  EXPECT_EQ(text.find("1.0000~"), std::string::npos) << text;  // conv's best, fc's fallback
  EXPECT_NE(text.find("0.9000~"), std::string::npos) << text;  // the alternative that does not ship
  EXPECT_NE(text.find("\n  ~: the timings behind that figure spread"), std::string::npos) << text;
}

// The tuned/library line says on how many races it rests when noisy ones were left out.
TEST(ModelTable, TheLibraryRatioSaysHowManyRacesItRestsOn) {
  const tuner::ModelTuningReport r = two_tasks();
  nlohmann::json j = {{"model", "tiny"},
                      {"library_s", 1e-3},
                      {"tuned_s_where_library", 0.5e-3},
                      {"library_rounds", 9}};
  j["tasks"] = {{{"library_s", 2e-3}, {"noisy", true}}, {{"library_s", 1e-3}}};
  EXPECT_NE(summary_text(r, j, nullptr)
                .find("  libraries: tuned/library 0.50 on the same operators (0.5000 against "
                      "1.0000 ms; medians of 9 interleaved rounds, in this process; 1 of 2 races, "
                      "the noisy ones left out)\n"),
            std::string::npos)
      << summary_text(r, j, nullptr);
  j["tasks"][0].erase("noisy");
  EXPECT_NE(summary_text(r, j, nullptr).find("in this process)\n"), std::string::npos);
}

// Three tasks of a third of the estimate each: their shares add up to 100% (34, 33, 33), not 99.
// The rounding the table and the HTML report share: rounded down, the largest remainders up.
TEST(WholePercents, AddUpToAHundredAndKeepTheRowsWithout) {
  const auto p = whole_percents({0.474, 0.521, 0.005, std::nullopt});
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], 47);
  EXPECT_EQ(p[1], 52);
  EXPECT_EQ(p[2], 1);  // 0.5 of a percent: the largest remainder
  EXPECT_FALSE(p[3]);
  EXPECT_EQ(*p[0] + *p[1] + *p[2], 100);
}

TEST(ModelTable, SharesAddUpToAHundredPercent) {
  tuner::ModelTuningReport r = two_tasks();
  tuner::TaskProgress third = r.tasks[1];
  third.key = third.tuned_as = "matmul(M=2)";
  third.layers = {"fc_4"};
  r.tasks[0].count = 1;
  for (auto* t : {&r.tasks[0], &r.tasks[1]}) t->best_s = 1e-3;
  third.best_s = 1e-3;
  r.tasks.push_back(third);
  r.tuned_s = 3e-3;
  const std::string text = summary_text(r, {{"model", "tiny"}}, nullptr);
  int total = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    int row = 0, count = 0, trials = 0, share = 0;
    double best = 0, fallback = 0;
    if (std::sscanf(line.c_str(), " %d %d %d %lf %lf %d%%", &row, &count, &trials, &best, &fallback,
                    &share) == 6)
      total += share;
  }
  EXPECT_EQ(total, 100) << text;
  EXPECT_NE(text.find(" 34% "), std::string::npos) << text;
}

TEST(ModelTable, WithoutABuiltModelTheEstimateLeadsAndSaysWhy) {
  const tuner::ModelTuningReport r = two_tasks();
  nlohmann::json j = {{"model", "tiny"}};
  EXPECT_NE(summary_text(r, j, nullptr)
                .find("\nmodel tiny: 2.5000 ms estimated, the sum of count x best over 2 tasks "
                      "(the model was not built and timed in this run)\n"),
            std::string::npos);
  j["built_model"] = {{"error", "node 'x' (Hardmax) has no kernel"}};
  EXPECT_NE(summary_text(r, j, nullptr)
                .find("\nmodel tiny: 2.5000 ms estimated, the sum of count x best over 2 tasks "
                      "(not built: node 'x' (Hardmax) has no kernel)\n"),
            std::string::npos);
}

// The table's two figures of a tuned kernel are said under it; a library that ran faster on one
// thread than the race's two is marked, and said.
TEST(ModelTable, TheTwoTunedFiguresAndALibraryOnOneThreadAreSaid) {
  const tuner::ModelTuningReport r = two_tasks();
  const baselines::RoundStats tuned{5, 0.9e-3, 0.85e-3, 0.95e-3};
  const baselines::RoundStats library{5, 1.2e-3, 1.1e-3, 1.3e-3};
  LibraryTimes libraries = {{"conv2d(N=1)", {"oneDNN", tuned, library, 2, 2}},
                            {"matmul(M=1)", {"OpenBLAS", tuned, library, 2, 2}}};
  const nlohmann::json j = {{"model", "tiny"}};
  std::string text = summary_text(r, j, &libraries);
  EXPECT_NE(text.find("\n  best_ms: the log's re-timed best, which the sums below use; tuned_ms "
                      "and library_ms: medians of 5 rounds in which the two took turns at 2 "
                      "threads (± half their range), compared by ratio\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find('*'), std::string::npos) << text;
  libraries.at("matmul(M=1)").library_threads = 1;
  text = summary_text(r, j, &libraries);
  EXPECT_NE(text.find("1.2000 ±8%*"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  *: the library ran faster on one thread"), std::string::npos) << text;
  EXPECT_EQ(text.find("1.2000 ±8%*"), text.rfind("1.2000 ±8%*")) << text;  // the matmul's row only
}

// Where the wall time went: the search the budget bounds, and what follows it.
TEST(ModelTable, TheWallTimeIsSaidByPart) {
  tuner::ModelTuningReport r = two_tasks();
  r.search_s = 120.2;
  r.retime_s = 52;
  r.out_of_time = true;
  nlohmann::json j = tuner::to_json(r);
  j["model"] = "tiny";
  j["wall"]["libraries_s"] = 41;
  j["wall"]["model_run_s"] = 0.44;
  const tuner::ModelTuningReport back = tuner::model_report_from_json(j);
  EXPECT_EQ(back.search_s, 120.2);
  EXPECT_EQ(back.retime_s, 52);
  EXPECT_NE(summary_text(back, j, nullptr)
                .find("  time budget: the search stopped at it after 32 of 32 trials\n  wall time "
                      "3m34s: search 2m00s, re-timing the best configs 52s, library races 41s, "
                      "building and timing the model 0.4s\n"),
            std::string::npos)
      << summary_text(back, j, nullptr);
}

}  // namespace
}  // namespace ktune::tools
