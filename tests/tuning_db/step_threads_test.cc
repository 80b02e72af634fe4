// Tests of StepThreadsStore on both backends: a choice reads back as saved, a second save of the
// same model, target and count replaces it, the look-up by count and by the most threads, other
// models and targets kept apart, bad rows refused; and a log of the schema before the table
// (read-only, and migrated) has no choice.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "support/error.h"
#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/schema.h"
#include "tuning_db/step_threads_store.h"

namespace ktune::tuning_db {
namespace {

class StepThreadsOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, StepThreadsOn, testing::kBothBackends,
                         testing::backend_test_name);

StepThreadsRow choice(const std::string& key, int threads, int first_cap) {
  StepThreadsRow row;
  row.model_key = key;
  row.target = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
  row.threads = threads;
  row.steps = {{"conv1+bn1+relu1", first_cap, 2.5e-5, 9.0e-6}, {"fc", 0, 1.25e-4, 2.0e-4}};
  row.uncapped_s = 2.75e-3;
  row.capped_s = 2.5e-3;
  return row;
}

TEST_P(StepThreadsOn, AChoiceReadsBackAndASecondSaveReplacesIt) {
  Database db = Database::open(fresh("steps.db"));
  StepThreadsStore store(db);
  const StepThreadsRow saved = choice("onnx-1", 2, 1);
  EXPECT_FALSE(store.find(saved.model_key, saved.target).has_value());
  store.save(saved);
  std::optional<StepThreadsRow> got = store.find(saved.model_key, saved.target, 2);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->model_key, "onnx-1");
  EXPECT_EQ(got->target, saved.target);
  EXPECT_EQ(got->threads, 2);
  ASSERT_EQ(got->steps.size(), 2u);
  EXPECT_EQ(got->steps[0].layer, "conv1+bn1+relu1");
  EXPECT_EQ(got->steps[0].max_threads, 1);
  EXPECT_DOUBLE_EQ(got->steps[0].all_s, 2.5e-5);
  EXPECT_DOUBLE_EQ(got->steps[0].one_s, 9.0e-6);
  EXPECT_EQ(got->steps[1].layer, "fc");
  EXPECT_EQ(got->steps[1].max_threads, 0);
  EXPECT_DOUBLE_EQ(got->steps[1].all_s, 1.25e-4);
  EXPECT_DOUBLE_EQ(got->uncapped_s, 2.75e-3);
  EXPECT_DOUBLE_EQ(got->capped_s, 2.5e-3);
  EXPECT_GT(got->measured_at, 1.7e9);

  store.save(choice("onnx-1", 2, 0));
  got = store.find("onnx-1", saved.target, 2);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->steps[0].max_threads, 0);
}

TEST_P(StepThreadsOn, ChoicesAreFoundByCountOrTheMostThreadsAndKeptApartByModelAndTarget) {
  Database db = Database::open(fresh("steps.db"));
  StepThreadsStore store(db);
  store.save(choice("onnx-1", 2, 1));
  store.save(choice("onnx-1", 4, 0));
  StepThreadsRow other = choice("onnx-2", 8, 1);
  store.save(other);
  const std::string target = other.target;
  EXPECT_EQ(store.find("onnx-1", target, 2)->steps[0].max_threads, 1);
  EXPECT_EQ(store.find("onnx-1", target, 4)->steps[0].max_threads, 0);
  EXPECT_EQ(store.find("onnx-1", target)->threads, 4);
  EXPECT_FALSE(store.find("onnx-1", target, 3).has_value());
  EXPECT_EQ(store.find("onnx-2", target)->threads, 8);
  EXPECT_FALSE(store.find("onnx-1", "llvm -mtriple=aarch64-linux-gnu").has_value());
  EXPECT_FALSE(store.find("onnx-3", target).has_value());
}

TEST_P(StepThreadsOn, ARowWithoutKeyTargetOrACountAboveOneIsRefused) {
  Database db = Database::open(fresh("steps.db"));
  StepThreadsStore store(db);
  for (StepThreadsRow bad : {choice("", 2, 1), choice("onnx-1", 1, 1), choice("onnx-1", 0, 1)}) {
    try {
      store.save(bad);
      FAIL() << "saved a row of model '" << bad.model_key << "' at " << bad.threads;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
  }
  StepThreadsRow no_target = choice("onnx-1", 2, 1);
  no_target.target.clear();
  EXPECT_THROW(store.save(no_target), Error);
  EXPECT_FALSE(store.find("onnx-1", choice("onnx-1", 2, 1).target).has_value());
}

TEST(StepThreadsSchema, ALogOfTheVersionBeforeHasNoChoiceReadOnlyAndOneTableAfterMigrating) {
  testing::TempDir dir;
  const std::string path = dir.file("v7.db");
  testing::write_old_log(path, kStepThreadsSchemaVersion - 1, "");
  {
    OpenOptions read_only;
    read_only.read_only = true;
    Database db = Database::open(path, read_only);
    EXPECT_EQ(db.opened_schema_version(), kStepThreadsSchemaVersion - 1);
    EXPECT_FALSE(StepThreadsStore(db).find("onnx-1", "llvm").has_value());
  }
  Database db = Database::open(path);
  EXPECT_EQ(db.stats().schema_version, kSchemaVersion);
  StepThreadsStore store(db);
  store.save(choice("onnx-1", 2, 1));
  EXPECT_EQ(store.find("onnx-1", choice("onnx-1", 2, 1).target)->threads, 2);
}

}  // namespace
}  // namespace ktune::tuning_db
