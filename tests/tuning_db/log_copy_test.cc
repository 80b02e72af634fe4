// Tests of copy_log's step thread choices on both backends: SQLite -> the backend -> SQLite keeps
// every row as written (steps, medians, the time it was measured), a target holding choices is
// refused without append, append keeps the target's choice of the same model, target and thread
// count and copies the others, and a source of the schema before the table copies none.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "support/error.h"
#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/log_copy.h"
#include "tuning_db/schema.h"
#include "tuning_db/step_threads_store.h"

namespace ktune::tuning_db {
namespace {

class LogCopyOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, LogCopyOn, testing::kBothBackends, testing::backend_test_name);

const std::string kX86 = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
const std::string kArm = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1";

// A choice of three steps; `seed` varies its layers' caps and medians.
StepThreadsRow choice(const std::string& key, const std::string& target, int threads, int seed) {
  StepThreadsRow row;
  row.model_key = key;
  row.target = target;
  row.threads = threads;
  row.steps = {{"conv1+relu1", seed % 2, 2.5e-5 * seed, 9.0e-6 * seed},
               {"dw2", 1, 7.0e-6 + 1e-7 * seed, 3.0e-6},
               {"fc", 0, 1.25e-4, 2.0e-4 + 1e-6 * seed}};
  row.uncapped_s = 2.75e-3 + 1e-5 * seed;
  row.capped_s = seed % 2 ? 2.5e-3 : 0;
  return row;
}

// The rows the tests write, by (model, target, threads).
std::vector<StepThreadsRow> written_rows() {
  return {choice("onnx-1", kX86, 2, 1), choice("onnx-1", kX86, 4, 2), choice("onnx-1", kArm, 2, 3),
          choice("onnx-2", kX86, 8, 5)};
}

// `log` holds `expected` exactly as stored (measured_at included).
void expect_row(Database& log, const StepThreadsRow& expected) {
  SCOPED_TRACE(expected.model_key + " " + expected.target + " at " +
               std::to_string(expected.threads));
  const std::optional<StepThreadsRow> got =
      StepThreadsStore(log).find(expected.model_key, expected.target, expected.threads);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->threads, expected.threads);
  ASSERT_EQ(got->steps.size(), expected.steps.size());
  for (size_t k = 0; k < got->steps.size(); ++k) {
    EXPECT_EQ(got->steps[k].layer, expected.steps[k].layer) << k;
    EXPECT_EQ(got->steps[k].max_threads, expected.steps[k].max_threads) << k;
    EXPECT_DOUBLE_EQ(got->steps[k].all_s, expected.steps[k].all_s) << k;
    EXPECT_DOUBLE_EQ(got->steps[k].one_s, expected.steps[k].one_s) << k;
  }
  EXPECT_DOUBLE_EQ(got->uncapped_s, expected.uncapped_s);
  EXPECT_DOUBLE_EQ(got->capped_s, expected.capped_s);
  EXPECT_DOUBLE_EQ(got->measured_at, expected.measured_at);
}

// Saves `rows` into `log` and returns them as stored (with the time save gave them).
std::vector<StepThreadsRow> save_all(Database& log, const std::vector<StepThreadsRow>& rows) {
  StepThreadsStore store(log);
  std::vector<StepThreadsRow> stored;
  for (const StepThreadsRow& r : rows) {
    store.save(r);
    stored.push_back(*store.find(r.model_key, r.target, r.threads));
  }
  return stored;
}

TEST_P(LogCopyOn, StepThreadChoicesGoThereAndBackAsWritten) {
  testing::TempDir dir;
  const std::string a = dir.file("a.db"), b = dir.file("b.db");
  std::vector<StepThreadsRow> stored;
  {
    Database source = Database::open(a);
    stored = save_all(source, written_rows());
  }
  const std::string there = fresh();
  {
    OpenOptions read_only;
    read_only.read_only = true;
    Database from = Database::open(a, read_only);
    Database to = Database::open(there);
    const CopyReport r = copy_log(from, to, false);
    EXPECT_EQ(r.step_threads, 4);
    EXPECT_EQ(r.step_threads_present, 0);
    EXPECT_EQ(r.records, 0);
    for (const StepThreadsRow& row : stored) expect_row(to, row);
    // Another thread count than those measured finds the one of the most threads, as written.
    EXPECT_EQ(StepThreadsStore(to).find("onnx-1", kX86)->threads, 4);
    EXPECT_FALSE(StepThreadsStore(to).find("onnx-1", kX86, 8).has_value());
  }
  {
    Database from = Database::open(there, {.create = false});
    Database to = Database::open(b);
    EXPECT_EQ(copy_log(from, to, false).step_threads, 4);
    for (const StepThreadsRow& row : stored) expect_row(to, row);
  }
}

TEST_P(LogCopyOn, AppendKeepsTheTargetsChoiceAndCopiesTheOthers) {
  testing::TempDir dir;
  const std::string a = dir.file("a.db");
  const std::string there = fresh();
  std::vector<StepThreadsRow> stored;
  {
    Database source = Database::open(a);
    stored = save_all(source, written_rows());
    Database to = Database::open(there);
    copy_log(source, to, false);
  }
  // The source measures onnx-1 at 2 threads again (other caps and medians) and a new model.
  std::vector<StepThreadsRow> again;
  {
    Database source = Database::open(a);
    again = save_all(source, {choice("onnx-1", kX86, 2, 6), choice("onnx-3", kArm, 4, 7)});
    Database to = Database::open(there);
    try {
      copy_log(source, to, false);
      FAIL() << "copied into a log that holds step thread choices without append";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("4 step_threads"), std::string::npos) << e.what();
    }
    const CopyReport r = copy_log(source, to, true);
    EXPECT_EQ(r.step_threads, 1);
    EXPECT_EQ(r.step_threads_present, 4);
    expect_row(to, stored[0]);  // the target's choice of onnx-1 at 2 threads stays
    for (size_t i = 1; i < stored.size(); ++i) expect_row(to, stored[i]);
    expect_row(to, again[1]);
  }
}

TEST_P(LogCopyOn, ASourceOfTheSchemaBeforeTheTableCopiesNoChoice) {
  testing::TempDir dir;
  const std::string old = dir.file("v7.db");
  testing::write_old_log(old, kStepThreadsSchemaVersion - 1, "");
  OpenOptions read_only;
  read_only.read_only = true;
  Database from = Database::open(old, read_only);
  Database to = Database::open(fresh());
  const CopyReport r = copy_log(from, to, false);
  EXPECT_EQ(r.step_threads, 0);
  EXPECT_EQ(r.step_threads_present, 0);
  EXPECT_FALSE(StepThreadsStore(to).find("onnx-1", kX86).has_value());
}

}  // namespace
}  // namespace ktune::tuning_db
