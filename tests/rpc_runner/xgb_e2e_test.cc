// End to end: `ktune tune --tuner xgb` through the library on this machine: history of matmul
// 128^3 and 192^3 in the log seeds matmul 256^3's first plan; run row, records, batch quality
// and the saved model land in the log.
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>
#include <unistd.h>

#include "codegen/target.h"
#include "cost_model/xgboost_model.h"
#include "rpc_runner/runner/local_runner.h"
#include "schedule_space/task.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/model_based_tuner.h"
#include "tuner/model_log.h"
#include "tuner/transfer.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"
#include "tuning_db/model_store.h"
#include "tuning_db/run_store.h"

namespace ktune::rpc_runner {
namespace {

schedule_space::Task matmul(int n, const codegen::Target& target) {
  std::string s = std::to_string(n);
  return schedule_space::Task::create(
      "matmul", {{"M", s}, {"N", s}, {"K", s}},
      schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(), target.cores()));
}

TEST(XgbE2E, Matmul256SeededFromHistoryLogsRunQualityAndModel) {
  codegen::Target target = codegen::Target::host();
  auto dir = std::filesystem::temp_directory_path() / ("ktune_xgb_e2e_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tune.db").string();
  std::filesystem::remove(path);
  auto db = tuning_db::Database::open(path);

  LocalRunnerOptions runner_options;
  runner_options.runner_path = KTUNE_RUNNER_PATH;
  LocalRunner runner(runner_options);
  tuner::RecordContext context;
  context.target = {target.str(), codegen::llvm_version()};
  context.tuner = "random";
  for (int n : {128, 192}) {
    schedule_space::Task task = matmul(n, target);
    tuner::RandomTuner random(task.space(), 7);
    tuner::TuneOptions options;
    options.n_trial = 48;
    options.log = tuner::database_callback(db, task, context);
    tuner::tune(task, random, runner, options);
  }

  schedule_space::Task task = matmul(256, target);
  tuner::XGBTunerParams params;
  params.search.seed = 1;
  params.search.plan_size = 32;
  tuner::XGBTuner xgb(task, params);
  auto transfer = tuner::TransferModel::train(task, db.history("matmul", context.target));
  ASSERT_NE(transfer, nullptr);
  EXPECT_EQ(transfer->workloads(), 2u);
  xgb.search().seed_plan(transfer->plan(task, params.search.plan_size));

  tuner::ModelRunLog log(db, task, context.target, xgb);
  context.tuner = xgb.name();
  context.run_id = log.run_id();
  tuner::TuneOptions options;
  options.n_trial = 96;
  options.log = tuner::database_callback(db, task, context);
  options.callbacks.push_back(log.callback());
  tuner::TuneResult result = tuner::tune(task, xgb, runner, options);
  ASSERT_TRUE(log.finish());
  EXPECT_EQ(result.n_measured, 96u);
  ASSERT_TRUE(result.best_config.has_value());

  int64_t in_run = 0;
  for (const auto& r : db.history("matmul", context.target))
    if (r.workload_key == task.workload_key() && r.run_id == log.run_id()) ++in_run;
  EXPECT_EQ(in_run, 96);

  auto saved = tuning_db::ModelStore(db).load(tuner::kXgbModelName, "matmul", context.target);
  ASSERT_TRUE(saved.has_value());
  EXPECT_EQ(saved->info.metadata["trials"], 96);
  cost_model::XGBoostModel loaded;
  loaded.load(saved->blob);
  EXPECT_TRUE(loaded.fitted());

  // Plans: the transfer plan (0), then refits after 32, 64 and 96 results; 0-2 were measured.
  auto quality = tuning_db::RunStore(db).batch_quality(log.run_id());
  ASSERT_EQ(quality.size(), 3u);
  ASSERT_TRUE(xgb.search().refits().front().transferred);
  for (const auto& q : quality) {
    ASSERT_TRUE(q.rank_correlation.has_value());
    EXPECT_GE(*q.rank_correlation, -1.0);
    EXPECT_LE(*q.rank_correlation, 1.0);
    std::printf("plan %lld: %lld measured, rank correlation %.2f\n", static_cast<long long>(q.batch),
                static_cast<long long>(q.records), *q.rank_correlation);
  }
  std::printf("best %.1f GFLOP/s\n", result.best_gflops);
}

}  // namespace
}  // namespace ktune::rpc_runner
