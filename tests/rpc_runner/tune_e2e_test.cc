// End to end: matmul 256^3 tuned with 64 random trials on this machine through the local runner
// into a SQLite log; the best beats the fallback; resuming measures only new configs.
#include <filesystem>
#include <set>

#include <gtest/gtest.h>
#include <unistd.h>

#include "codegen/target.h"
#include "rpc_runner/local_runner.h"
#include "schedule_space/task.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"

namespace ktune::rpc_runner {
namespace {

TEST(TuneE2E, Matmul256RandomRecordsEveryTrialBeatsTheFallbackAndResumes) {
  codegen::Target target = codegen::Target::host();
  auto task = schedule_space::Task::create(
      "matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}},
      schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(), target.cores()));
  auto dir = std::filesystem::temp_directory_path() / ("ktune_e2e_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tune.db").string();

  LocalRunnerOptions runner_options;
  runner_options.runner_path = KTUNE_RUNNER_PATH;
  LocalRunner runner(runner_options);
  tuner::RecordContext context;
  context.target = {target.str(), codegen::llvm_version()};
  context.tuner = "random";

  tuner::MeasureResult fallback = runner.measure({{&task, task.fallback_config()}}).front();
  std::set<int64_t> first_indices;
  {
    auto db = tuning_db::Database::open(path);
    tuner::RandomTuner random(task.space(), 42);
    tuner::TuneOptions options;
    options.n_trial = 64;
    options.callbacks.push_back(tuner::database_callback(db, task, context));
    tuner::TuneResult result = tuner::tune(task, random, runner, options);
    EXPECT_EQ(result.n_measured, 64u);
    EXPECT_EQ(db.stats().records, 64);
    auto indices = db.measured_indices(task.workload_key(), context.target);
    first_indices.insert(indices.begin(), indices.end());
    EXPECT_EQ(first_indices.size(), 64u);
    EXPECT_EQ(db.stats().failures_by_kind.count("wrong_answer"), 0u);

    ASSERT_TRUE(result.best_config) << "no config succeeded";
    auto best = db.best(task.workload_key(), context.target);
    ASSERT_TRUE(best);
    EXPECT_EQ(static_cast<uint64_t>(best->config_index), result.best_config->index());
    ASSERT_TRUE(fallback.ok()) << "the fallback config failed: " << fallback.error_message;
    EXPECT_LT(result.best_result.mean_cost(), fallback.mean_cost())
        << "best " << result.best_gflops << " GFLOP/s vs fallback "
        << task.flop() / fallback.mean_cost() / 1e9;
  }
  {
    auto db = tuning_db::Database::open(path);
    tuner::RandomTuner random(task.space(), 42);  // same seed: would repeat the first run
    tuner::TuneOptions options;
    options.n_trial = 64;
    options.resume = tuner::load_past_measurements(db, task, context.target);
    EXPECT_EQ(options.resume.size(), 64u);
    std::set<uint64_t> measured_now;
    options.callbacks.push_back(tuner::database_callback(db, task, context));
    options.callbacks.push_back([&](const std::vector<tuner::MeasureInput>& in,
                                    const std::vector<tuner::MeasureResult>&) {
      for (const auto& i : in) measured_now.insert(i.config.index());
    });
    tuner::TuneResult result = tuner::tune(task, random, runner, options);
    EXPECT_EQ(result.n_measured, 64u);
    EXPECT_EQ(measured_now.size(), 64u);
    for (uint64_t i : measured_now) EXPECT_EQ(first_indices.count(static_cast<int64_t>(i)), 0u) << i;
    EXPECT_EQ(db.stats().records, 128);
    EXPECT_EQ(db.measured_indices(task.workload_key(), context.target).size(), 128u);
  }
  EXPECT_EQ(runner.runners_started(), 1u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ktune::rpc_runner
