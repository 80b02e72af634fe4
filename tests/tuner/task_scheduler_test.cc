// Tests of TaskScheduler on synthetic tasks whose best latency is a known function of their
// trials: warm-up order, budget, round robin's equal shares, the gradient computed by hand, and
// where the gradient strategy spends its trials.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "support/error.h"
#include "tuner/task_scheduler.h"

namespace ktune::tuner {
namespace {

// best latency = floor + (start - floor) / (1 + trials / scale); `limit` trials exhaust it.
class CurveTuner : public TaskTuner {
 public:
  CurveTuner(double start, double floor, double scale, size_t limit = 1u << 30)
      : start_(start), floor_(floor), scale_(scale), limit_(limit) {}
  size_t tune(size_t n) override {
    const size_t m = std::min(n, limit_ - trials_);
    trials_ += m;
    return m;
  }
  double best_latency() const override {
    if (trials_ == 0) return std::numeric_limits<double>::infinity();
    return floor_ + (start_ - floor_) / (1.0 + static_cast<double>(trials_) / scale_);
  }
  size_t trials() const { return trials_; }

 private:
  double start_, floor_, scale_;
  size_t limit_, trials_ = 0;
};

TaskSchedulerOptions options(const std::string& strategy, size_t trials, size_t batch = 10) {
  TaskSchedulerOptions o;
  o.strategy = strategy;
  o.trials = trials;
  o.batch_size = batch;
  return o;
}

TEST(TaskScheduler, WarmUpInOrderThenBudgetExactly) {
  CurveTuner a(1, 0.1, 10), b(1, 0.1, 10), c(1, 0.1, 10);
  TaskScheduler s({{"a", 1, 1e9, "g", &a}, {"b", 1, 1e9, "g", &b}, {"c", 1, 1e9, "g", &c}},
                  options("gradient", 95));
  const auto steps = s.run();
  ASSERT_GE(steps.size(), 3u);
  EXPECT_EQ(steps[0].task, 0u);
  EXPECT_EQ(steps[1].task, 1u);
  EXPECT_EQ(steps[2].task, 2u);
  EXPECT_EQ(steps.back().total, 95u);
  EXPECT_EQ(a.trials() + b.trials() + c.trials(), 95u);
  EXPECT_EQ(steps.back().measured, 5u);  // the last allocation is cut to the budget
  EXPECT_DOUBLE_EQ(steps.back().model_latency, s.model_latency());
}

TEST(TaskScheduler, RoundRobinSplitsEqually) {
  CurveTuner a(1, 0.1, 10), b(100, 10, 10), c(0.01, 0.001, 10);
  TaskScheduler s({{"a", 1, 1, "g", &a}, {"b", 5, 1, "g", &b}, {"c", 1, 1, "g", &c}},
                  options("round_robin", 300));
  s.run();
  EXPECT_EQ(a.trials(), 100u);
  EXPECT_EQ(b.trials(), 100u);
  EXPECT_EQ(c.trials(), 100u);
}

TEST(TaskScheduler, GradientByHand) {
  // Two tasks of one group after the warm-up (10 trials each): best = 1 / (1 + 1) = 0.5 for both.
  CurveTuner a(1.0, 0.0, 10), b(1.0, 0.0, 10);
  TaskScheduler w({{"a", 3, 2e9, "g", &a}, {"b", 1, 1e9, "g", &b}}, options("gradient", 20));
  w.run();
  // a, t = 1: next = 0.5 - 0.5 / 1 = 0; the group bound 2 x 2e9 / max(2e9 / 0.5, 1e9 / 0.5) = 1
  // does not bind; forward = -0.5; no backward term before the window fills. gradient = weight 3 x
  // (0.2 x 0 + 0.8 x -0.5) = -1.2.
  EXPECT_DOUBLE_EQ(w.gradient(0), -1.2);
  EXPECT_DOUBLE_EQ(w.gradient(1), -0.4);  // weight 1
  EXPECT_EQ(w.pick_next(), 0u);
}

TEST(TaskScheduler, GroupBoundAndBackwardWindow) {
  // Round robin a, b, a, b, a: a has 30 trials (best 1 / 4 = 0.25, 4e9 FLOP/s), b 20 (best 4 / 3).
  CurveTuner a(1.0, 0.0, 10), b(4.0, 0.0, 10);
  TaskScheduler s({{"a", 1, 1e9, "conv", &a}, {"b", 1, 1e9, "conv", &b}},
                  options("round_robin", 50));
  s.run();
  ASSERT_EQ(s.history(1).size(), 2u);
  // b, t = 2: 1/t law next = 4/3 - 4/3 / 2 = 2/3, but beta = 2 bounds it at 2 x 1e9 / 4e9 = 0.5.
  // forward = 0.5 - 4/3; gradient = 0.8 x forward.
  EXPECT_NEAR(s.gradient(1), 0.8 * (0.5 - 4.0 / 3.0), 1e-12);

  // Four allocations of one task: best = 1 / (1 + k); history [0.5, 1/3, 0.25, 0.2].
  CurveTuner c(1.0, 0.0, 10);
  TaskScheduler single({{"c", 2, 1e9, "x", &c}}, options("gradient", 40));
  single.run();
  ASSERT_EQ(single.history(0).size(), 4u);
  const double backward = (0.2 - 0.5) / 3;       // over the window of 3 allocations
  const double forward = (0.2 - 0.2 / 4) - 0.2;  // alone in its group: no bound
  EXPECT_NEAR(single.gradient(0), 2 * (0.2 * backward + 0.8 * forward), 1e-12);
}

TEST(TaskScheduler, GradientSpendsWhereTheModelGains) {
  // A heavy task (weight 4, slow) and three light ones: the heavy one should get most trials.
  CurveTuner heavy(10, 1, 50), l1(0.1, 0.01, 5), l2(0.1, 0.01, 5), l3(0.1, 0.01, 5);
  TaskScheduler s({{"heavy", 4, 1e9, "a", &heavy},
                   {"l1", 1, 1e7, "b", &l1},
                   {"l2", 1, 1e7, "c", &l2},
                   {"l3", 1, 1e7, "d", &l3}},
                  options("gradient", 400));
  s.run();
  EXPECT_GT(heavy.trials(), 300u);
  // ... and the model latency beats an equal split of the same budget.
  CurveTuner h2(10, 1, 50), m1(0.1, 0.01, 5), m2(0.1, 0.01, 5), m3(0.1, 0.01, 5);
  TaskScheduler rr({{"heavy", 4, 1e9, "a", &h2},
                    {"l1", 1, 1e7, "b", &m1},
                    {"l2", 1, 1e7, "c", &m2},
                    {"l3", 1, 1e7, "d", &m3}},
                   options("round_robin", 400));
  rr.run();
  EXPECT_LT(s.model_latency(), 0.8 * rr.model_latency());
}

TEST(TaskScheduler, ExhaustedTasksAreSkipped) {
  CurveTuner small(1, 0.5, 10, /*limit=*/15), big(1, 0.1, 10);
  TaskScheduler s({{"small", 1, 1, "g", &small}, {"big", 1, 1, "h", &big}},
                  options("round_robin", 100));
  const auto steps = s.run();
  EXPECT_EQ(small.trials(), 15u);
  EXPECT_EQ(big.trials(), 85u);
  EXPECT_EQ(steps.back().total, 100u);

  // Every task exhausted before the budget: the run ends.
  CurveTuner x(1, 0.5, 10, 7);
  TaskScheduler done({{"x", 1, 1, "g", &x}}, options("gradient", 100));
  EXPECT_EQ(done.run().back().total, 7u);
}

// Each allocation takes `ms` of wall time.
class SlowTuner : public CurveTuner {
 public:
  explicit SlowTuner(int ms) : CurveTuner(1, 0.1, 10), ms_(ms) {}
  size_t tune(size_t n) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return CurveTuner::tune(n);
  }

 private:
  int ms_;
};

TEST(TaskScheduler, TheTimeBudgetEndsTheSearchWithTrialsLeft) {
  // 20 ms per allocation against 0.2 s: the trial budget would take 1000 s.
  SlowTuner a(20), b(20);
  TaskSchedulerOptions o = options("gradient", 500000);
  o.time_budget_s = 0.2;
  TaskScheduler s({{"a", 1, 1e9, "g", &a}, {"b", 1, 1e9, "g", &b}}, o);
  const auto start = std::chrono::steady_clock::now();
  const auto steps = s.run();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(s.out_of_time());
  ASSERT_FALSE(steps.empty());
  EXPECT_LT(steps.back().total, 500000u);
  EXPECT_EQ(a.trials() + b.trials(), steps.back().total);
  // Ended within one allocation of the budget (generous for a loaded machine, far below 1000 s).
  EXPECT_GE(took, 0.2);
  EXPECT_LT(took, 5.0);

  // Without a budget the same run spends every trial and says it was not out of time.
  CurveTuner c(1, 0.1, 10);
  TaskScheduler all({{"c", 1, 1e9, "g", &c}}, options("gradient", 100));
  EXPECT_EQ(all.run().back().total, 100u);
  EXPECT_FALSE(all.out_of_time());
}

TEST(TaskScheduler, BadOptionsAreTypedErrors) {
  CurveTuner a(1, 0.1, 10);
  auto expect_invalid = [&](TaskSchedulerOptions o, std::vector<ScheduledTask> tasks) {
    try {
      TaskScheduler s(std::move(tasks), o);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    }
  };
  const std::vector<ScheduledTask> one = {{"a", 1, 1, "g", &a}};
  expect_invalid(options("fastest", 10), one);
  expect_invalid(options("gradient", 0), one);
  expect_invalid(options("gradient", 10, 0), one);
  TaskSchedulerOptions bad_alpha = options("gradient", 10);
  bad_alpha.alpha = 1.5;
  expect_invalid(bad_alpha, one);
  TaskSchedulerOptions bad_budget = options("gradient", 10);
  bad_budget.time_budget_s = -1;
  expect_invalid(bad_budget, one);
  bad_budget.time_budget_s = std::numeric_limits<double>::infinity();
  expect_invalid(bad_budget, one);
  expect_invalid(options("gradient", 10), {});
  expect_invalid(options("gradient", 10), {{"a", 0, 1, "g", &a}});
  expect_invalid(options("gradient", 10), {{"a", 1, 1, "g", nullptr}});
}

}  // namespace
}  // namespace ktune::tuner
