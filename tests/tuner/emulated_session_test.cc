// Tests of a tuning session on an emulated device (SessionOptions::emulated) and of results a
// measurer marks emulated (MeasureResult::emulated): the records are marked, and resume and the
// transfer history use only records of the run's emulated-ness.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "schedule_space/task.h"
#include "schedule_space/workload.h"
#include "tuner/db_log.h"
#include "tuner/model_log.h"
#include "tuner/tuning_session.h"
#include "tuning_db/database.h"
#include "tuning_db/model_store.h"

namespace ktune::tuner {
namespace {

schedule_space::Task matmul(int n) {
  const std::string s = std::to_string(n);
  return schedule_space::Task::create(
      "matmul", {{"M", s}, {"N", s}, {"K", s}},
      schedule_space::make_target_traits("llvm -mtriple=x86_64-linux-gnu -mcpu=emutest",
                                         "x86_64-linux-gnu", 256, 2));
}

const tuning_db::TargetKey kTarget{"llvm -mtriple=x86_64-linux-gnu -mcpu=emutest", "19.1.7"};

// Costs from a fixed hash of the config index; remembers what it measured. mark_emulated: marks
// every result emulated, as a measurer over an emulated device would.
class FakeMeasurer final : public Measurer {
 public:
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) override {
    std::vector<MeasureResult> out;
    for (const auto& in : inputs) {
      measured.push_back(static_cast<int64_t>(in.config.index()));
      const double c = cost(static_cast<int64_t>(in.config.index()));
      out.push_back(make_ok_result({c, c}));
      out.back().emulated = mark_emulated;
    }
    return out;
  }
  static double cost(int64_t index) {
    return 1e-4 * static_cast<double>(1 + (index * 2654435761) % 97);
  }
  std::vector<int64_t> measured;
  bool mark_emulated = false;
};

// The first n valid config indices of the task's space, in order.
std::vector<int64_t> first_valid(const schedule_space::Task& task, size_t n) {
  std::vector<int64_t> out;
  for (uint64_t i = 0; i < task.space().size() && out.size() < n; ++i)
    if (task.space().is_valid(i)) out.push_back(static_cast<int64_t>(i));
  return out;
}

// Logs successful records of these configs, real or emulated.
void log_configs(tuning_db::Database& db, const schedule_space::Task& task,
                 const std::vector<int64_t>& indices, bool emulated) {
  FakeMeasurer m;
  std::vector<MeasureInput> inputs;
  for (int64_t i : indices) inputs.push_back({&task, task.space().get(static_cast<uint64_t>(i))});
  const auto results = m.measure(inputs);
  const RecordContext context{kTarget, "rk3399", "seeded", "test", 0, emulated};
  std::vector<tuning_db::Record> records;
  for (size_t i = 0; i < inputs.size(); ++i)
    records.push_back(make_record(task, inputs[i].config, results[i], context, 0));
  db.add(records);
}

class EmulatedSession : public ::testing::Test {
 protected:
  EmulatedSession() {
    static std::atomic<int> counter{0};
    dir_ =
        std::filesystem::temp_directory_path() /
        ("ktune_emulated_session_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
  }
  ~EmulatedSession() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  static SessionOptions options(const std::string& tuner, size_t trials, bool emulated) {
    SessionOptions o;
    o.tuner = tuner;
    o.trials = trials;
    o.batch_size = trials;
    o.seed = 11;
    o.measure_fallback = false;
    o.retime_top = 0;  // lists what the search measures (retime_test re-times)
    o.emulated = emulated;
    o.device_key = "rk3399";
    return o;
  }

  std::filesystem::path dir_;
};

// Real records of v0..v2 and emulated ones of v3..v5: a real run re-measures v3..v5, an emulated
// run re-measures v0..v2, and each run's records carry its emulated-ness.
TEST_F(EmulatedSession, ResumeCountsOnlyRecordsOfTheRunsEmulatedness) {
  const auto task = matmul(16);
  const auto v = first_valid(task, 8);
  ASSERT_EQ(v.size(), 8u);
  auto db = tuning_db::Database::open(file("log.db"));
  log_configs(db, task, {v[0], v[1], v[2]}, false);
  log_configs(db, task, {v[3], v[4], v[5]}, true);

  FakeMeasurer real;
  SessionReport r = TuningSession(task, db, real, kTarget, options("grid", 4, false)).run();
  EXPECT_EQ(r.result.n_resumed, 3u);
  EXPECT_EQ(real.measured, (std::vector<int64_t>{v[3], v[4], v[5], v[6]}));
  EXPECT_EQ(db.measured_indices(task.workload_key(), kTarget),
            (std::vector<int64_t>{v[0], v[1], v[2], v[3], v[4], v[5], v[6]}));
  EXPECT_EQ(db.measured_indices(task.workload_key(), kTarget, true),
            (std::vector<int64_t>{v[3], v[4], v[5]}));

  FakeMeasurer emulated;
  r = TuningSession(task, db, emulated, kTarget, options("grid", 4, true)).run();
  EXPECT_EQ(r.result.n_resumed, 3u);
  EXPECT_EQ(emulated.measured, (std::vector<int64_t>{v[0], v[1], v[2], v[6]}));
  EXPECT_EQ(db.measured_indices(task.workload_key(), kTarget, true),
            (std::vector<int64_t>{v[0], v[1], v[2], v[3], v[4], v[5], v[6]}));
  const auto st = db.stats();
  EXPECT_EQ(st.records, 14);
  EXPECT_EQ(st.emulated_records, 7);

  // A measurer that marks its results: a session not told it is emulated still logs them so.
  FakeMeasurer marking;
  marking.mark_emulated = true;
  TuningSession(task, db, marking, kTarget, options("grid", 1, false)).run();
  ASSERT_EQ(marking.measured, (std::vector<int64_t>{v[7]}));
  EXPECT_EQ(db.measured_indices(task.workload_key(), kTarget, true).back(), v[7]);
  EXPECT_EQ(db.measured_indices(task.workload_key(), kTarget).back(), v[6]);
  // The real best is the fastest of v0..v6 (same costs real or emulated); with emulated records
  // eligible, the fastest of v0..v7.
  double real_min = 1, all_min = 1;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i < 7) real_min = std::min(real_min, FakeMeasurer::cost(v[i]));
    all_min = std::min(all_min, FakeMeasurer::cost(v[i]));
  }
  const auto real_best = db.best(task.workload_key(), kTarget);
  ASSERT_TRUE(real_best.has_value());
  EXPECT_FALSE(real_best->emulated);
  EXPECT_DOUBLE_EQ(real_best->mean_cost(), real_min);
  tuning_db::RecordQuery with;
  with.include_emulated = true;
  EXPECT_DOUBLE_EQ(db.best(task.workload_key(), kTarget, with)->mean_cost(), all_min);
}

// Transfer learning: emulated records of another matmul shape do not seed a real run (its first
// plan is the same as on an empty log), but do seed an emulated run (its first plan differs).
TEST_F(EmulatedSession, TransferUsesOnlyTheHistoryOfTheRunsEmulatedness) {
  const auto other = matmul(32);
  std::vector<int64_t> history;
  for (uint64_t i = 0; i < other.space().size() && history.size() < 24; i += 7)
    if (other.space().is_valid(i)) history.push_back(static_cast<int64_t>(i));
  ASSERT_EQ(history.size(), 24u);
  const auto task = matmul(16);

  auto first_plan = [&](const std::string& log, bool history_emulated, bool run_emulated) {
    auto db = tuning_db::Database::open(file(log));
    log_configs(db, other, history, history_emulated);
    FakeMeasurer m;
    TuningSession(task, db, m, kTarget, options("xgb", 8, run_emulated)).run();
    return m.measured;
  };
  auto empty_log = [&] {
    auto db = tuning_db::Database::open(file("empty.db"));
    FakeMeasurer m;
    TuningSession(task, db, m, kTarget, options("xgb", 8, false)).run();
    return m.measured;
  };
  const auto untaught = empty_log();
  ASSERT_EQ(untaught.size(), 8u);
  // Emulated history, real run: as if there were none.
  EXPECT_EQ(first_plan("a.db", true, false), untaught);
  // Emulated history, emulated run: the model of that history picks the plan.
  EXPECT_NE(first_plan("b.db", true, true), untaught);
  // Real history, real run: likewise (the control: transfer does change the plan).
  EXPECT_NE(first_plan("c.db", false, false), untaught);
}

// A model fitted on emulated timings is saved apart from the model of real ones.
TEST_F(EmulatedSession, AModelOfEmulatedTimingsIsSavedApart) {
  const auto task = matmul(16);
  auto fitted_log = [&](const std::string& log, bool emulated) {
    auto db = tuning_db::Database::open(file(log));
    FakeMeasurer m;
    EXPECT_TRUE(
        TuningSession(task, db, m, kTarget, options("xgb", 16, emulated)).run().model_saved);
    return db;
  };
  auto emulated_log = fitted_log("emulated.db", true);
  auto real_log = fitted_log("real.db", false);
  auto saved = tuning_db::ModelStore(emulated_log).load(kXgbEmulatedModelName, "matmul", kTarget);
  ASSERT_TRUE(saved.has_value());
  EXPECT_EQ(saved->info.metadata["emulated"], true);
  EXPECT_FALSE(
      tuning_db::ModelStore(emulated_log).load(kXgbModelName, "matmul", kTarget).has_value());
  EXPECT_TRUE(tuning_db::ModelStore(real_log).load(kXgbModelName, "matmul", kTarget).has_value());
  EXPECT_FALSE(
      tuning_db::ModelStore(real_log).load(kXgbEmulatedModelName, "matmul", kTarget).has_value());
}

}  // namespace
}  // namespace ktune::tuner
