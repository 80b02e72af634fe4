// End to end: matmul 256^3 tuned with 64 random trials on this machine through the local runner
// into a SQLite log; the best is as fast as the fallback; resuming measures only new configs.
// Why "as fast as", not "faster": at this size the fallback runs at about 0.9 of the core's
// measured FMA peak, and none of a 256-config random sample of the space beat it by more than
// 2% (`build/bench/fallback_headroom`: best 1.017x, 0 of 256). So "beats" is timing noise, not a
// property random search has here (seed 42 lost by 1% in CI). The test holds the tuned best to:
// re-timed against the fallback, within timing noise of it or faster. The run's five best are
// re-timed (a lucky timing during the run decides nothing), by the fastest of several
// interleaved timings (load only slows a timing down), on one thread (two-thread timings of
// this 0.2 ms kernel vary 2x between runner processes on a 2-core VM).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>

#include <gtest/gtest.h>
#include <unistd.h>

#include "codegen/target.h"
#include "rpc_runner/runner/local_runner.h"
#include "schedule_space/task.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/tune.h"
#include "tuning_db/database.h"

namespace ktune::rpc_runner {
namespace {

constexpr uint64_t kSeed = 42;
// Trials of the first run and of the resumed one. The first run's best must keep up with the
// fallback, a well-chosen config: 128 random draws of the space (which has the parallel knob on
// one core too) find one within kNoise of it.
constexpr size_t kFirst = 128, kResumed = 64;
// Allowed shortfall of the tuned best against the fallback: timing noise on a 2-core VM reaches
// 7%.
constexpr double kNoise = 0.10;

// The fastest timing of each config over `rounds` batches that time them back to back.
std::vector<double> fastest_interleaved(LocalRunner& runner,
                                        const std::vector<tuner::MeasureInput>& inputs,
                                        int rounds) {
  std::vector<double> fastest(inputs.size(), std::numeric_limits<double>::infinity());
  for (int r = 0; r < rounds; ++r) {
    std::vector<tuner::MeasureResult> results = runner.measure(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_TRUE(results[i].ok()) << results[i].error_message;
      for (double c : results[i].costs) fastest[i] = std::min(fastest[i], c);
    }
  }
  return fastest;
}

TEST(TuneE2E, Matmul256RandomRecordsEveryTrialKeepsUpWithTheFallbackAndResumes) {
  codegen::Target target = codegen::Target::host();
  auto task = schedule_space::Task::create(
      "matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}},
      schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(), 1));
  auto dir = std::filesystem::temp_directory_path() / ("ktune_e2e_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tune.db").string();

  LocalRunnerOptions runner_options;
  runner_options.runner_path = KTUNE_RUNNER_PATH;
  runner_options.measure.run_threads = 1;
  LocalRunner runner(runner_options);
  tuner::RecordContext context;
  context.target = {target.str(), codegen::llvm_version()};
  context.tuner = "random";

  std::set<int64_t> first_indices;
  {
    auto db = tuning_db::Database::open(path);
    tuner::RandomTuner random(task.space(), kSeed);
    tuner::TuneOptions options;
    options.n_trial = kFirst;
    options.log = tuner::database_callback(db, task, context);
    tuner::TuneResult result = tuner::tune(task, random, runner, options);
    EXPECT_EQ(result.n_measured, kFirst);
    EXPECT_EQ(db.stats().records, static_cast<int64_t>(kFirst));
    auto indices = db.measured_indices(task.workload_key(), context.target);
    first_indices.insert(indices.begin(), indices.end());
    EXPECT_EQ(first_indices.size(), kFirst);
    EXPECT_EQ(db.stats().failures_by_kind.count("wrong_answer"), 0u);

    ASSERT_TRUE(result.best_config) << "no config succeeded";
    auto best = db.best(task.workload_key(), context.target);
    ASSERT_TRUE(best);
    EXPECT_EQ(static_cast<uint64_t>(best->config_index), result.best_config->index());
    // The five best of the run and the fallback, timed again side by side: the run's best alone
    // may have been a lucky timing.
    std::vector<tuner::MeasureInput> finalists;
    for (const auto& record : db.top_k(task.workload_key(), context.target, 5))
      finalists.push_back({&task, schedule_space::Config::from_json(record.config)});
    ASSERT_EQ(finalists.size(), 5u);
    finalists.push_back({&task, task.fallback_config()});
    std::vector<double> fastest = fastest_interleaved(runner, finalists, 5);
    const double tuned = *std::min_element(fastest.begin(), fastest.end() - 1);
    std::printf("fastest timings: tuned %.1f GFLOP/s, fallback %.1f GFLOP/s\n",
                task.flop() / tuned / 1e9, task.flop() / fastest.back() / 1e9);
    EXPECT_LT(tuned, fastest.back() * (1 + kNoise))
        << "tuned " << task.flop() / tuned / 1e9 << " GFLOP/s vs fallback "
        << task.flop() / fastest.back() / 1e9;
  }
  {
    auto db = tuning_db::Database::open(path);
    tuner::RandomTuner random(task.space(), kSeed);  // same seed: would repeat the first run
    tuner::TuneOptions options;
    options.n_trial = kResumed;
    options.resume = tuner::load_past_measurements(db, task, context.target);
    EXPECT_EQ(options.resume.size(), kFirst);
    std::set<uint64_t> measured_now;
    options.log = tuner::database_callback(db, task, context);
    options.callbacks.push_back(
        [&](const std::vector<tuner::MeasureInput>& in, const std::vector<tuner::MeasureResult>&) {
          for (const auto& i : in) measured_now.insert(i.config.index());
        });
    tuner::TuneResult result = tuner::tune(task, random, runner, options);
    EXPECT_EQ(result.n_measured, kResumed);
    EXPECT_EQ(measured_now.size(), kResumed);
    for (uint64_t i : measured_now)
      EXPECT_EQ(first_indices.count(static_cast<int64_t>(i)), 0u) << i;
    EXPECT_EQ(db.stats().records, static_cast<int64_t>(kFirst + kResumed));
    EXPECT_EQ(db.measured_indices(task.workload_key(), context.target).size(), kFirst + kResumed);
  }
  EXPECT_EQ(runner.runners_started(), 1u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ktune::rpc_runner
