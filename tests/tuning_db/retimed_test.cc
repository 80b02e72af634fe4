// Tests of the re-timing and spread columns of the log: Database::retime replaces a record's
// figure (best/top-k and the summaries rank by it), refuses what cannot be re-timed, and a log of
// schema version 5 migrates with its noisy records flagged (and stays readable read-only).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/report.h"
#include "tuning_db/schema.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {
namespace {

using testing::TempDir;

// Re-timing runs on both backends.
class RetimedOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, RetimedOn, testing::kBothBackends, testing::backend_test_name);

// Three records of workload "mm" on `target`: config 1 at 0.5 s (twice), config 2 at 0.75 s and
// config 3 failed.
std::vector<Record> three_records(const TargetKey& target) {
  Record r;
  r.workload_key = "mm";
  r.template_name = "matmul";
  r.flop = 2e9;
  r.target = target;
  r.config = {{"index", 1}, {"entity", nlohmann::json::array()}};
  r.config_index = 1;
  r.costs = {0.5, 0.5};
  Record other = r;
  other.config_index = 2;
  other.config["index"] = 2;
  other.costs = {0.75};
  Record failed = r;
  failed.config_index = 3;
  failed.costs = {};
  failed.error = ErrorKind::kRun;
  return {r, other, failed};
}

TEST_P(RetimedOn, RetimeReplacesTheFigureAndRefusesWhatCannotBeRetimed) {
  Database db = Database::open(fresh("log.db"));
  const TargetKey target{"llvm", "19"};
  const auto ids = db.add(three_records(target));
  EXPECT_EQ(db.best("mm", target)->config_index, 1);

  db.retime(ids[0], {1.0, 0.9, 3.0});  // median 1.0, spread 210 %: now behind config 2
  const auto best = db.best("mm", target);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config_index, 2);
  const auto top = db.top_k("mm", target, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[1].costs, (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(top[1].retimed_costs, (std::vector<double>{1.0, 0.9, 3.0}));
  EXPECT_DOUBLE_EQ(top[1].cost(), 1.0);
  EXPECT_DOUBLE_EQ(top[1].gflops(), 2.0);
  EXPECT_TRUE(top[1].noisy());
  const auto summary = db.summaries().at(0);
  EXPECT_DOUBLE_EQ(summary.best_cost, 0.75);
  EXPECT_EQ(db.stats().retimed_records, 1);
  EXPECT_EQ(db.stats().noisy_records, 1);
  // The report ranks by the figure too, and marks the re-timed, noisy one.
  const Report report = build_report(db);
  ASSERT_EQ(report.workloads.size(), 1u);
  const WorkloadReport& w = report.workloads[0];
  EXPECT_DOUBLE_EQ(w.best_cost, 0.75);
  EXPECT_FALSE(w.best_noisy);
  EXPECT_EQ(w.noisy_records, 1);
  ASSERT_EQ(w.top.size(), 2u);
  EXPECT_EQ(w.top[1].config_index, 1);
  EXPECT_DOUBLE_EQ(w.top[1].mean_cost, 1.0);
  EXPECT_TRUE(w.top[1].retimed);
  EXPECT_TRUE(w.top[1].noisy);
  EXPECT_EQ(report.stats.noisy_records, 1);

  // A later re-timing replaces the earlier one, and the flag follows it.
  db.retime(ids[0], {0.25, 0.25});
  EXPECT_EQ(db.best("mm", target)->config_index, 1);
  EXPECT_DOUBLE_EQ(db.best("mm", target)->cost(), 0.25);
  EXPECT_EQ(db.stats().noisy_records, 0);

  auto kind_of = [&](int64_t id, const std::vector<double>& rounds) {
    try {
      db.retime(id, rounds);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kInternal;
  };
  EXPECT_EQ(kind_of(ids[2], {1.0}), ErrorKind::kInvalidArgument);  // a failure
  EXPECT_EQ(kind_of(12345, {1.0}), ErrorKind::kNotFound);
  EXPECT_EQ(kind_of(ids[0], {}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of(ids[0], {-1.0}), ErrorKind::kInvalidArgument);
  EXPECT_DOUBLE_EQ(db.best("mm", target)->cost(), 0.25);  // untouched by the refusals
}

TEST_P(RetimedOn, ALineWithABadRetimingIsRejected) {
  Record r;
  r.workload_key = "mm";
  r.template_name = "matmul";
  r.target = {"llvm", "19"};
  r.config = {{"index", 1}, {"entity", nlohmann::json::array()}};
  r.costs = {0.5};
  r.retimed_costs = {0.25, 0.5, 0.75};
  EXPECT_EQ(from_json(to_json(r)).retimed_costs, r.retimed_costs);
  nlohmann::json line = to_json(r);
  line["meta"]["retimed"] = "fast";
  EXPECT_THROW(from_json(line), Error);
  line["meta"]["retimed"] = {0.1, -0.2};
  EXPECT_THROW(from_json(line), Error);
}

// A record another device disagreed with is disputed: best, top_k and config_best pass over it
// unless asked, the stats count it, and clearing the flag serves it again.
TEST_P(RetimedOn, ADisputedRecordIsNotServedUntilSettled) {
  Database db = Database::open(fresh("log.db"));
  const TargetKey target{"llvm", "19"};
  const auto ids = db.add(three_records(target));

  db.set_disputed(ids[0], true);
  EXPECT_EQ(db.best("mm", target)->config_index, 2);
  EXPECT_EQ(db.top_k("mm", target, 5).size(), 1u);
  EXPECT_FALSE(db.config_best("mm", target, 1, RecordQuery{}));
  RecordQuery all;
  all.include_disputed = true;
  const auto top = db.top_k("mm", target, 5, all);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].config_index, 1);
  EXPECT_TRUE(top[0].disputed);
  EXPECT_FALSE(top[1].disputed);
  EXPECT_TRUE(db.config_best("mm", target, 1, all));
  EXPECT_EQ(db.stats().disputed_records, 1);
  EXPECT_EQ(to_json(top[0])["meta"]["disputed"], true);
  EXPECT_TRUE(from_json(to_json(top[0])).disputed);
  EXPECT_FALSE(to_json(top[1])["meta"].contains("disputed"));

  db.set_disputed(ids[0], false);
  EXPECT_EQ(db.best("mm", target)->config_index, 1);
  EXPECT_EQ(db.stats().disputed_records, 0);
  try {
    db.set_disputed(ids[2], true);
    ADD_FAILURE() << "a failed record was marked disputed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
  EXPECT_THROW(db.set_disputed(ids[2] + 100, true), Error);
}

// A log of schema version 8 (before the flag), read-only: every record is served as before.
TEST(Retimed, AVersionEightLogHasNoDisputedRecord) {
  TempDir dir;
  const std::string path = dir.file("v8.db");
  testing::write_old_log(
      path, 8,
      "INSERT INTO records(workload_id, target_id, device_id, config_index, config, costs, "
      "mean_cost, error_kind, created_at) VALUES "
      "(1, 1, 1, 5, '{\"index\":5,\"entity\":[]}', '[0.5]', 0.5, '', 0);");
  const TargetKey target{"llvm", "19"};
  {
    Database reader = Database::open(path, {.read_only = true});
    EXPECT_EQ(reader.opened_schema_version(), 8);
    ASSERT_TRUE(reader.best("mm", target));
    EXPECT_FALSE(reader.best("mm", target)->disputed);
    EXPECT_EQ(reader.stats().disputed_records, 0);
  }
  Database db = Database::open(path);
  EXPECT_TRUE(db.check().ok());
  const auto best = db.best("mm", target);
  ASSERT_TRUE(best);
  db.set_disputed(best->id, true);
  EXPECT_FALSE(db.best("mm", target));
}

// A log of schema version 5: read-only, nothing is re-timed or flagged; migrated, the records
// whose timings spread are flagged and the others not.
TEST(Retimed, AVersionFiveLogMigratesWithItsNoisyRecordsFlagged) {
  TempDir dir;
  const std::string path = dir.file("v5.db");
  testing::write_old_log(
      path, 5,
      "INSERT INTO records(workload_id, target_id, device_id, config_index, config, costs, "
      "mean_cost, error_kind, created_at) VALUES "
      "(1, 1, 1, 5, '{\"index\":5,\"entity\":[]}', '[0.5]', 0.5, '', 0),"
      "(1, 1, 1, 6, '{\"index\":6,\"entity\":[]}', '[0.25,0.75]', 0.5, '', 0),"
      "(1, 1, 1, 7, '{\"index\":7,\"entity\":[]}', '[0.125,0.13]', 0.1275, '', 0),"
      "(1, 1, 1, 8, '{\"index\":8,\"entity\":[]}', '[]', NULL, 'run', 0);");
  const TargetKey target{"llvm", "19"};
  {
    Database reader = Database::open(path, {.read_only = true});
    EXPECT_EQ(reader.opened_schema_version(), 5);
    EXPECT_EQ(reader.best("mm", target)->config_index, 7);
    EXPECT_TRUE(reader.best("mm", target)->retimed_costs.empty());
    EXPECT_EQ(reader.stats().retimed_records, 0);
    EXPECT_EQ(reader.stats().noisy_records, 0);
  }
  Database db = Database::open(path);
  EXPECT_EQ(db.opened_schema_version(), 5);
  EXPECT_TRUE(db.check().ok());
  EXPECT_EQ(db.stats().noisy_records, 1);  // config 6: 0.25 .. 0.75 around 0.5
  EXPECT_EQ(db.stats().retimed_records, 0);
  const auto top = db.top_k("mm", target, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].config_index, 7);
  EXPECT_FALSE(top[0].noisy());
}

}  // namespace
}  // namespace ktune::tuning_db
