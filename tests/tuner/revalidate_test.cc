// Tests revalidate(): after a toolchain change, the fastest configs of other LLVM versions are
// measured again and logged as records of this version, beside the old ones, once.
#include "tuner/revalidate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "schedule_space/task.h"
#include "tuner/db_log.h"

namespace ktune::tuner {
namespace {

const std::string kTargetKey = "llvm -mtriple=x86_64-linux-gnu -mcpu=revalidatetest";

schedule_space::TargetTraits traits() {
  return schedule_space::make_target_traits(kTargetKey, "x86_64-linux-gnu", 256, 2);
}

schedule_space::Task matmul(int n) {
  const std::string s = std::to_string(n);
  return schedule_space::Task::create("matmul", {{"M", s}, {"N", s}, {"K", s}}, traits());
}

// Cost 1 ms per config index + 1 (so the old ranking is known); remembers what it measured.
class FakeMeasurer final : public Measurer {
 public:
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) override {
    std::vector<MeasureResult> out;
    for (const auto& in : inputs) {
      measured.push_back(static_cast<int64_t>(in.config.index()));
      out.push_back(make_ok_result({now_cost}));
    }
    return out;
  }
  std::vector<int64_t> measured;
  double now_cost = 5e-4;
};

struct TempLog {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("ktune-revalidate-" + std::to_string(::getpid()) + ".db");
  ~TempLog() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  }
};

// Logs successful records of the first `n` valid configs with `llvm`, config i at (i + 1) ms.
std::vector<int64_t> log_old(tuning_db::Database& db, const schedule_space::Task& task, size_t n,
                             const std::string& llvm) {
  RecordContext context;
  context.target = {kTargetKey, llvm};
  context.tuner = "random";
  context.ktune_version = "0.1.0";
  std::vector<tuning_db::Record> records;
  std::vector<int64_t> indices;
  for (uint64_t i = 0; i < task.space().size() && indices.size() < n; ++i) {
    if (!task.space().is_valid(i)) continue;
    records.push_back(make_record(task, task.space().get(i),
                                  make_ok_result({1e-3 * double(indices.size() + 1)}), context, 0));
    indices.push_back(static_cast<int64_t>(i));
  }
  db.add(records);
  return indices;
}

TEST(Revalidate, TheFastestOldConfigsAreMeasuredAgainOnceAndLoggedBesideTheOld) {
  TempLog log;
  auto db = tuning_db::Database::open(log.path.string());
  const auto a = matmul(32), b = matmul(16);
  const auto old_a = log_old(db, a, 6, "18.1.0");
  log_old(db, b, 3, "19.1.7");  // already this toolchain's: nothing to do

  FakeMeasurer measurer;
  RevalidateOptions options;
  options.top_k = 4;
  options.llvm_version = "19.1.7";
  options.ktune_version = "0.2.0";
  const auto done = revalidate(db, measurer, traits(), options);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].workload_key, a.workload_key());
  EXPECT_EQ(done[0].remeasured, 4);
  EXPECT_EQ(done[0].failed, 0);
  EXPECT_DOUBLE_EQ(done[0].old_best_s, 1e-3);
  EXPECT_DOUBLE_EQ(done[0].new_best_s, 5e-4);
  EXPECT_EQ(done[0].old_llvm_version, "18.1.0");
  // The four fastest old configs, fastest first.
  EXPECT_EQ(measurer.measured, (std::vector<int64_t>(old_a.begin(), old_a.begin() + 4)));

  // Beside the old: the log has both versions; this version's records are the new numbers.
  const auto now = db.top_k(a.workload_key(), {kTargetKey, "19.1.7"}, 10, tuning_db::RecordQuery{});
  ASSERT_EQ(now.size(), 4u);
  for (const auto& r : now) {
    EXPECT_EQ(r.tuner, "revalidate");
    EXPECT_DOUBLE_EQ(r.mean_cost(), 5e-4);
  }
  EXPECT_EQ(db.top_k(a.workload_key(), {kTargetKey, "18.1.0"}, 10, tuning_db::RecordQuery{}).size(),
            6u);

  // Again: the next two old configs (the first four are this toolchain's now), then nothing.
  measurer.measured.clear();
  const auto again = revalidate(db, measurer, traits(), options);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(measurer.measured, (std::vector<int64_t>{old_a[4], old_a[5]}));
  measurer.measured.clear();
  EXPECT_TRUE(revalidate(db, measurer, traits(), options).empty());
  EXPECT_TRUE(measurer.measured.empty());
}

}  // namespace
}  // namespace ktune::tuner
