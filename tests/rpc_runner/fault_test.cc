// Fault tests: kernels that segfault, hang or are wrong end their candidate only; tuning runs
// to its budget, every error is recorded with its kind, and a valid config wins.
#include <filesystem>
#include <map>

#include <gtest/gtest.h>
#include <unistd.h>

#include "codegen/target.h"
#include "rpc_runner/local_runner.h"
#include "schedule_space/task.h"
#include "tests/rpc_runner/fault_template.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"

namespace ktune::rpc_runner {
namespace {

schedule_space::Task fault_task() {
  testing::register_fault_template();
  codegen::Target t = codegen::Target::host();
  return schedule_space::Task::create(
      "runner_fault_test", {{"N", "4096"}},
      schedule_space::make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores()));
}

LocalRunnerOptions fault_options() {
  LocalRunnerOptions o;
  o.runner_path = KTUNE_RUNNER_PATH;
  o.build_threads = 2;
  o.measure.run_timeout_s = 1.5;
  return o;
}

TEST(Fault, SegfaultEndsTheCandidateAndAFreshRunnerTakesOver) {
  auto task = fault_task();
  LocalRunner runner(fault_options());
  const auto& space = task.space();
  auto results = runner.measure({{&task, space.get(space.index_of({1, 0}))},   // crash
                                 {&task, space.get(space.index_of({0, 2}))}}); // ok
  EXPECT_EQ(results[0].error, ErrorKind::kRun);
  EXPECT_NE(results[0].error_message.find("signal 11"), std::string::npos) << results[0].error_message;
  EXPECT_TRUE(results[1].ok()) << results[1].error_message;
  EXPECT_EQ(runner.runners_started(), 2u);
}

TEST(Fault, EndlessLoopIsKilledAfterTheRunTimeout) {
  auto task = fault_task();
  LocalRunner runner(fault_options());
  const auto& space = task.space();
  auto start = std::chrono::steady_clock::now();
  auto results = runner.measure({{&task, space.get(space.index_of({2, 1}))},   // hang
                                 {&task, space.get(space.index_of({0, 1}))}}); // ok
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(results[0].error, ErrorKind::kRunTimeout) << results[0].error_message;
  EXPECT_GE(results[0].run_s, 1.5);
  EXPECT_LT(results[0].run_s, 3.0);
  EXPECT_TRUE(results[1].ok()) << results[1].error_message;
  EXPECT_LT(wall, 10.0);
}

TEST(Fault, TuningRunsToItsBudgetRecordsEveryErrorAndAValidConfigWins) {
  auto task = fault_task();
  auto dir = std::filesystem::temp_directory_path() / ("ktune_fault_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "log.db").string();
  {
    auto db = tuning_db::Database::open(path);
    LocalRunner runner(fault_options());
    tuner::GridSearchTuner grid(task.space());
    tuner::RecordContext context;
    context.target = {task.target().key, codegen::llvm_version()};
    context.tuner = grid.name();
    tuner::TuneOptions options;
    options.n_trial = 16;
    options.batch_size = 4;
    options.callbacks.push_back(tuner::database_callback(db, task, context));
    tuner::TuneResult result = tuner::tune(task, grid, runner, options);

    EXPECT_EQ(result.n_measured, 16u);
    EXPECT_EQ(result.n_ok, 4u);
    EXPECT_EQ(result.errors[ErrorKind::kRun], 4u);
    EXPECT_EQ(result.errors[ErrorKind::kRunTimeout], 4u);
    EXPECT_EQ(result.errors[ErrorKind::kWrongAnswer], 4u);
    ASSERT_TRUE(result.best_config);
    EXPECT_EQ((*result.best_config)["mode"].as_string(), "ok");
    // Grid order interleaves the modes (mode is the first knob), so every crash and hang is
    // followed by another candidate, which gets a fresh runner.
    EXPECT_EQ(runner.runners_started(), 9u);

    auto stats = db.stats();
    EXPECT_EQ(stats.records, 16);
    EXPECT_EQ(stats.ok_records, 4);
    EXPECT_EQ(stats.failures_by_kind["run"], 4);
    EXPECT_EQ(stats.failures_by_kind["run_timeout"], 4);
    EXPECT_EQ(stats.failures_by_kind["wrong_answer"], 4);
    auto best = db.best(task.workload_key(), context.target);
    ASSERT_TRUE(best);
    EXPECT_EQ(static_cast<uint64_t>(best->config_index), result.best_config->index());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ktune::rpc_runner
