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
#include <sstream>
#include <string>
#include <vector>

#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"
#include "support/error.h"
#include "tests/frontend/test_models.h"
#include "tuner/model_tuning.h"

namespace ktune::tuner {
namespace {

// Cost of a config: 1 ms / (1 + index % 9), + 1 us per workload position so workloads differ,
// times the workload's scale.
class FakeMeasurer : public Measurer {
 public:
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) override {
    batches.push_back(inputs.size());
    std::vector<MeasureResult> out;
    for (const auto& in : inputs) {
      const std::string& key = in.task->workload_key();
      const double cost = (1e-3 / static_cast<double>(1 + in.config.index() % 9) +
                           1e-6 * static_cast<double>(key.size() % 5)) *
                          (scale.count(key) ? scale.at(key) : 1.0);
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
  std::map<std::string, double> scale;  // a workload's costs times this (default 1)
  bool first_batch_done = false;
  std::vector<size_t> batches;
  std::map<std::string, double> fallback, best;
  std::map<std::string, size_t> trials;
};

// The small CNN's tasks on a test target, without the Winograd alternatives of its 3x3 convs
// (the test of alternatives makes its own): 2 convs, max pool, global avg pool, Gemm.
frontend::ModelTasks small_cnn_tasks() {
  const auto traits = schedule_space::make_target_traits("test-target", "x86_64-linux-gnu", 512, 1);
  frontend::ModelTasks all =
      frontend::extract_tasks(frontend::load_onnx(testing_models::model("small_cnn.onnx")), traits);
  frontend::ModelTasks m = all;
  m.tasks.clear();
  std::vector<size_t> index(all.tasks.size());
  for (size_t i = 0; i < all.tasks.size(); ++i) {
    index[i] = m.tasks.size();
    if (!all.tasks[i].alternative_of) m.tasks.push_back(all.tasks[i]);
  }
  for (auto& occ : m.occurrences) occ.task = index[occ.task];
  return m;
}

// A fresh log in the temporary folder, named after `name` and this process.
std::string fresh_log(const std::string& name) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".db"))
          .string();
  std::filesystem::remove(path);
  return path;
}

// Random search, 4 trials per allocation, `trials` in all. No re-timing at the end, so the fake
// measurer counts the search's trials alone (ModelTuning.RetimesEachWorkloadsBestAtTheEnd covers
// it).
ModelTuningOptions random_options(size_t trials) {
  ModelTuningOptions options;
  options.session.tuner = "random";
  options.scheduler.trials = trials;
  options.scheduler.batch_size = 4;
  options.session.retime_top = 0;
  return options;
}

TEST(ModelTuning, RetimesEachWorkloadsBestAtTheEnd) {
  const frontend::ModelTasks tasks = small_cnn_tasks();
  const std::string path = fresh_log("ktune_model_retime");
  auto db = tuning_db::Database::open(path);
  ModelTuningOptions options = random_options(40);
  options.session.retime_top = 5;
  options.session.retime_rounds = 3;
  FakeMeasurer fake;
  ModelTuning tuning(tasks, db, fake, {"test-target", "19"}, options);
  const ModelTuningReport r = tuning.run([](const ModelTuningReport&) {});
  EXPECT_EQ(r.trials, 40u);
  std::map<std::string, const schedule_space::Task*> workloads;
  for (const auto& t : tasks.tasks)
    if (t.tunable) workloads[t.tunable->workload_key()] = &*t.tunable;
  // Each workload's five best, and its fallback when not one of them, timed again in 3 rounds:
  // every one of those records keeps its three rounds, the fallback's included.
  int64_t retimed = 0;
  for (const auto& [key, task] : workloads) {
    int64_t fallback_rounds = -1;
    for (const tuning_db::Record& rec : db.top_k(key, {"test-target", "19"}, 100)) {
      retimed += rec.retimed_costs.empty() ? 0 : 1;
      if (rec.config_index == static_cast<int64_t>(task->fallback_config().index()))
        fallback_rounds = static_cast<int64_t>(rec.retimed_costs.size());
    }
    EXPECT_EQ(fallback_rounds, 3) << key;
  }
  EXPECT_GE(retimed, static_cast<int64_t>(5 * workloads.size()));
  EXPECT_LE(retimed, static_cast<int64_t>(6 * workloads.size()));
  EXPECT_EQ(db.stats().retimed_records, retimed);
  size_t measured = 0;
  for (const auto& [key, n] : fake.trials) measured += n;
  EXPECT_EQ(measured, 40u + 3u * static_cast<size_t>(retimed));
  std::filesystem::remove(path);
}

TEST(ModelTuning, BudgetWarmUpSharedTunersAndResume) {
  const frontend::ModelTasks tasks = small_cnn_tasks();
  ASSERT_EQ(tasks.tasks.size(), 5u);
  const std::string path = fresh_log("ktune_model_tuning");
  auto db = tuning_db::Database::open(path);
  ModelTuningOptions options = random_options(40);

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
  EXPECT_EQ(steps, 10u);  // 40 trials / 4 per allocation
  size_t measured = 0;
  for (const auto& [key, n] : fake.trials) {
    EXPECT_GE(n, 4u) << key;  // warm-up
    measured += n;
  }
  EXPECT_EQ(measured, 40u);
  EXPECT_EQ(fake.trials.size(), workloads.size());
  ASSERT_EQ(r.tasks.size(), 5u);
  // Each task's layers, one per occurrence: the ONNX names of its anchor and fused nodes,
  // '+'-joined, which together are the task's nodes in graph order.
  const frontend::Graph graph = frontend::load_onnx(testing_models::model("small_cnn.onnx"));
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const auto& t = r.tasks[i];
    ASSERT_EQ(t.key, tasks.tasks[i].key());
    EXPECT_EQ(t.layers.size(), static_cast<size_t>(t.count)) << t.key;
    std::vector<std::string> names;
    for (const auto& label : t.layers) {
      std::stringstream parts(label);
      for (std::string name; std::getline(parts, name, '+');) names.push_back(name);
    }
    EXPECT_EQ(names, tasks.tasks[i].layers) << t.key;
    for (const auto& label : t.layers) {
      const std::string anchor = label.substr(0, label.find('+'));
      const auto node = std::find_if(graph.nodes.begin(), graph.nodes.end(),
                                     [&](const auto& n) { return n.name == anchor; });
      ASSERT_NE(node, graph.nodes.end()) << label;
      EXPECT_TRUE(node->op == "Conv" || node->op == "Gemm" || node->op == "MaxPool" ||
                  node->op == "GlobalAveragePool")
          << label << " " << node->op;
    }
  }
  EXPECT_EQ(r.tasks[0].layers.size(), 1u);
  EXPECT_EQ(std::count(r.tasks[0].layers[0].begin(), r.tasks[0].layers[0].end(), '+'), 2)
      << r.tasks[0].layers[0];  // conv+bn+relu
  for (const auto& a : r.tasks)
    for (const auto& b : r.tasks)
      if (a.tuned_as == b.tuned_as) {
        EXPECT_EQ(a.trials, b.trials) << a.key << " / " << b.key;
      }
  double tuned = 0, fallback = 0;
  for (const auto& t : r.tasks) {
    EXPECT_DOUBLE_EQ(t.best_s, std::min(fake.best.at(t.tuned_as), fake.fallback.at(t.tuned_as)))
        << t.key;
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
  for (size_t i = 0; i < r2.tasks.size(); ++i)
    EXPECT_LE(r2.tasks[i].best_s, r.tasks[i].best_s) << r2.tasks[i].key;
  EXPECT_EQ(db.stats().records, 48 + fallbacks);     // the fallbacks are in the log already
  db = tuning_db::Database::open(path + ".closed");  // closes the log (and its WAL files)
  for (const char* suffix : {"", "-wal", "-shm", ".closed", ".closed-wal", ".closed-shm"})
    std::filesystem::remove(path + suffix);
}

// A task with an alternative (another algorithm for its layers, e.g. Winograd for a 3x3 conv):
// one scheduler task for both, each gets a warm-up, and the estimate counts the faster of them.
TEST(ModelTuning, AlternativesShareTheirTasksAllocationsAndTheEstimateTakesTheFaster) {
  frontend::ModelTasks tasks = small_cnn_tasks();
  // Stand-in: the first task whose tuned workload differs from task 0's becomes its alternative.
  size_t alt = 0;
  for (size_t i = 1; i < tasks.tasks.size() && alt == 0; ++i)
    if (tasks.tasks[i].tunable &&
        tasks.tasks[i].tunable->workload_key() != tasks.tasks[0].tunable->workload_key())
      alt = i;
  ASSERT_GT(alt, 0u);
  tasks.tasks[alt].alternative_of = 0;
  tasks.tasks[alt].count = tasks.tasks[0].count;
  std::set<std::string> workloads;
  for (const auto& t : tasks.tasks)
    if (t.tunable) workloads.insert(t.tunable->workload_key());

  const std::string path = fresh_log("ktune_model_alternatives");
  auto db = tuning_db::Database::open(path);
  FakeMeasurer fake;
  ModelTuning tuning(tasks, db, fake, {"test-target", "19"}, random_options(64));
  // Each step names the workload it measured: the alternative's when its allocation went there
  // (the progress line a user reads), and that workload's trials grew by the step's.
  std::map<std::string, size_t> seen;
  std::set<std::string> stepped;
  const ModelTuningReport r = tuning.run([&](const ModelTuningReport& now) {
    const SchedulerStep& step = now.steps.back();
    const size_t before = seen[now.step_tuned];
    seen = fake.trials;
    EXPECT_EQ(seen[now.step_tuned], before + step.measured) << now.step_tuned;
    stepped.insert(now.step_tuned);
    EXPECT_EQ(model_report_from_json(to_json(now)).step_tuned, now.step_tuned);
  });
  EXPECT_EQ(r.workloads.size(), workloads.size() - 1);  // the alternative is no scheduler task
  EXPECT_EQ(r.trials, 64u);
  const std::string primary = tasks.tasks[0].tunable->workload_key();
  const std::string other = tasks.tasks[alt].tunable->workload_key();
  EXPECT_GE(fake.trials[primary], 4u);
  EXPECT_GE(fake.trials[other], 4u);
  EXPECT_EQ(stepped.count(other), 1u);
  EXPECT_EQ(stepped.count(primary), 1u);
  ASSERT_EQ(r.tasks[alt].alternative_of, tasks.tasks[0].key());
  double tuned = 0;
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    if (i == alt) continue;
    const double best =
        i == 0 ? std::min(r.tasks[0].best_s, r.tasks[alt].best_s) : r.tasks[i].best_s;
    tuned += static_cast<double>(r.tasks[i].count) * best;
  }
  EXPECT_DOUBLE_EQ(r.tuned_s, tuned);
  const ModelTuningReport back = model_report_from_json(to_json(r));
  EXPECT_EQ(back.tasks[alt].alternative_of, tasks.tasks[0].key());
  EXPECT_EQ(back.tasks[0].alternative_of, "");
  // The model's tasks as JSON keep the link (a server rebuilds a client's model from it); a link
  // to no earlier task is refused.
  const auto traits = schedule_space::make_target_traits("test-target", "x86_64-linux-gnu", 512, 1);
  nlohmann::json j = frontend::to_json(tasks);
  EXPECT_EQ(frontend::tasks_from_json(j, traits).tasks[alt].alternative_of, 0u);
  double flop = 0;  // an alternative computes the same: counted once
  for (size_t i = 0; i < tasks.tasks.size(); ++i)
    if (i != alt) flop += static_cast<double>(tasks.tasks[i].count) * tasks.tasks[i].flop;
  EXPECT_DOUBLE_EQ(tasks.total_flop(), flop);
  EXPECT_NEAR(frontend::tasks_from_json(j, traits).total_flop(), flop, 1.0);
  j["tasks"][0]["alternative_of"] = 3;
  EXPECT_THROW(frontend::tasks_from_json(j, traits), Error);
  std::filesystem::remove(path);
}

// A task with a much faster alternative (another algorithm, its latency over the task's FLOPs) is
// grouped apart from the other tasks of its template: its throughput does not set what they are
// expected to reach, so the budget is not poured into one of them.
TEST(ModelTuning, AFasterAlternativeDoesNotSetTheExpectedThroughputOfTasksWithoutOne) {
  // The small CNN with a Gemm of 64 x 64 x 64, whose space is not spent in a few batches.
  const auto traits = schedule_space::make_target_traits("test-target", "x86_64-linux-gnu", 512, 1);
  nlohmann::json j = frontend::to_json(small_cnn_tasks());
  for (auto& t : j["tasks"])
    if (t["template"] == "matmul") t["args"]["M"] = t["args"]["N"] = t["args"]["K"] = "64";
  frontend::ModelTasks tasks = frontend::tasks_from_json(j, traits);
  std::vector<size_t> convs;
  size_t other = 0;
  for (size_t i = 0; i < tasks.tasks.size(); ++i) {
    if (!tasks.tasks[i].tunable) continue;
    if (tasks.tasks[i].tunable->template_name() == "conv2d_nchwc")
      convs.push_back(i);
    else if (other == 0)
      other = i;
  }
  ASSERT_EQ(convs.size(), 2u);
  ASSERT_GT(other, 0u);
  // Stand-in: the first task of another template is the first conv's alternative, 20x faster.
  tasks.tasks[other].alternative_of = convs[0];
  tasks.tasks[other].count = tasks.tasks[convs[0]].count;
  const std::string path = fresh_log("ktune_model_alternative_groups");
  auto db = tuning_db::Database::open(path);
  FakeMeasurer fake;
  fake.scale[tasks.tasks[other].tunable->workload_key()] = 0.05;
  const size_t budget = 200;
  ModelTuning tuning(tasks, db, fake, {"test-target", "19"}, random_options(budget));
  const ModelTuningReport r = tuning.run();
  ASSERT_EQ(r.trials, budget);
  // Four scheduler tasks: the first conv with its alternative, the second conv, the Gemm and the
  // global pool (a small space). The second conv and the Gemm take about as long and share the
  // budget; grouped with the alternative, the second conv would be expected to reach a tenth of
  // its latency and take nearly every allocation.
  ASSERT_EQ(r.workloads.size(), 4u);
  size_t gemm = 0;
  for (const auto& [key, n] : fake.trials)
    if (key.rfind("matmul", 0) == 0) gemm = n;
  EXPECT_LT(fake.trials[tasks.tasks[convs[1]].tunable->workload_key()], budget * 3 / 4);
  EXPECT_GT(gemm, budget / 4);
  std::filesystem::remove(path);
}

// What a tuning server streams to its clients: every report survives to_json and
// model_report_from_json; and should_stop (a cancelled job) ends the run between allocations.
TEST(ModelTuning, ReportsRoundTripThroughJsonAndAStopEndsTheRun) {
  const frontend::ModelTasks tasks = small_cnn_tasks();
  const std::string path = fresh_log("ktune_model_report");
  auto db = tuning_db::Database::open(path);
  ModelTuningOptions options = random_options(40);
  size_t steps = 0;
  options.session.should_stop = [&] { return steps >= 3; };
  FakeMeasurer fake;
  ModelTuning tuning(tasks, db, fake, {"test-target", "19"}, options);
  const ModelTuningReport r = tuning.run([&](const ModelTuningReport& step) {
    ++steps;
    const ModelTuningReport back = model_report_from_json(to_json(step));
    EXPECT_EQ(back.trials, step.trials);
    EXPECT_DOUBLE_EQ(back.tuned_s, step.tuned_s);  // +inf (null) until every workload has a best
    EXPECT_DOUBLE_EQ(back.fallback_s, step.fallback_s);
    ASSERT_EQ(back.tasks.size(), step.tasks.size());
    for (size_t i = 0; i < back.tasks.size(); ++i) {
      EXPECT_EQ(back.tasks[i].key, step.tasks[i].key);
      EXPECT_EQ(back.tasks[i].tuned_as, step.tasks[i].tuned_as);
      EXPECT_EQ(back.tasks[i].count, step.tasks[i].count);
      EXPECT_EQ(back.tasks[i].trials, step.tasks[i].trials);
      EXPECT_DOUBLE_EQ(back.tasks[i].best_s, step.tasks[i].best_s);
      EXPECT_EQ(back.tasks[i].fallback_s, step.tasks[i].fallback_s);
      EXPECT_NEAR(back.tasks[i].flop, step.tasks[i].flop, 1e-9 * step.tasks[i].flop);
      EXPECT_EQ(back.tasks[i].layers, step.tasks[i].layers);
      ASSERT_FALSE(step.tasks[i].layers.empty());
    }
    // A server's tasks, read from JSON, have no graph: its client names the layers from its own.
    nlohmann::json unnamed = to_json(step);
    for (auto& t : unnamed["tasks"]) t.erase("layers");
    ModelTuningReport relabelled = model_report_from_json(unnamed);
    EXPECT_TRUE(relabelled.tasks[0].layers.empty());
    label_layers(relabelled, tasks);
    for (size_t i = 0; i < back.tasks.size(); ++i)
      EXPECT_EQ(relabelled.tasks[i].layers, step.tasks[i].layers);
    EXPECT_EQ(back.workloads, step.workloads);
    ASSERT_EQ(back.steps.size(), 1u);
    EXPECT_EQ(back.steps[0].task, step.steps.back().task);
    EXPECT_EQ(back.steps[0].total, step.steps.back().total);
  });
  EXPECT_EQ(steps, 3u);
  EXPECT_EQ(r.trials, 12u);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(db.stats().records, static_cast<int64_t>(12 + fake.fallback.size()));
  EXPECT_THROW(model_report_from_json(nlohmann::json::object()), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ktune::tuner
