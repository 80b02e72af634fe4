// Fault tests: kernels that segfault, hang or are wrong end their candidate only; tuning runs
// to its budget, every error is recorded with its kind, and a valid config wins. A build past its
// timeout is killed (nothing waits for it); a reference that fails once is tried again.
#include <filesystem>
#include <map>

#include <gtest/gtest.h>
#include <unistd.h>

#include "codegen/target.h"
#include "rpc_runner/runner/channel_runner.h"
#include "rpc_runner/runner/local_runner.h"
#include "schedule_space/task.h"
#include "tests/rpc_runner/runner/fault_template.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"

namespace ktune::rpc_runner {
namespace {

schedule_space::Task host_task(const std::string& name,
                               const std::map<std::string, std::string>& args) {
  codegen::Target t = codegen::Target::host();
  return schedule_space::Task::create(
      name, args,
      schedule_space::make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores()));
}

schedule_space::Task fault_task() {
  testing::register_fault_template();
  return host_task("runner_fault_test", {{"N", "4096"}});
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
  auto results = runner.measure({{&task, space.get(space.index_of({1, 0}))},    // crash
                                 {&task, space.get(space.index_of({0, 2}))}});  // ok
  EXPECT_EQ(results[0].error, ErrorKind::kRun);
  EXPECT_NE(results[0].error_message.find("signal 11"), std::string::npos)
      << results[0].error_message;
  EXPECT_TRUE(results[1].ok()) << results[1].error_message;
  EXPECT_EQ(runner.runners_started(), 2u);
}

TEST(Fault, EndlessLoopIsKilledAfterTheRunTimeout) {
  auto task = fault_task();
  LocalRunner runner(fault_options());
  const auto& space = task.space();
  auto start = std::chrono::steady_clock::now();
  auto results = runner.measure({{&task, space.get(space.index_of({2, 1}))},    // hang
                                 {&task, space.get(space.index_of({0, 1}))}});  // ok
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(results[0].error, ErrorKind::kRunTimeout) << results[0].error_message;
  EXPECT_GE(results[0].run_s, 1.5);
  EXPECT_LT(results[0].run_s, 3.0);
  EXPECT_TRUE(results[1].ok()) << results[1].error_message;
  EXPECT_LT(wall, 10.0);
}

TEST(Fault, TuningRunsToItsBudgetRecordsEveryErrorAndAValidConfigWins) {
  auto task = fault_task();
  auto dir =
      std::filesystem::temp_directory_path() / ("ktune_fault_test_" + std::to_string(::getpid()));
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
    options.log = tuner::database_callback(db, task, context);
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

schedule_space::Task slow_build_task() {
  testing::register_slow_build_template();
  return host_task("runner_slow_build_test", {{"N", "64"}});
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(Fault, SlowBuildIsKilledAtItsTimeoutAndNothingWaitsForIt) {
  auto task = slow_build_task();
  const auto& space = task.space();
  LocalRunnerOptions o = fault_options();
  o.build_threads = 1;  // the slow build holds the only build slot until it is killed
  o.measure.build_timeout_s = 1.0;
  const auto start = std::chrono::steady_clock::now();
  double measured_s = 0;
  {
    LocalRunner runner(o);
    auto results =
        runner.measure({{&task, space.get(1)}, {&task, space.get(0)}, {&task, space.get(0)}});
    measured_s = seconds_since(start);
    EXPECT_EQ(results[0].error, ErrorKind::kBuildTimeout) << results[0].error_message;
    EXPECT_GE(results[0].build_s, 1.0);
    EXPECT_LT(results[0].build_s, 1.5);
    // The next candidates built in the freed slot and ran normally.
    EXPECT_TRUE(results[1].ok()) << results[1].error_message;
    EXPECT_TRUE(results[2].ok()) << results[2].error_message;
    EXPECT_LT(results[1].build_s, 1.0);
  }
  // The runner is gone too: no thread of this process was left compiling the slow kernel, so its
  // destructor (and the process's exit) had nothing to wait for.
  const double total_s = seconds_since(start);
  EXPECT_LT(measured_s, 4.0);
  EXPECT_LT(total_s - measured_s, 0.5);
}

TEST(Fault, SlowBuildTakesLongerThanTheTimeoutItIsKilledAt) {
  // The premise of the test above: without the timeout the build lasts well past 1 s.
  auto task = slow_build_task();
  LocalRunnerOptions o = fault_options();
  o.measure.build_timeout_s = 3.0;
  LocalRunner runner(o);
  const auto r = runner.measure({{&task, task.space().get(1)}}).front();
  EXPECT_EQ(r.error, ErrorKind::kBuildTimeout) << r.error_message;
}

// A local runner channel whose first `failures` reference loads fail as if the runner had died.
class FlakyReferenceChannel : public RunnerChannel {
 public:
  FlakyReferenceChannel(int failures, int* reference_calls)
      : inner_(KTUNE_RUNNER_PATH), failures_(failures), reference_calls_(reference_calls) {}
  void check_target(const std::string& target_key) const override {
    inner_.check_target(target_key);
  }
  uint64_t ready() override { return inner_.ready() + deaths_; }
  Reply call(const Request& request, double timeout_s) override {
    if (request.type == RequestType::kReference) {
      ++*reference_calls_;
      if (failures_ > 0) {
        --failures_;
        ++deaths_;  // what a crashed runner looks like: a new epoch, the references gone
        throw Error(ErrorKind::kRun, "injected: the runner died loading the reference");
      }
    }
    return inner_.call(request, timeout_s);
  }
  bool lost() const override { return false; }

 private:
  ProcessChannel inner_;
  int failures_;
  uint64_t deaths_ = 0;
  int* reference_calls_;
};

TEST(Fault, AReferenceThatFailedOnceIsRetried) {
  auto task = fault_task();
  const auto& space = task.space();
  const std::vector<tuner::MeasureInput> inputs = {
      {&task, space.get(space.index_of({0, 0}))},
      {&task, space.get(space.index_of({0, 1}))},
      {&task, space.get(space.index_of({3, 2}))}};  // wrong
  int calls = 0;
  {
    ChannelRunner runner(fault_options(), std::make_unique<FlakyReferenceChannel>(1, &calls));
    auto results = runner.measure(inputs);
    EXPECT_TRUE(results[0].ok()) << results[0].error_message;
    EXPECT_TRUE(results[1].ok()) << results[1].error_message;
    EXPECT_EQ(results[2].error, ErrorKind::kWrongAnswer) << results[2].error_message;
    EXPECT_EQ(calls, 2);  // one failure, one success, then the runner holds it
  }
  // A reference that keeps failing ends as unknown after the attempts, and is not tried again.
  calls = 0;
  ChannelRunner runner(fault_options(), std::make_unique<FlakyReferenceChannel>(100, &calls));
  auto results = runner.measure(inputs);
  for (const auto& r : results) {
    EXPECT_EQ(r.error, ErrorKind::kUnknown) << r.error_message;
    EXPECT_NE(r.error_message.find("injected"), std::string::npos) << r.error_message;
  }
  EXPECT_EQ(calls, ChannelRunner::kReferenceAttempts);
}

}  // namespace
}  // namespace ktune::rpc_runner
