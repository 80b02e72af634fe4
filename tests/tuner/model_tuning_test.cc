// Tests of ModelTuning with a fake measurer (no kernels): the fallbacks come first in one batch,
// the budget is spent exactly with a warm-up for every tuned workload, tasks tuned as one
// workload share its tuner, the estimate is sum of count x best with each best the minimum the
// fake returned, every trial is in the log, and a second run resumes from it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"
#include "tests/frontend/test_models.h"
#include "tuner/model_tuning.h"

namespace ktune::tuner {
namespace {

// Cost of a config: 1 ms / (1 + index % 9), + 1 us per workload position so workloads differ.
class FakeMeasurer : public Measurer {
 public:
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) override {
    batches.push_back(inputs.size());
    std::vector<MeasureResult> out;
    for (const auto& in : inputs) {
      const std::string& key = in.task->workload_key();
      const double cost = 1e-3 / static_cast<double>(1 + in.config.index() % 9) + 1e-6 * static_cast<double>(key.size() % 5);
      if (!first_batch_done) {
        fallback[key] = cost;
      } else {
        best[key] = std::min(best.count(key) ? best[key] : 1e9, cost);
        ++trials[key];
      }
      out.push_back(make_ok_result({cost}));
    }
    first_batch_done = true;
    return out;
  }
  bool first_batch_done = false;
  std::vector<size_t> batches;
  std::map<std::string, double> fallback, best;
  std::map<std::string, size_t> trials;
};

TEST(ModelTuning, BudgetWarmUpSharedTunersAndResume) {
  const auto traits = schedule_space::make_target_traits("test-target", "x86_64-linux-gnu", 512, 1);
  const frontend::ModelTasks tasks =
      frontend::extract_tasks(frontend::load_onnx(testing_models::model("small_cnn.onnx")), traits);
  ASSERT_EQ(tasks.tasks.size(), 5u);
  const std::string path = (std::filesystem::temp_directory_path() / ("ktune_model_tuning_" + std::to_string(::getpid()) + ".db")).string();
  std::filesystem::remove(path);
  auto db = tuning_db::Database::open(path);
  ModelTuningOptions options;
  options.session.tuner = "random";
  options.scheduler.trials = 40;
  options.scheduler.batch_size = 4;

  FakeMeasurer fake;
  ModelTuning tuning(tasks, db, fake, {"test-target", "19"}, options);
  size_t steps = 0;
  const ModelTuningReport r = tuning.run([&](const ModelTuningReport&) { ++steps; });
  // One tuner per distinct tuned workload: today the two convs differ only by their epilogue,
  // which conv2d_nchwc does not take yet, so they share one (4 workloads; 5 once it does).
  std::set<std::string> workloads;
  for (const auto& t : tasks.tasks)
    if (t.tunable) workloads.insert(t.tunable->workload_key());
  ASSERT_EQ(fake.fallback.size(), workloads.size());
  EXPECT_EQ(fake.batches.front(), workloads.size());  // all fallbacks in the first batch
  EXPECT_EQ(r.trials, 40u);
  EXPECT_EQ(steps, 10u);                // 40 trials / 4 per allocation
  size_t measured = 0;
  for (const auto& [key, n] : fake.trials) {
    EXPECT_GE(n, 4u) << key;  // warm-up
    measured += n;
  }
  EXPECT_EQ(measured, 40u);
  EXPECT_EQ(fake.trials.size(), workloads.size());
  ASSERT_EQ(r.tasks.size(), 5u);
  for (const auto& a : r.tasks)
    for (const auto& b : r.tasks)
      if (a.tuned_as == b.tuned_as) {
        EXPECT_EQ(a.trials, b.trials) << a.key << " / " << b.key;
      }
  double tuned = 0, fallback = 0;
  for (const auto& t : r.tasks) {
    EXPECT_DOUBLE_EQ(t.best_s, std::min(fake.best.at(t.tuned_as), fake.fallback.at(t.tuned_as))) << t.key;
    EXPECT_DOUBLE_EQ(*t.fallback_s, fake.fallback.at(t.tuned_as)) << t.key;
    tuned += static_cast<double>(t.count) * t.best_s;
    fallback += static_cast<double>(t.count) * *t.fallback_s;
  }
  EXPECT_DOUBLE_EQ(r.tuned_s, tuned);
  EXPECT_DOUBLE_EQ(r.fallback_s, fallback);
  // The 40 trials and each tuned workload's fallback, logged once.
  const int64_t fallbacks = static_cast<int64_t>(workloads.size());
  EXPECT_EQ(db.stats().records, 40 + fallbacks);

  // A second run on the same log: 8 new trials, nothing measured twice, bests never worse.
  FakeMeasurer again;
  options.scheduler.trials = 8;
  ModelTuning resumed(tasks, db, again, {"test-target", "19"}, options);
  const ModelTuningReport r2 = resumed.run();
  EXPECT_EQ(r2.trials, 8u);
  for (size_t i = 0; i < r2.tasks.size(); ++i) EXPECT_LE(r2.tasks[i].best_s, r.tasks[i].best_s) << r2.tasks[i].key;
  EXPECT_EQ(db.stats().records, 48 + fallbacks);  // the fallbacks are in the log already
  db = tuning_db::Database::open(path + ".closed");  // closes the log (and its WAL files)
  for (const char* suffix : {"", "-wal", "-shm", ".closed", ".closed-wal", ".closed-shm"})
    std::filesystem::remove(path + suffix);
}

}  // namespace
}  // namespace ktune::tuner
