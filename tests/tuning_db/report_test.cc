// Tests build_report: curves, errors, top configs, plan correlations and model runs against the
// records written.
#include "tuning_db/report.h"
#include "tuning_db/run_store.h"

#include <gtest/gtest.h>

#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"

namespace ktune::tuning_db {
namespace {

using testing::make_failure;
using testing::make_record;
using testing::TempDir;

// The report's queries run on both backends.
class ReportOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, ReportOn, testing::kBothBackends, testing::backend_test_name);

Record tuned(Record r, const std::string& tuner) {
  r.tuner = tuner;
  return r;
}

// Workload A (matmul 100: 2e6 FLOP): random finds 10, fails, 20, 5 GFLOP/s; xgb 40, times out, 25.
void write_log(Database& db) {
  db.add({tuned(make_record(100, 1, {2e-4}), "random"),
          tuned(make_failure(100, 2, ErrorKind::kBuild), "random"),
          tuned(make_record(100, 3, {1e-4}), "random"),
          tuned(make_record(100, 4, {4e-4, 4e-4}), "random")});
  db.add({tuned(make_record(100, 5, {5e-5}), "xgb"),
          tuned(make_failure(100, 6, ErrorKind::kRunTimeout), "xgb"),
          tuned(make_record(100, 7, {8e-5}), "xgb")});
  // Workload B (matmul 200: 1.6e7 FLOP): 10 GFLOP/s real, 20 emulated.
  Record emulated = make_record(200, 2, {8e-4});
  emulated.emulated = true;
  db.add({make_record(200, 1, {1.6e-3}), emulated});
}

TEST_P(ReportOn, CurvesErrorsAndTopConfigsMatchTheRecords) {
  auto db = Database::open(fresh("log.db"));
  write_log(db);
  const Report r = build_report(db, {.top_k = 2});
  EXPECT_EQ(r.stats.records, 9);
  ASSERT_EQ(r.workloads.size(), 3u);

  const WorkloadReport& a = r.workloads[0];
  EXPECT_EQ(a.workload_key, testing::matmul_key(100));
  EXPECT_FALSE(a.emulated);
  EXPECT_EQ(a.records, 7);
  EXPECT_EQ(a.ok_records, 5);
  EXPECT_NEAR(a.best_gflops, 40, 1e-9);
  EXPECT_NEAR(a.best_cost, 5e-5, 1e-15);
  EXPECT_EQ(a.errors_by_kind.at(std::string(to_string(ErrorKind::kBuild))), 1);
  EXPECT_EQ(a.errors_by_kind.at(std::string(to_string(ErrorKind::kRunTimeout))), 1);
  EXPECT_EQ(a.errors_by_kind.size(), 2u);

  ASSERT_EQ(a.curves.size(), 2u);
  const TunerCurve& random = a.curves[0];
  EXPECT_EQ(random.tuner, "random");
  EXPECT_EQ(random.trials, 4);
  EXPECT_NEAR(random.best_gflops, 20, 1e-9);
  ASSERT_EQ(random.points.size(), 3u);  // rose at trials 1 and 3, then the last trial
  EXPECT_EQ(random.points[0].trial, 1);
  EXPECT_NEAR(random.points[0].best_gflops, 10, 1e-9);
  EXPECT_EQ(random.points[1].trial, 3);
  EXPECT_NEAR(random.points[1].best_gflops, 20, 1e-9);
  EXPECT_EQ(random.points[2].trial, 4);
  EXPECT_NEAR(random.points[2].best_gflops, 20, 1e-9);
  const TunerCurve& xgb = a.curves[1];
  EXPECT_EQ(xgb.tuner, "xgb");
  EXPECT_EQ(xgb.trials, 3);
  ASSERT_EQ(xgb.points.size(), 2u);
  EXPECT_EQ(xgb.points[0].trial, 1);
  EXPECT_NEAR(xgb.points[0].best_gflops, 40, 1e-9);
  EXPECT_EQ(xgb.points[1].trial, 3);

  ASSERT_EQ(a.top.size(), 2u);
  EXPECT_EQ(a.top[0].config_index, 5);
  EXPECT_NEAR(a.top[0].gflops, 40, 1e-9);
  EXPECT_EQ(a.top[0].tuner, "xgb");
  EXPECT_EQ(a.top[1].config_index, 7);
  EXPECT_NEAR(a.top[1].mean_cost, 8e-5, 1e-15);
  EXPECT_NE(a.top[0].config.find("\"index\":5"), std::string::npos) << a.top[0].config;

  // Real and emulated records of one workload are apart.
  EXPECT_EQ(r.workloads[1].workload_key, testing::matmul_key(200));
  EXPECT_FALSE(r.workloads[1].emulated);
  EXPECT_EQ(r.workloads[1].records, 1);
  EXPECT_NEAR(r.workloads[1].best_gflops, 10, 1e-9);
  EXPECT_TRUE(r.workloads[2].emulated);
  EXPECT_EQ(r.workloads[2].records, 1);
  EXPECT_NEAR(r.workloads[2].best_gflops, 20, 1e-9);
}

TEST_P(ReportOn, PlanCorrelationsAndModelRuns) {
  auto db = Database::open(fresh("log.db"));
  RunStore runs(db);
  const int64_t run = runs.begin({"xgb", testing::matmul_key(100), testing::kHost.target, {}});
  runs.add_batch_quality(run, {0, 0, std::nullopt});
  runs.add_batch_quality(run, {1, 8, 0.5});
  runs.add_batch_quality(run, {2, 16, 0.75});
  runs.finish(run);
  runs.begin(
      {"random", testing::matmul_key(100), testing::kHost.target, {}});  // no quality: not reported
  const nlohmann::json summary = {
      {"trials", 64},
      {"tuned_s", 0.003},
      {"fallback_s", 0.012},
      {"library_s", 0.002},
      {"tuned_s_where_library", 0.003},
      {"estimated_s", 0.0032},
      {"built_model", {{"measured_s", 0.0033}}},
      {"tasks",
       {{{"key", "conv2d(a)"},
         {"tuned_as", "conv2d(a)"},
         {"count", 2},
         {"trials", 40},
         {"best_s", 0.001},
         {"fallback_s", 0.004},
         {"share", 0.667},
         {"library", "onednn"},
         {"library_s", 0.0008},
         {"library_spread", 0.04},
         {"ratio", 1.3}},
        {{"key", "dense(b)"},
         {"tuned_as", "dense(b)"},
         {"count", 1},
         {"trials", 24},
         {"best_s", nullptr},
         {"fallback_s", nullptr},
         {"share", nullptr}}}},
      {"untuned", {{{"task", "Softmax"}, {"count", 1}, {"reason", "no template"}}}}};
  const int64_t model_run = record_model_run(db, "resnet.onnx", testing::kHost.target, summary);
  // A ktune built without oneDNN and OpenBLAS says why its library columns are empty.
  record_model_run(db, "small.onnx", testing::kHost.target,
                   {{"trials", 8}, {"tasks", nlohmann::json::array()}, {"libraries_note", "why"}});
  // Rounds that spread past kNoisySpread: flagged (or, in a summary without the flag, found from
  // the library's spread), and no ratio is quoted.
  record_model_run(
      db, "noisy.onnx", testing::kHost.target,
      {{"trials", 8},
       {"tasks",
        {{{"key", "a"}, {"noisy", true}, {"library_s", 0.001}, {"library_spread", 0.05}},
         {{"key", "b"}, {"library_s", 0.001}, {"library_spread", 0.2}, {"ratio", 0.9}},
         {{"key", "c"}, {"library_s", 0.001}, {"library_spread", 0.1}, {"ratio", 0.9}}}}});

  // A summary without runs_in_model: the fastest of a task and its alternative runs (and alone
  // has a share).
  record_model_run(
      db, "older.onnx", testing::kHost.target,
      {{"trials", 8},
       {"tasks",
        {{{"key", "x"}, {"best_s", 0.002}, {"share", 0.9}},
         {{"key", "y"}, {"alternative_of", "x"}, {"best_s", 0.001}, {"share", 0.5}}}}});

  const Report r = build_report(db);
  ASSERT_EQ(r.runs.size(), 1u);
  EXPECT_EQ(r.runs[0].id, run);
  EXPECT_TRUE(r.runs[0].finished);
  ASSERT_EQ(r.runs[0].plans.size(), 3u);
  EXPECT_FALSE(r.runs[0].plans[0].rank_correlation);
  EXPECT_EQ(r.runs[0].plans[1].records, 8);
  EXPECT_DOUBLE_EQ(*r.runs[0].plans[1].rank_correlation, 0.5);
  EXPECT_DOUBLE_EQ(*r.runs[0].plans[2].rank_correlation, 0.75);

  ASSERT_EQ(r.model_runs.size(), 4u);
  const auto& older = r.model_runs[3].layers;
  ASSERT_EQ(older.size(), 2u);
  EXPECT_FALSE(older[0].runs_in_model);
  EXPECT_FALSE(older[0].share);
  EXPECT_TRUE(older[1].runs_in_model);
  EXPECT_DOUBLE_EQ(*older[1].share, 0.5);
  EXPECT_EQ(r.model_runs[1].model, "small.onnx");
  EXPECT_EQ(r.model_runs[1].libraries_note, "why");
  const auto& noisy = r.model_runs[2].layers;
  ASSERT_EQ(noisy.size(), 3u);
  EXPECT_TRUE(noisy[0].noisy);
  EXPECT_TRUE(noisy[1].noisy);  // half its range is 20% of the median: the range is 40%
  EXPECT_FALSE(noisy[1].ratio);
  EXPECT_FALSE(noisy[2].noisy);
  EXPECT_DOUBLE_EQ(*noisy[2].ratio, 0.9);
  const ModelRunReport& m = r.model_runs[0];
  EXPECT_EQ(m.libraries_note, "");
  EXPECT_EQ(m.run_id, model_run);
  EXPECT_EQ(m.model, "resnet.onnx");
  EXPECT_EQ(m.trials, 64);
  EXPECT_DOUBLE_EQ(*m.fallback_s, 0.012);
  EXPECT_DOUBLE_EQ(*m.library_s, 0.002);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].count, 2);
  EXPECT_EQ(m.layers[0].library, "onednn");
  EXPECT_DOUBLE_EQ(*m.layers[0].best_s, 0.001);
  EXPECT_DOUBLE_EQ(*m.layers[0].library_s, 0.0008);
  EXPECT_DOUBLE_EQ(*m.layers[0].library_spread, 0.04);
  EXPECT_DOUBLE_EQ(*m.layers[0].ratio, 1.3);
  EXPECT_DOUBLE_EQ(*m.estimated_s, 0.0032);
  EXPECT_DOUBLE_EQ(*m.measured_s, 0.0033);
  EXPECT_FALSE(m.layers[1].ratio);
  EXPECT_FALSE(m.layers[1].best_s);
  EXPECT_FALSE(m.layers[1].library_s);
  ASSERT_EQ(m.untuned.size(), 1u);
  EXPECT_EQ(m.untuned[0], "Softmax x1 (no template)");
}

}  // namespace
}  // namespace ktune::tuning_db
