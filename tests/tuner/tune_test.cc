// Tests of the tuning loop (budget, early stopping, resume, callbacks, db logging, progress)
// with a fake Measurer whose costs follow a known landscape.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include <unistd.h>

#include <gtest/gtest.h>

#include "schedule_space/task.h"
#include "te/tensor.h"
#include "tests/warning_capture.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/tune.h"
#include "tuner/tuning_session.h"
#include "tuning_db/claim_store.h"
#include "tuning_db/database.h"

namespace ktune::tuner {
namespace {

using schedule_space::Task;

// A toy template: C = A + 1 over N elements, with two "other" knobs of 16 values whose only
// role here is to give the fake measurer a landscape. Never compiled in these tests.
void register_toy() {
  static bool done = [] {
    schedule_space::TemplateDef def;
    def.name = "tuner_test_toy";
    def.doc = "tuner loop test template";
    schedule_space::ArgSpec n;
    n.name = "N";
    n.default_value = "64";
    def.args = {n};
    def.compute = [](const schedule_space::WorkloadArgs& a) {
      int64_t n = a.get_int("N");
      te::Tensor A = te::placeholder({n}, te::Float(32), "A");
      te::Tensor C = te::compute(
          {n}, [&](const std::vector<te::Var>& i) { return A(i[0]) + 1.0f; }, "C");
      return schedule_space::ComputeDef{{A, C}, {C}};
    };
    def.flop = [](const schedule_space::WorkloadArgs& a) { return double(a.get_int("N")); };
    def.define = [](const schedule_space::WorkloadArgs&, const schedule_space::TargetTraits&,
                    schedule_space::ConfigSpace& space) {
      std::vector<int64_t> v(16);
      for (int i = 0; i < 16; ++i) v[i] = i;
      space.define_knob("x", v);
      space.define_knob("y", v);
      space.add_constraint(
          "x!=15", [](const schedule_space::EntityView& e) { return e["x"].values[0] != 15; });
    };
    def.apply = [](const schedule_space::WorkloadArgs& a, const schedule_space::TargetTraits&,
                   const schedule_space::Config&) {
      int64_t n = a.get_int("N");
      te::Tensor A = te::placeholder({n}, te::Float(32), "A");
      te::Tensor C = te::compute(
          {n}, [&](const std::vector<te::Var>& i) { return A(i[0]) + 1.0f; }, "C");
      return schedule_space::Instantiated{te::create_schedule({C}), {A, C}};
    };
    schedule_space::register_template(def);
    return true;
  }();
  (void)done;
}

TuneOptions options_of(size_t n_trial, size_t batch_size, size_t early_stopping = 0) {
  TuneOptions o;
  o.n_trial = n_trial;
  o.batch_size = batch_size;
  o.early_stopping = early_stopping;
  return o;
}

Task toy_task() {
  register_toy();
  schedule_space::TargetTraits traits;
  traits.key = "llvm -mtriple=x86_64-unknown-linux-gnu -mcpu=test";
  return Task::create("tuner_test_toy", {{"N", "1000"}}, traits);
}

// Cost = 1 + (x-9)^2 + (y-4)^2 microseconds; y == 13 fails with kRun; counts calls.
class FakeMeasurer : public Measurer {
 public:
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) override {
    std::vector<MeasureResult> out;
    for (const auto& in : inputs) {
      measured.push_back(in.config.index());
      auto d = in.task->space().knob_indices(in.config.index());
      if (d[1] == 13) {
        out.push_back(make_error_result(ErrorKind::kRun, "fake crash"));
        continue;
      }
      double c = 1e-6 * (1 + (double(d[0]) - 9) * (double(d[0]) - 9) +
                         (double(d[1]) - 4) * (double(d[1]) - 4));
      out.push_back(make_ok_result({c, c * 1.01, c * 0.99}, 0.01, 0.02));
    }
    ++calls;
    return out;
  }
  std::vector<uint64_t> measured;
  size_t calls = 0;
};

TEST(Tune, SpendsTheBudgetOnDistinctConfigsAndFindsTheBest) {
  Task task = toy_task();
  FakeMeasurer measurer;
  RandomTuner tuner(task.space(), 1);
  size_t callback_rows = 0;
  TuneOptions options;
  options.n_trial = 100;
  options.batch_size = 8;
  options.callbacks.push_back(
      [&](const std::vector<MeasureInput>& in, const std::vector<MeasureResult>& r) {
        EXPECT_EQ(in.size(), r.size());
        callback_rows += in.size();
      });
  TuneResult result = tune(task, tuner, measurer, options);
  EXPECT_EQ(result.n_measured, 100u);
  EXPECT_EQ(callback_rows, 100u);
  EXPECT_EQ(measurer.calls, 13u);  // 12 batches of 8 + one of 4
  std::set<uint64_t> distinct(measurer.measured.begin(), measurer.measured.end());
  EXPECT_EQ(distinct.size(), 100u);
  // The best is the minimum over what was measured.
  double best = 1e9;
  size_t failures = 0;
  for (uint64_t i : measurer.measured) {
    auto d = task.space().knob_indices(i);
    if (d[1] == 13) {
      ++failures;
      continue;
    }
    best = std::min(best, 1e-6 * (1 + (double(d[0]) - 9) * (double(d[0]) - 9) +
                                  (double(d[1]) - 4) * (double(d[1]) - 4)));
  }
  ASSERT_TRUE(result.best_config.has_value());
  EXPECT_NEAR(result.best_result.mean_cost(), best, 1e-12);
  EXPECT_NEAR(result.best_gflops, 1000.0 / best / 1e9, 1e-9);
  EXPECT_EQ(result.errors[ErrorKind::kRun], failures);
  EXPECT_EQ(result.n_ok + failures, 100u);
  EXPECT_NEAR(result.build_s, 0.01 * result.n_ok, 1e-9);
}

TEST(Tune, GridSearchExhaustsTheSpaceBeforeTheBudget) {
  Task task = toy_task();
  FakeMeasurer measurer;
  GridSearchTuner tuner(task.space());
  TuneResult result = tune(task, tuner, measurer, options_of(1000, 32));
  EXPECT_EQ(result.n_measured, 240u);  // 16 * 16 minus the 16 configs with x == 15
  EXPECT_TRUE(result.space_exhausted);
  ASSERT_TRUE(result.best_config);
  EXPECT_EQ(task.space().knob_indices(result.best_config->index()), (std::vector<uint64_t>{9, 4}));
}

TEST(Tune, EarlyStoppingEndsAfterTrialsWithoutImprovement) {
  Task task = toy_task();
  FakeMeasurer measurer;
  GridSearchTuner tuner(task.space());
  // Grid order reaches the optimum (9, 4) at index 4*16+9 = 73; nothing better comes after.
  TuneResult result = tune(task, tuner, measurer, options_of(1000, 1, 20));
  EXPECT_TRUE(result.stopped_early);
  EXPECT_EQ(result.n_measured, 4u * 15 + 10 + 20);  // rows of 15 valid x; optimum is the 70th
}

TEST(Tune, ResumeNeverMeasuresAKnownConfigAgain) {
  Task task = toy_task();
  FakeMeasurer first;
  RandomTuner t1(task.space(), 5);
  std::vector<PastMeasurement> past;
  TuneOptions o1 = options_of(50, 10);
  o1.callbacks.push_back(
      [&](const std::vector<MeasureInput>& in, const std::vector<MeasureResult>& r) {
        for (size_t i = 0; i < in.size(); ++i) past.push_back({in[i].config, r[i]});
      });
  TuneResult r1 = tune(task, t1, first, o1);

  FakeMeasurer second;
  RandomTuner t2(task.space(), 5);  // same seed: would propose the same configs first
  TuneOptions o2 = options_of(50, 10);
  o2.resume = past;
  TuneResult r2 = tune(task, t2, second, o2);
  EXPECT_EQ(r2.n_resumed, 50u);
  EXPECT_EQ(r2.n_measured, 50u);
  std::set<uint64_t> a(first.measured.begin(), first.measured.end());
  for (uint64_t i : second.measured) EXPECT_EQ(a.count(i), 0u) << i;
  // The best of the resumed run is at least as good as the first run's.
  EXPECT_LE(r2.best_result.mean_cost(), r1.best_result.mean_cost());
}

TEST(Tune, DatabaseCallbackRecordsEveryMeasurementAndResumeReadsThem) {
  Task task = toy_task();
  auto dir =
      std::filesystem::temp_directory_path() / ("ktune_tune_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "log.db").string();
  RecordContext ctx{{task.target().key, "19.1.7"}, "test-device", "random", "0.1.0"};
  std::vector<uint64_t> measured_first;
  {
    auto db = tuning_db::Database::open(path);
    FakeMeasurer measurer;
    RandomTuner tuner(task.space(), 11);
    TuneOptions options = options_of(40, 16);
    options.log = database_callback(db, task, ctx);
    TuneResult r = tune(task, tuner, measurer, options);
    measured_first = measurer.measured;
    EXPECT_EQ(db.stats().records, 40);
    EXPECT_EQ(db.stats().failed_records, static_cast<int64_t>(r.errors[ErrorKind::kRun]));
    auto best = db.best(task.workload_key(), ctx.target);
    ASSERT_TRUE(best);
    EXPECT_EQ(static_cast<uint64_t>(best->config_index), r.best_config->index());
    EXPECT_NEAR(best->mean_cost(), r.best_result.mean_cost(), 1e-15);
    EXPECT_EQ(best->tuner, "random");
  }
  {
    auto db = tuning_db::Database::open(path);
    auto past = load_past_measurements(db, task, ctx.target);
    ASSERT_EQ(past.size(), 40u);
    size_t failed = 0;
    for (const auto& p : past) {
      EXPECT_TRUE(std::count(measured_first.begin(), measured_first.end(), p.config.index()));
      failed += !p.result.ok();
      if (!p.result.ok()) {
        EXPECT_EQ(p.result.error, ErrorKind::kRun);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(failed), db.stats().failed_records);
    FakeMeasurer measurer;
    RandomTuner tuner(task.space(), 11);
    TuneOptions options = options_of(40, 16);
    options.resume = past;
    options.log = database_callback(db, task, ctx);
    tune(task, tuner, measurer, options);
    EXPECT_EQ(db.stats().records, 80);
    EXPECT_EQ(db.measured_indices(task.workload_key(), ctx.target).size(), 80u);
  }
  std::filesystem::remove_all(dir);
}

// A re-timed record is resumed at its re-timed median, the figure `ktune best` serves: the log's
// best of a first run, re-timed 3x slower, is no longer the resumed run's best at its first timing.
TEST(Tune, ResumeReadsARetimedRecordAtItsRetimedMedian) {
  Task task = toy_task();
  auto dir =
      std::filesystem::temp_directory_path() / ("ktune_tune_retimed_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "log.db").string();
  RecordContext ctx{{task.target().key, "19.1.7"}, "test-device", "random", "0.1.0"};
  auto db = tuning_db::Database::open(path);
  FakeMeasurer measurer;
  RandomTuner tuner(task.space(), 11);
  TuneOptions options = options_of(20, 10);
  options.log = database_callback(db, task, ctx);
  tune(task, tuner, measurer, options);
  const auto best = db.best(task.workload_key(), ctx.target);
  ASSERT_TRUE(best);
  const double first = best->mean_cost();
  db.retime(best->id, {3 * first, 3 * first, 3 * first});
  size_t seen = 0;
  for (const PastMeasurement& p : load_past_measurements(db, task, ctx.target)) {
    if (static_cast<int64_t>(p.config.index()) != best->config_index) continue;
    ++seen;
    ASSERT_EQ(p.result.costs.size(), 1u);
    EXPECT_DOUBLE_EQ(p.result.mean_cost(), 3 * first);
  }
  EXPECT_EQ(seen, 1u);
  std::filesystem::remove_all(dir);
}

// The log (TuneOptions::log) sees each batch before the tuner does: a failing fit loses nothing.
class RecordingTuner : public RandomTuner {
 public:
  RecordingTuner(const schedule_space::ConfigSpace& space, std::vector<std::string>& events)
      : RandomTuner(space, 4), events_(events) {}
  void update(const std::vector<MeasureInput>& inputs,
              const std::vector<MeasureResult>& results) override {
    events_.push_back("update " + std::to_string(inputs.size()));
    RandomTuner::update(inputs, results);
  }

 private:
  std::vector<std::string>& events_;
};

TEST(Tune, TheLogSeesABatchBeforeTheTunerAndShouldStopEndsTheLoop) {
  Task task = toy_task();
  FakeMeasurer measurer;
  std::vector<std::string> events;
  RecordingTuner tuner(task.space(), events);
  TuneOptions options = options_of(40, 8);
  options.log = [&](const auto& inputs, const auto&) {
    events.push_back("log " + std::to_string(inputs.size()));
  };
  options.callbacks.push_back([&](const auto& inputs, const auto&) {
    events.push_back("after " + std::to_string(inputs.size()));
  });
  size_t polls = 0;
  options.should_stop = [&] { return ++polls > 2; };  // two batches, then stop
  TuneResult r = tune(task, tuner, measurer, options);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.n_measured, 16u);
  EXPECT_EQ(events, (std::vector<std::string>{"log 8", "update 8", "after 8", "log 8", "update 8",
                                              "after 8"}));
}

// The fallback config is a hundred times faster than anything else here.
class FastFallbackMeasurer : public FakeMeasurer {
 public:
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) override {
    std::vector<MeasureResult> out = FakeMeasurer::measure(inputs);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].config.index() == inputs[i].task->fallback_config().index())
        out[i] = make_ok_result({1e-8, 1e-8, 1e-8}, 0.01, 0.02);
    return out;
  }
};

// A session logs the fallback it measures (once per log), so the log's best is never slower than
// it, and the session's own best includes it; the tuner does not measure it again.
TEST(Tune, SessionLogsItsFallbackOnceAndItsBestIncludesIt) {
  Task task = toy_task();
  const uint64_t fallback = task.fallback_config().index();
  ASSERT_GE(fallback, 20u) << "the grid below would reach the fallback by itself";
  auto dir = std::filesystem::temp_directory_path() /
             ("ktune_tune_fallback_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const tuning_db::TargetKey target{task.target().key, "19.1.7"};
  {
    auto db = tuning_db::Database::open((dir / "log.db").string());
    SessionOptions o;
    o.tuner = "grid";
    o.trials = 10;
    o.batch_size = 5;
    o.retime_top = 0;  // counts what the run measures and logs (retime_test re-times)
    FastFallbackMeasurer first;
    SessionReport r = TuningSession(task, db, first, target, o).run();
    EXPECT_EQ(r.result.n_measured, 10u);
    EXPECT_EQ(r.result.n_resumed, 0u);
    EXPECT_EQ(std::count(first.measured.begin(), first.measured.end(), fallback), 1);
    EXPECT_EQ(db.stats().records, 10 + 1);
    ASSERT_TRUE(r.result.best_config);
    EXPECT_EQ(r.result.best_config->index(), fallback);
    EXPECT_TRUE(r.result.best_is_new);
    EXPECT_DOUBLE_EQ(r.result.best_result.mean_cost(), 1e-8);
    const auto best = db.best(task.workload_key(), target);
    ASSERT_TRUE(best);
    EXPECT_EQ(best->config_index, static_cast<int64_t>(fallback));
    EXPECT_EQ(best->tuner, "fallback");
    EXPECT_EQ(best->run_id, 0);  // a job's progress counts its trials only
    const nlohmann::json summary = summary_json(task, target, r);
    EXPECT_DOUBLE_EQ(summary["speedup_over_fallback"].get<double>(), 1.0);

    // A second run measures the fallback again (its speed-up), but the log holds it once: it
    // does not claim it either (a claim refused would say the log has it, for no config of its
    // search).
    FastFallbackMeasurer second;
    {
      testing_log::WarningCapture log;
      r = TuningSession(task, db, second, target, o).run();
      for (const std::string& line : log.lines("info"))
        EXPECT_EQ(line.find("in the log already"), std::string::npos) << line;
    }
    EXPECT_EQ(r.result.n_measured, 10u);
    EXPECT_EQ(r.result.n_resumed, 11u);
    EXPECT_EQ(std::count(second.measured.begin(), second.measured.end(), fallback), 1);
    EXPECT_EQ(db.stats().records, 20 + 1);
    EXPECT_FALSE(r.result.best_is_new);
  }
  std::filesystem::remove_all(dir);
}

// A session claims each config before measuring it: configs another live run claimed are skipped
// (like measured ones), an expired claim is taken over, and the session's own claims are released.
TEST(Tune, SessionSkipsConfigsClaimedByAnotherRunAndTakesOverExpiredClaims) {
  Task task = toy_task();
  auto dir =
      std::filesystem::temp_directory_path() / ("ktune_tune_claims_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "log.db").string();
  const tuning_db::TargetKey target{task.target().key, "19.1.7"};
  {
    auto db = tuning_db::Database::open(path);
    tuning_db::ClaimOwner other = tuning_db::ClaimOwner::this_process();  // alive: this process
    ASSERT_EQ(
        tuning_db::ClaimStore(db).claim(task.workload_key(), target, {1, 2, 3}, other, 3600).size(),
        3u);
    tuning_db::ClaimOwner stale = tuning_db::ClaimOwner::this_process();
    ASSERT_EQ(tuning_db::ClaimStore(db).claim(task.workload_key(), target, {4}, stale, 0.05).size(),
              1u);
    ::usleep(100 * 1000);

    FakeMeasurer measurer;
    SessionOptions o;
    o.tuner = "grid";
    o.trials = 10;
    o.batch_size = 4;
    o.measure_fallback = false;
    o.retime_top = 0;  // lists what the search measures (retime_test re-times)
    SessionReport report = TuningSession(task, db, measurer, target, o).run();
    EXPECT_EQ(report.result.n_measured, 10u);
    EXPECT_EQ(report.result.n_claimed_elsewhere, 3u);
    EXPECT_EQ(measurer.measured, (std::vector<uint64_t>{0, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
    EXPECT_EQ(db.measured_indices(task.workload_key(), target),
              (std::vector<int64_t>{0, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
    // Only the other run's claims are left.
    EXPECT_EQ(db.stats().claims, 3);
    EXPECT_EQ(tuning_db::ClaimStore(db).release_all(other), 3);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ktune::tuner
