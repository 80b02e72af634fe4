// Tests of the xgb tuner's log side (run row, batch quality, saved model) and of transfer
// learning, on matmul with a measurer that replays a fixed landscape over loop features.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>

#include "cost_model/loop_features.h"
#include "cost_model/xgboost_model.h"
#include "schedule_space/task.h"
#include "schedule_space/workload.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/model_based_tuner.h"
#include "tuner/model_log.h"
#include "tuner/transfer.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"
#include "tuning_db/model_store.h"
#include "tuning_db/run_store.h"

namespace ktune::tuner {
namespace {

schedule_space::TargetTraits traits() {
  return schedule_space::make_target_traits("llvm -mtriple=x86_64-linux-gnu -mcpu=xgbtest",
                                            "x86_64-linux-gnu", 256, 2);
}

schedule_space::Task matmul(int n) {
  std::string s = std::to_string(n);
  return schedule_space::Task::create("matmul", {{"M", s}, {"N", s}, {"K", s}}, traits());
}

// A landscape that depends on the lowered loop nest only (so it carries over across shapes):
// cost = exp(-w . features) with fixed random weights; configs that do not lower fail.
double landscape_cost(const schedule_space::Task& task, const schedule_space::Config& config) {
  static const std::vector<double> w = [] {
    std::mt19937_64 rng(7);
    std::normal_distribution<double> d(0, 1);
    std::vector<double> v(cost_model::kLoopContextLength);
    for (double& x : v) x = d(rng);
    return v;
  }();
  std::vector<float> f = cost_model::config_loop_features(task, config);
  if (f[0] != 0) return -1;
  double dot = 0;
  for (size_t i = 0; i < f.size(); ++i) dot += w[i] * f[i];
  return 1e-3 * std::exp(-0.05 * dot);
}

class LandscapeMeasurer final : public Measurer {
 public:
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) override {
    std::vector<MeasureResult> out;
    for (const auto& in : inputs) {
      double c = landscape_cost(*in.task, in.config);
      out.push_back(c > 0 ? make_ok_result({c, c})
                          : make_error_result(ErrorKind::kBuild, "no lower"));
    }
    return out;
  }
};

double mean_throughput(const schedule_space::Task& task, const std::vector<uint64_t>& indices) {
  double sum = 0;
  for (uint64_t i : indices) {
    double c = landscape_cost(task, task.space().get(i));
    sum += c > 0 ? 1e-3 / c : 0;
  }
  return sum / static_cast<double>(indices.size());
}

std::string temp_db(const std::string& name) {
  auto dir =
      std::filesystem::temp_directory_path() / ("ktune_xgb_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / name);
  return (dir / name).string();
}

const tuning_db::TargetKey kTarget{"llvm -mtriple=x86_64-linux-gnu -mcpu=xgbtest", "19.1.7"};

TEST(XgbTune, LogsRunRecordsBatchQualityAndALoadableModel) {
  schedule_space::Task task = matmul(128);
  auto db = tuning_db::Database::open(temp_db("log.db"));
  XGBTunerParams params;
  params.search.seed = 3;
  params.search.plan_size = 32;
  XGBTuner tuner(task, params);
  ModelRunLog log(db, task, kTarget, tuner, {{"test", true}});
  RecordContext context{kTarget, "", tuner.name(), "test", log.run_id()};
  TuneOptions options;
  options.n_trial = 160;
  options.batch_size = 16;
  options.log = database_callback(db, task, context);
  options.callbacks = {log.callback()};
  LandscapeMeasurer measurer;
  TuneResult result = tune(task, tuner, measurer, options);
  ASSERT_EQ(result.n_measured, 160u);
  ASSERT_TRUE(log.finish());

  std::vector<tuning_db::Record> records = db.history("matmul", kTarget);
  ASSERT_EQ(records.size(), 160u);
  for (const auto& r : records) {
    EXPECT_EQ(r.run_id, log.run_id());
    EXPECT_EQ(r.tuner, "xgb");
  }

  std::optional<tuning_db::SavedModel> saved =
      tuning_db::ModelStore(db).load(kXgbModelName, "matmul", kTarget);
  ASSERT_TRUE(saved.has_value());
  EXPECT_EQ(saved->info.metadata["trials"], 160);
  EXPECT_EQ(saved->info.metadata["features"], "knob");
  EXPECT_EQ(saved->info.metadata["feature_length"], tuner.feature_length());
  EXPECT_EQ(saved->info.metadata["workload_key"], task.workload_key());
  cost_model::XGBoostModel loaded;
  loaded.load(saved->blob);
  cost_model::KnobFeatureExtractor features(task.space());
  std::vector<uint64_t> probe = {0, 1, 17, task.space().size() / 2, task.space().size() - 1};
  EXPECT_EQ(loaded.predict(features.extract(probe)),
            tuner.model().predict(features.extract(probe)));

  // 160 results with plans of 32: refits after 32, 64, 96, 128 and 160 results; the first four
  // plans were measured (the last one was not).
  std::vector<tuning_db::BatchQuality> quality =
      tuning_db::RunStore(db).batch_quality(log.run_id());
  ASSERT_EQ(quality.size(), 4u);
  ASSERT_EQ(tuner.search().refits().size(), 5u);
  for (size_t i = 0; i < quality.size(); ++i) {
    EXPECT_EQ(quality[i].batch, static_cast<int64_t>(i));
    EXPECT_EQ(quality[i].records, static_cast<int64_t>(tuner.search().refits()[i].plan_measured));
    EXPECT_GE(quality[i].records, 3);
    ASSERT_TRUE(quality[i].rank_correlation.has_value());
    std::printf("plan %zu: %lld measured, rank correlation %.3f\n", i,
                static_cast<long long>(quality[i].records), *quality[i].rank_correlation);
    EXPECT_DOUBLE_EQ(*quality[i].rank_correlation, *tuner.search().refits()[i].rank_correlation);
  }
  // What the correlation is for: once the model has seen 96 results its plans rank their configs
  // well (this seed: 0.08, 0.26, 0.63, 0.53 for plans 0-3). A correlation computed over mismatched
  // pairs, or one that is always 0, stays near 0 and fails here.
  EXPECT_GT(*quality[2].rank_correlation, 0.4);
  EXPECT_GT(*quality[3].rank_correlation, 0.4);
  EXPECT_GT(*quality[3].rank_correlation, *quality[0].rank_correlation + 0.2);
  // What progress shows and the model's metadata keep: the newest measured plan's correlation.
  ASSERT_TRUE(tuner.search().latest_rank_correlation().has_value());
  EXPECT_DOUBLE_EQ(*tuner.search().latest_rank_correlation(), *quality.back().rank_correlation);
  EXPECT_DOUBLE_EQ(saved->info.metadata["rank_correlation"].get<double>(),
                   *quality.back().rank_correlation);
}

TEST(XgbTune, SameSpaceBestOffersTheSiblingWorkloadsBestConfigsFirst) {
  // The same matmul with another epilogue has the task's very space; another shape does not.
  auto with = [](const std::string& epilogue, int n) {
    const std::string s = std::to_string(n);
    return schedule_space::Task::create(
        "matmul", {{"M", s}, {"N", s}, {"K", s}, {"epilogue", epilogue}}, traits());
  };
  schedule_space::Task task = with("bias_relu", 64), sibling = with("bias", 64),
                       other = with("bias", 96);
  ASSERT_EQ(task.space().describe(), sibling.space().describe());
  ASSERT_NE(task.space().describe(), other.space().describe());
  auto db = tuning_db::Database::open(temp_db("same_space.db"));
  LandscapeMeasurer measurer;
  for (const schedule_space::Task* t : {&sibling, &other}) {
    RandomTuner random(t->space(), 3);
    TuneOptions options;
    options.n_trial = 40;
    options.batch_size = 20;
    options.log = database_callback(db, *t, {kTarget, "", "random", "test"});
    tune(*t, random, measurer, options);
  }
  // The sibling's successful records, best first: what same_space_best must return.
  std::vector<std::pair<double, uint64_t>> ranked;
  for (const tuning_db::Record& r : db.history("matmul", kTarget)) {
    if (r.workload_key == sibling.workload_key() && !r.error)
      ranked.emplace_back(r.costs[0], static_cast<uint64_t>(r.config_index));
  }
  std::sort(ranked.begin(), ranked.end());
  ASSERT_GE(ranked.size(), 6u);
  std::map<uint64_t, double> cost;
  for (const auto& [c, index] : ranked) cost[index] = c;
  // Compared by cost: configs of equal cost may come in either order.
  const std::vector<uint64_t> best = same_space_best(task, db.history("matmul", kTarget), 4);
  ASSERT_EQ(best.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(cost.count(best[i]), 1u) << "rank " << i << " is not a config of the sibling";
    EXPECT_EQ(cost[best[i]], ranked[i].first) << "rank " << i;
  }
  // An excluded config (one the task already measured) is passed over.
  const std::vector<uint64_t> rest =
      same_space_best(task, db.history("matmul", kTarget), 4, {best[0]});
  ASSERT_EQ(rest.size(), 4u);
  EXPECT_EQ(std::count(rest.begin(), rest.end(), best[0]), 0);
  EXPECT_EQ(cost[rest[0]], cost[best[1]]);
  // The other shape's records offer nothing to a task of its own space that has no sibling.
  EXPECT_TRUE(same_space_best(with("bias_relu", 80), db.history("matmul", kTarget), 4).empty());
}

TEST(XgbTune, TransferModelFromOtherShapesProposesABetterFirstBatch) {
  schedule_space::Task target = matmul(256);
  auto db = tuning_db::Database::open(temp_db("transfer.db"));
  LandscapeMeasurer measurer;
  for (int n : {128, 192}) {
    schedule_space::Task task = matmul(n);
    RandomTuner random(task.space(), 100 + n);
    TuneOptions options;
    options.n_trial = 96;
    options.batch_size = 32;
    options.log = database_callback(db, task, {kTarget, "", "random", "test"});
    tune(task, random, measurer, options);
  }

  TransferParams params;
  params.seed = 5;
  std::unique_ptr<TransferModel> model =
      TransferModel::train(target, db.history("matmul", kTarget), params);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->workloads(), 2u);
  EXPECT_EQ(model->rows(), 192u);

  XGBTunerParams tp;
  tp.search.seed = 5;
  XGBTuner tuner(target, tp);
  tuner.search().seed_plan(model->plan(target, tp.search.plan_size));
  std::vector<uint64_t> first;
  for (const auto& c : tuner.next_batch(tp.search.plan_size)) first.push_back(c.index());
  ASSERT_EQ(first.size(), tp.search.plan_size);
  ASSERT_TRUE(tuner.search().refits().back().transferred);

  // What the first batch of a run without history would be: random configs.
  std::mt19937_64 rng(99);
  std::vector<uint64_t> random = target.space().sample(256, rng);
  double transferred = mean_throughput(target, first);
  double baseline = mean_throughput(target, random);
  std::printf("first batch mean relative throughput: transfer %.4f, random %.4f\n", transferred,
              baseline);
  EXPECT_GT(transferred, 1.2 * baseline);

  // The tuner tracks the transfer plan's rank correlation like a refit's (these results also
  // trigger the first own refit, which comes after it).
  std::vector<MeasureInput> inputs;
  for (uint64_t i : first) inputs.push_back({&target, target.space().get(i)});
  tuner.update(inputs, measurer.measure(inputs));
  ASSERT_EQ(tuner.search().refits().size(), 2u);
  const RefitStats& seeded = tuner.search().refits().front();
  EXPECT_TRUE(seeded.transferred);
  // The epsilon share (1 of 16) was random, unscored: no model had been fitted on this task.
  EXPECT_EQ(seeded.plan_measured, first.size() - 1);
  ASSERT_TRUE(seeded.rank_correlation.has_value());
  std::printf("transfer plan rank correlation %.3f\n", *seeded.rank_correlation);
  EXPECT_GT(*seeded.rank_correlation, 0.0);
}

}  // namespace
}  // namespace ktune::tuner
