// End-to-end tests of `ktune tune-model` on the small CNN of scripts/make-test-models (real kernels
// on the local runner): one budget over every task with a warm-up each, the estimate equal to the
// sum of count x best, the layers named as `ktune run` names them, the libraries' medians over
// interleaved rounds, the log holding every trial, a second run resuming, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/cli_util.h"
#include "tests/frontend/test_models.h"
#include "tuning_db/record.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::ktune;
using testing_cli::quote;
using testing_models::model;

int64_t records_in(const std::string& db) {
  const auto r = ktune("db stats --db " + quote(db) + " --json");
  EXPECT_EQ(r.status, 0);
  return nlohmann::json::parse(r.out)["ok_records"].get<int64_t>() +
         nlohmann::json::parse(r.out)["failed_records"].get<int64_t>();
}

// The figure the log's best record of a workload ranks by (a re-timing's median when re-timed).
double log_best(const std::string& db, const std::string& workload) {
  const auto r = ktune("db best --db " + quote(db) + " --json " + quote(workload));
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? nlohmann::json::parse(r.out)["mean_cost_s"].get<double>() : -1;
}

TEST(TuneModelCli, OneBudgetOverEveryTaskThenResume) {
  const std::string db =
      (fs::temp_directory_path() / ("ktune_tune_model_" + std::to_string(::getpid()) + ".db"))
          .string();
  fs::remove(db);
  const std::string cmd = "tune-model " + quote(model("small_cnn.onnx")) +
                          " --tuner random --batch-size 4 --json --db " + quote(db);
  const auto first = ktune(cmd + " --trials 20 --library-rounds 3");
  ASSERT_EQ(first.status, 0) << first.out;
  const auto j = nlohmann::json::parse(first.out);
  EXPECT_EQ(j["trials"], 20);  // a warm-up batch for each of the 5 tasks
  // 2 convs and their Winograd alternatives, Gemm; the pools a build runs as generated kernels
  // (their input channel-blocked) are not tuned, and say so.
  ASSERT_EQ(j["tasks"].size(), 5u);
  std::set<std::string> untuned;
  for (const auto& u : j["untuned"]) {
    untuned.insert(u["task"].get<std::string>().substr(0, u["task"].get<std::string>().find('(')));
    if (u["task"].get<std::string>().find("pool") != std::string::npos) {
      EXPECT_EQ(u["reason"],
                "a model build runs it as a generated kernel: a pool on "
                "channel-blocked data runs blocked")
          << u.dump();
    }
  }
  EXPECT_EQ(untuned, (std::set<std::string>{"max_pool2d", "avg_pool2d", "Flatten"}));
  // What a build runs for each task that is no alternative: the fastest of it and its
  // alternatives (the task itself on a tie).
  std::map<std::string, std::string> runs;  // task key -> key of the row that runs
  for (const auto& t : j["tasks"])
    if (!t.contains("alternative_of")) runs[t["key"]] = t["key"];
  for (const auto& t : j["tasks"]) {
    if (!t.contains("alternative_of")) continue;
    const std::string of = t["alternative_of"];
    ASSERT_TRUE(runs.count(of)) << t.dump();
    for (const auto& o : j["tasks"])
      if (o["key"] == runs[of] && t["best_s"].get<double>() < o["best_s"].get<double>())
        runs[of] = t["key"];
  }
  auto row_runs = [&](const nlohmann::json& t) {
    const std::string group = t.value("alternative_of", t["key"].get<std::string>());
    return runs[group] == t["key"].get<std::string>();
  };
  double sum = 0, fallback = 0, library = 0, tuned_where_library = 0;
  for (const auto& t : j["tasks"]) {
    EXPECT_GE(t["trials"].get<int64_t>(), 4) << t.dump();  // the warm-up gave every task a batch
    ASSERT_TRUE(t["best_s"].is_number()) << t.dump();
    EXPECT_DOUBLE_EQ(t["best_s"].get<double>(), log_best(db, t["tuned_as"])) << t.dump();
    if (row_runs(t)) sum += t["count"].get<double>() * t["best_s"].get<double>();
    if (!t.contains("alternative_of"))
      fallback += t["count"].get<double>() * t["fallback_s"].get<double>();
    // The fallback is re-timed beside the best wherever it ranks: the best is never slower.
    EXPECT_LE(t["best_s"].get<double>(), t["fallback_s"].get<double>()) << t.dump();
    // oneDNN (convs, pools) and OpenBLAS (the Gemm) on the same operators, timed by ktune itself.
    ASSERT_TRUE(t.contains("library_s")) << t.dump();
    EXPECT_GT(t["library_s"].get<double>(), 0) << t.dump();
    EXPECT_EQ(
        t["library"].get<std::string>().rfind(
            t["tuned_as"].get<std::string>().rfind("matmul", 0) == 0 ? "OpenBLAS" : "oneDNN", 0),
        0u)
        << t.dump();
    // The library's figure is its median at the race's threads or, faster, on one (2 cores here).
    const int threads = t["library_threads"].get<int>();
    EXPECT_TRUE(threads == 1 || threads == static_cast<int>(std::thread::hardware_concurrency()))
        << t.dump();
    // Each side's median of the rounds lies within its range; the spread is the half-range over
    // the median; the ratio is the medians'.
    for (const std::string side : {"library", "tuned"}) {
      const double median = t[side == "library" ? "library_s" : "tuned_median_s"].get<double>();
      const double lo = t[side + "_min_s"].get<double>(), hi = t[side + "_max_s"].get<double>();
      EXPECT_GT(lo, 0) << side << t.dump();
      EXPECT_LE(lo, median) << side << t.dump();
      EXPECT_LE(median, hi) << side << t.dump();
      EXPECT_GE(t[side + "_spread"].get<double>(), 0) << side << t.dump();
      EXPECT_NEAR(t[side + "_spread"].get<double>(), (hi - lo) / (2 * median), 1e-9)
          << side << t.dump();
    }
    // Rounds that spread past kNoisySpread (range over median) give no ratio, nor a term of the
    // sums.
    auto num = [&](const char* key) { return t[key].get<double>(); };
    const bool noisy =
        tuning_db::noisy_range(num("library_min_s"), num("library_max_s"), num("library_s")) ||
        tuning_db::noisy_range(num("tuned_min_s"), num("tuned_max_s"), num("tuned_median_s"));
    EXPECT_EQ(t.contains("noisy") && t["noisy"].get<bool>(), noisy) << t.dump();
    if (noisy) {
      EXPECT_FALSE(t.contains("ratio")) << t.dump();
      continue;
    }
    EXPECT_NEAR(t["ratio"].get<double>(),
                t["tuned_median_s"].get<double>() / t["library_s"].get<double>(), 1e-9)
        << t.dump();
    if (!row_runs(t)) continue;  // each layer once, with the algorithm that runs
    library += t["count"].get<double>() * t["library_s"].get<double>();
    tuned_where_library += t["count"].get<double>() * t["tuned_median_s"].get<double>();
  }
  EXPECT_EQ(j["library_rounds"], 3);
  EXPECT_NEAR(j["library_s"].get<double>(), library, 1e-12 + 1e-9 * library);
  EXPECT_NEAR(j["tuned_s_where_library"].get<double>(), tuned_where_library,
              1e-12 + 1e-9 * tuned_where_library);
  EXPECT_NEAR(j["tuned_s"].get<double>(), sum, 1e-12 + 1e-9 * sum);
  EXPECT_NEAR(j["fallback_s"].get<double>(), fallback, 1e-12 + 1e-9 * fallback);
  // The layers, one per occurrence, are the nodes `ktune tasks` lists for the task, '+'-joined as
  // `ktune run` names its steps: the layers of the tasks tuned as one workload are the steps of
  // that workload.
  const auto listed = ktune("tasks " + quote(model("small_cnn.onnx")) + " --json");
  ASSERT_EQ(listed.status, 0) << listed.err;
  std::map<std::string, std::vector<std::string>> nodes;
  const auto listed_json = nlohmann::json::parse(listed.out);
  for (const auto& t : listed_json["tasks"])
    nodes[t["key"].get<std::string>()] = t["layers"].get<std::vector<std::string>>();
  const auto run =
      ktune("run " + quote(model("small_cnn.onnx")) + " --runs 1 --json --db " + quote(db));
  ASSERT_EQ(run.status, 0) << run.err;
  std::map<std::string, std::multiset<std::string>> steps, layers;
  const auto run_json = nlohmann::json::parse(run.out);
  for (const auto& s : run_json["layers"])
    if (!s["workload"].get<std::string>().empty())
      steps[s["workload"].get<std::string>()].insert(s["layer"].get<std::string>());
  for (const auto& t : j["tasks"]) {
    ASSERT_EQ(t["layers"].size(), t["count"].get<size_t>()) << t.dump();
    std::vector<std::string> names;
    for (const auto& label : t["layers"]) {
      if (row_runs(t)) layers[t["tuned_as"].get<std::string>()].insert(label.get<std::string>());
      std::stringstream parts(label.get<std::string>());
      for (std::string name; std::getline(parts, name, '+');) names.push_back(name);
    }
    EXPECT_EQ(names, nodes[t["key"].get<std::string>()]) << t.dump();
  }
  // The pools run generated steps of their workload, which is not tuned.
  for (const auto& t : j["untuned"]) steps.erase(t["task"].get<std::string>());
  EXPECT_EQ(layers, steps);
  // The 20 trials and each tuned workload's fallback, logged once so that a resumed run knows it.
  std::set<std::string> workloads;
  for (const auto& t : j["tasks"]) workloads.insert(t["tuned_as"].get<std::string>());
  const int64_t fallbacks = static_cast<int64_t>(workloads.size());
  EXPECT_EQ(records_in(db), 20 + fallbacks);
  // The summary is in the log: `ktune report` shows the per-layer table with the library ratios.
  const std::string page = db + ".html";
  ASSERT_EQ(ktune("report --db " + quote(db) + " -o " + quote(page)).status, 0);
  std::stringstream html;
  html << std::ifstream(page).rdbuf();
  fs::remove(page);
  EXPECT_NE(html.str().find("model small_cnn"), std::string::npos);
  for (const auto& t : j["tasks"]) {
    // Each row by its task's workload and its ONNX nodes.
    EXPECT_NE(html.str().find(t["tuned_as"].get<std::string>()), std::string::npos) << t.dump();
    EXPECT_NE(html.str().find(">" + t["layers"][0].get<std::string>()), std::string::npos)
        << t.dump();
    char ratio[32] = ">noisy<";  // a noisy race's ratio is not quoted there either
    if (!t.contains("noisy"))
      std::snprintf(ratio, sizeof ratio, ">%.2f<", t["ratio"].get<double>());  // of the medians
    EXPECT_NE(html.str().find(ratio), std::string::npos) << ratio;
  }

  // Resume: the next run measures 8 new configs and knows the first run's bests.
  const auto second = ktune(cmd + " --trials 8 --no-libraries");
  ASSERT_EQ(second.status, 0) << second.out;
  const auto k = nlohmann::json::parse(second.out);
  EXPECT_EQ(k["trials"], 8);
  EXPECT_FALSE(k.contains("library_s"));
  for (const auto& t : k["tasks"]) {
    // The best is the log's, over both runs' records: the first run's bests were known. Not
    // necessarily below the first run's figure: the five best were re-timed again.
    EXPECT_DOUBLE_EQ(t["best_s"].get<double>(), log_best(db, t["tuned_as"])) << t.dump();
    ASSERT_TRUE(t["fallback_s"].is_number())
        << t.dump();  // measured for every task, allocated or not
    EXPECT_LE(t["best_s"].get<double>(), t["fallback_s"].get<double>()) << t.dump();
  }
  EXPECT_EQ(records_in(db), 28 + fallbacks);  // the fallbacks are not measured into the log twice

  // The table: per task its first layer ("+k more" when it occurs k+1 times), the tuned kernel's
  // and the library's medians with their spreads, and the ratio; under it one summary, led by the
  // built model's measured latency.
  const auto text = ktune("tune-model " + quote(model("small_cnn.onnx")) +
                          " --tuner random --batch-size 4 --trials 4 --model-threads 1 "
                          "--library-rounds 2 --db " +
                          quote(db));
  ASSERT_EQ(text.status, 0) << text.out << text.err;
  std::istringstream lines(text.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_NE(line.find("tuned_ms"), std::string::npos) << line;
  EXPECT_NE(line.find("library_ms"), std::string::npos) << line;
  EXPECT_NE(line.find("layer"), std::string::npos) << line;
  // A task and its alternatives: the share is shown on the one row a build runs.
  std::map<std::string, int> shares_in_group;
  std::map<std::string, size_t> row_of;
  bool starred = false;   // a row whose library figure is its one-thread median
  bool apart = false;     // a row whose tuned_ms is marked far from its best_ms
  bool tilde = false;     // a row whose best or fallback timings spread
  bool unshared = false;  // a row a build does not run (its share is "-")
  for (size_t i = 0; i < j["tasks"].size(); ++i) row_of[j["tasks"][i]["key"]] = i + 1;
  for (const auto& t : j["tasks"]) {
    ASSERT_TRUE(std::getline(lines, line));
    const std::string first = t["layers"][0].get<std::string>();
    const std::string more =
        t["layers"].size() > 1 ? " +" + std::to_string(t["layers"].size() - 1) + " more" : "";
    const std::string group = t.value("alternative_of", t["key"].get<std::string>());
    const std::string label =
        t.contains("alternative_of")
            ? first + more + " (other algorithm for #" + std::to_string(row_of[group]) + ")"
            : first + more;
    EXPECT_NE(line.find("  " + label + " "), std::string::npos) << line;
    // The share and two spreads ("noisy" instead of a spread past kNoisySpread).
    auto percents = std::count(line.begin(), line.end(), '%');
    for (size_t at = line.find(" noisy"); at != std::string::npos; at = line.find(" noisy", at + 1))
      ++percents;
    EXPECT_TRUE(percents == 3 || percents == 2) << line;
    shares_in_group[group] += percents == 3;
    unshared = unshared || percents == 2;
    EXPECT_NE(line.find(t["tuned_as"].get<std::string>()), std::string::npos) << line;
    // '*': the library's figure is its median on one thread, which beat the race's two.
    starred = starred || line.find("%* ") != std::string::npos ||
              line.find("noisy* ") != std::string::npos;
    // '!': tuned_ms more than kNoisySpread away from best_ms.
    apart = apart || line.find("%! ") != std::string::npos;
    // '~': the timings behind best_ms or fallback_ms spread.
    tilde = tilde || line.find("~ ") != std::string::npos;
  }
  for (const auto& [group, shares] : shares_in_group) EXPECT_EQ(shares, 1) << group;
  // The tuned/library line rests on the races that were not noisy; when every race was, it is
  // left out and the noisy line counts them all.
  if (text.out.find("  libraries: tuned/library ") != std::string::npos)
    EXPECT_NE(text.out.find("; medians of 2 interleaved rounds"), std::string::npos) << text.out;
  else
    EXPECT_NE(text.out.find("  noisy: " + std::to_string(j["tasks"].size()) +
                            " tasks' library "
                            "race spread more than 25%"),
              std::string::npos)
        << text.out;
  // Under the rows, what each kind of '-' means (a row without a share at least), what the
  // table's two figures of a tuned kernel are, and what '*' marks.
  ASSERT_TRUE(std::getline(lines, line));
  const bool dashes = line.rfind("  -: ", 0) == 0;
  EXPECT_TRUE(dashes || !unshared) << line;
  if (unshared) {
    EXPECT_NE(line.find("share: a row a build does not run (a layer runs the fastest of its "
                        "algorithms)"),
              std::string::npos)
        << line;
  }
  if (dashes) {
    ASSERT_TRUE(std::getline(lines, line));
  }
  EXPECT_EQ(line.rfind("  best_ms: the log's re-timed best, which the sums below use; tuned_ms and "
                       "library_ms: medians of 2 rounds in which the two took turns at ",
                       0),
            0u)
      << line;
  ASSERT_TRUE(std::getline(lines, line));
  // small_cnn's 3x3 convs race oneDNN for their direct and their Winograd form alike.
  EXPECT_EQ(line,
            "  a task's other algorithms race the same library operator again, each in rounds of "
            "its own");
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line.rfind("  *: the library ran faster on one thread", 0) == 0, starred) << line;
  if (starred) {
    ASSERT_TRUE(std::getline(lines, line));
  }
  EXPECT_EQ(line.rfind("  !: tuned_ms is more than 25% away from best_ms", 0) == 0, apart) << line;
  if (apart) {
    ASSERT_TRUE(std::getline(lines, line));
  }
  EXPECT_EQ(line.rfind("  ~: the timings behind that figure", 0) == 0, tilde) << line;
  if (tilde) {
    ASSERT_TRUE(std::getline(lines, line));
  }
  EXPECT_EQ(line, "");
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line.rfind("model small_cnn: ", 0), 0u) << line;
  EXPECT_NE(line.find(" ms end to end, measured on the model as build --model ships it (median of "
                      "30 runs at 1 thread, "),
            std::string::npos)
      << line;
  // One latency per model: the estimates are shares or ratios, not second figures.
  for (const char* gone : {"estimated", "timed alone", "estimate:"})
    EXPECT_EQ(text.out.find(gone), std::string::npos) << gone << "\n" << text.out;
  // The speed-up over the fallbacks is the ratio of the two sums it quotes; on timings that
  // spread (a loaded machine) it is not quoted, and the rows behind it are marked.
  const auto faster = text.out.find("  tuned tasks: ");
  ASSERT_NE(faster, std::string::npos) << text.out;
  if (text.out.find("  tuned tasks: no speed-up", faster) == faster) {
    EXPECT_NE(text.out.find("~: the timings behind that figure"), std::string::npos) << text.out;
  } else {
    double speedup = 0, tuned_ms = 0, fallback_ms = 0;
    ASSERT_EQ(
        std::sscanf(text.out.c_str() + faster,
                    "  tuned tasks: %lfx faster than their untuned fallbacks (%lf against %lf",
                    &speedup, &tuned_ms, &fallback_ms),
        3)
        << text.out.substr(faster);
    // Each figure printed to 0.00005 ms, the ratio to 0.005.
    EXPECT_NEAR(speedup, fallback_ms / tuned_ms, 0.006 + 1e-4 * speedup / tuned_ms);
  }
  EXPECT_NE(text.out.find("  trials: 4 of 4\n"), std::string::npos) << text.out;
  fs::remove(db);
}

TEST(TuneModelCli, TheTimeBudgetEndsTheSearchAndSaysSo) {
  const std::string db =
      (fs::temp_directory_path() / ("ktune_tune_model_time_" + std::to_string(::getpid()) + ".db"))
          .string();
  fs::remove(db);
  // 6 ms of search: spent by the fallbacks' measurement before the first batch.
  const std::string cmd = "tune-model " + quote(model("small_cnn.onnx")) +
                          " --tuner random --batch-size 4 --trials 100000 --time-budget 0.0001 "
                          "--no-libraries --no-model-run --db " +
                          quote(db);
  const auto j_run = ktune(cmd + " --json");
  ASSERT_EQ(j_run.status, 0) << j_run.err;
  const auto j = nlohmann::json::parse(j_run.out);
  EXPECT_TRUE(j["out_of_time"].get<bool>());
  EXPECT_EQ(j["libraries_note"], "not timed (--no-libraries)");  // the report says why, too
  EXPECT_EQ(j["trials"], 0);
  EXPECT_FALSE(j["cancelled"].get<bool>());
  // Where the wall time went: the search past its budget only by the fallbacks' measurement, then
  // the re-timing; no library race nor model run was asked for.
  const nlohmann::json wall = j.at("wall");
  EXPECT_GT(wall.at("search_s").get<double>(), 0.0);
  EXPECT_LT(wall.at("search_s").get<double>(), 60.0);
  EXPECT_GE(wall.at("retime_s").get<double>(), 0.0);
  EXPECT_LT(wall.at("libraries_s").get<double>(), 0.5);
  EXPECT_LT(wall.at("model_run_s").get<double>(), 0.5);
  const auto text = ktune(cmd);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("time budget: the search stopped at it after 0 of 100000 trials\n  wall "
                          "time "),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(", re-timing the best configs "), std::string::npos) << text.out;
  fs::remove(db);
}

// --trials auto (the default): 4 batches per tuned workload, said before the run; a budget below
// the warm-up is warned about with what auto would give.
TEST(TuneModelCli, AutoTrialsAreFourBatchesPerWorkloadAndASmallBudgetIsWarned) {
  const std::string db =
      (fs::temp_directory_path() / ("ktune_tune_model_auto_" + std::to_string(::getpid()) + ".db"))
          .string();
  fs::remove(db);
  const std::string cmd = "tune-model " + quote(model("small_cnn.onnx")) +
                          " --tuner random --batch-size 2 --no-libraries --no-model-run --db " +
                          quote(db);
  const auto small = ktune(cmd + " --trials 6 --json", true);
  ASSERT_EQ(small.status, 0) << small.err;
  EXPECT_NE(small.err.find("--trials 6 cannot warm up every tuned workload: 5 x --batch-size 2 = "
                           "10 trials; 2 get no trial in this run and keep what the log holds, "
                           "else their fallback config (--trials auto gives 40)"),
            std::string::npos)
      << small.err;
  // As many got no trial as the start said.
  const auto small_j = nlohmann::json::parse(small.out);
  EXPECT_EQ(std::count_if(small_j["tasks"].begin(), small_j["tasks"].end(),
                          [](const auto& t) { return t["trials"] == 0; }),
            2)
      << small.out;

  const auto text = ktune(cmd);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(text.out.rfind("trials: auto, 40 (4 allocations of 2 per tuned workload, 5 "
                           "workloads)\n",
                           0),
            0u)
      << text.out;
  EXPECT_NE(text.out.find("  trials: 40 of 40\n"), std::string::npos) << text.out;
  fs::remove(db);
}

TEST(TuneModelCli, BadInputIsOneLineAndNoLog) {
  const std::string db =
      (fs::temp_directory_path() / ("ktune_tune_model_bad_" + std::to_string(::getpid()) + ".db"))
          .string();
  fs::remove(db);
  for (const std::string& args :
       {quote(model("not_onnx.onnx")), quote(model("resnet18_dynamic.onnx")),
        quote(model("small_cnn.onnx")) + " --strategy fastest",
        quote(model("small_cnn.onnx")) + " --trials 0",
        quote(model("small_cnn.onnx")) + " --trials lots",
        quote(model("small_cnn.onnx")) + " --trials 1e3",
        quote(model("small_cnn.onnx")) + " --library-rounds 0",
        quote(model("small_cnn.onnx")) + " --time-budget -1"}) {
    const auto r = ktune("tune-model " + args + " --db " + quote(db), true);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_FALSE(fs::exists(db)) << args;
  }
}

// A model that cannot be built is refused before anything is measured, naming every node a build
// refuses (blocked_ops: Hardmax, Det), not after the budget is spent.
TEST(TuneModelCli, AModelThatCannotBeBuiltIsRefusedBeforeTuning) {
  const std::string db = (fs::temp_directory_path() /
                          ("ktune_tune_model_blocked_" + std::to_string(::getpid()) + ".db"))
                             .string();
  fs::remove(db);
  const auto r = ktune(
      "tune-model " + quote(model("blocked_ops.onnx")) + " --trials 8 --db " + quote(db), true);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("cannot be tuned as a model: 2 nodes cannot be built: node 'hardmax_6' "
                       "(Hardmax)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("node 'det_7' (Det)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
}

}  // namespace
}  // namespace ktune
