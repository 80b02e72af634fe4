// Tests of Database: add, best/top-k (failures ignored), resume, history, stats, export/import
// round trip, remove_failed, saved models, runs, and the migration from schema version 1.
#include "tuning_db/database.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/model_store.h"
#include "tuning_db/run_store.h"
#include "tuning_db/schema.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::make_failure;
using testing::make_record;
using testing::matmul_key;
using testing::TempDir;

// The tests of the records run on both backends.
class DatabaseOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, DatabaseOn, testing::kBothBackends, testing::backend_test_name);

TEST_P(DatabaseOn, AddThenBestIgnoresFailuresAndPicksLowestMean) {
  Database db = Database::open(fresh("log.db"));
  EXPECT_EQ(db.opened_schema_version(), 0);
  std::vector<Record> batch = {
      make_record(64, 1, {3e-3, 3e-3}),
      make_record(64, 2, {1e-3, 3e-3}),  // mean 2e-3: the best
      make_failure(64, 3, ErrorKind::kRunTimeout),
      make_record(64, 4, {2.5e-3}),
      make_failure(64, 5, ErrorKind::kWrongAnswer),
  };
  std::vector<int64_t> ids = db.add(batch);
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_LT(ids[0], ids[4]);

  auto best = db.best(matmul_key(64), kHost);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->config_index, 2);
  EXPECT_DOUBLE_EQ(best->mean_cost(), 2e-3);
  EXPECT_EQ(best->costs, (std::vector<double>{1e-3, 3e-3}));
  EXPECT_EQ(best->config, batch[1].config);
  EXPECT_EQ(best->args, batch[1].args);
  EXPECT_EQ(best->target, kHost);
  EXPECT_EQ(best->device_key, "x86");
  EXPECT_EQ(best->template_name, "matmul");
  EXPECT_DOUBLE_EQ(best->flop, 2.0 * 64 * 64 * 64);
  EXPECT_NEAR(best->gflops(), 2.0 * 64 * 64 * 64 / 2e-3 / 1e9, 1e-9);
  EXPECT_EQ(best->id, ids[1]);
  EXPECT_EQ(best->tuner, "random");
  EXPECT_DOUBLE_EQ(best->timestamp, batch[1].timestamp);

  auto top = db.top_k(matmul_key(64), kHost, 10);
  ASSERT_EQ(top.size(), 3u);  // the two failures are not ranked
  EXPECT_EQ(top[0].config_index, 2);
  EXPECT_EQ(top[1].config_index, 4);
  EXPECT_EQ(top[2].config_index, 1);
  EXPECT_EQ(db.top_k(matmul_key(64), kHost, 2).size(), 2u);

  EXPECT_FALSE(db.best(matmul_key(128), kHost).has_value());
  EXPECT_FALSE(db.best(matmul_key(64), TargetKey{"llvm -mtriple=aarch64-linux-gnu", ""}));
}

TEST_P(DatabaseOn, TargetsAreToldApartByToolchainAndDevice) {
  Database db = Database::open(fresh("log.db"));
  TargetKey old_llvm{kHost.target, "14.0.6"};
  db.add({make_record(32, 1, {5e-3}), make_record(32, 2, {1e-3}, old_llvm),
          make_record(32, 3, {4e-3}, kHost, "other-box"), make_failure(32, 9, ErrorKind::kRun)});
  EXPECT_EQ(db.best(matmul_key(32), kHost)->config_index, 3);
  EXPECT_EQ(db.best(matmul_key(32), old_llvm)->config_index, 2);
  // An empty LLVM version matches every toolchain.
  EXPECT_EQ(db.best(matmul_key(32), TargetKey{kHost.target, ""})->config_index, 2);
  EXPECT_EQ(db.best(matmul_key(32), kHost, "x86")->config_index, 1);
  EXPECT_EQ(db.best(matmul_key(32), kHost, "other-box")->config_index, 3);
  EXPECT_FALSE(db.best(matmul_key(32), kHost, "no-such-device").has_value());
}

TEST_P(DatabaseOn, ResumeLookupsSeeFailedConfigsToo) {
  Database db = Database::open(fresh("log.db"));
  db.add({make_record(16, 7, {1e-3}), make_failure(16, 3, ErrorKind::kBuild),
          make_record(16, 7, {2e-3}), make_record(16, 11, {1e-3})});
  EXPECT_TRUE(db.has(matmul_key(16), kHost, 7));
  EXPECT_TRUE(db.has(matmul_key(16), kHost, 3));
  EXPECT_FALSE(db.has(matmul_key(16), kHost, 4));
  EXPECT_FALSE(db.has(matmul_key(17), kHost, 7));
  EXPECT_EQ(db.measured_indices(matmul_key(16), kHost), (std::vector<int64_t>{3, 7, 11}));
  EXPECT_TRUE(db.measured_indices(matmul_key(16), TargetKey{"other", ""}).empty());
}

TEST_P(DatabaseOn, HistoryCoversEveryWorkloadOfTheTemplate) {
  Database db = Database::open(fresh("log.db"));
  Record conv = make_record(8, 1, {1e-3});
  conv.workload_key = "conv2d(N=1,C=8)";
  conv.template_name = "conv2d";
  db.add({make_record(16, 1, {1e-3}), conv, make_record(32, 2, {2e-3}),
          make_failure(16, 3, ErrorKind::kRun)});
  auto all = db.history("matmul", kHost);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].workload_key, matmul_key(16));
  EXPECT_EQ(all[1].workload_key, matmul_key(32));
  EXPECT_FALSE(all[2].ok());
  EXPECT_EQ(*all[2].error, ErrorKind::kRun);
  EXPECT_EQ(all[2].error_message, "failed on purpose");
  auto newest = db.history("matmul", kHost, 2);
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest[0].config_index, 2);
  EXPECT_EQ(newest[1].config_index, 3);
  EXPECT_EQ(db.history("conv2d", kHost).size(), 1u);
}

TEST_P(DatabaseOn, AddIsAllOrNothing) {
  Database db = Database::open(fresh("log.db"));
  db.add({make_record(16, 1, {1e-3})});
  Record wrong_template = make_record(16, 2, {1e-3});
  wrong_template.template_name = "dense";
  try {
    db.add({make_record(16, 3, {1e-3}), wrong_template});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
  Record no_costs = make_record(16, 4, {});
  EXPECT_THROW(db.add({no_costs}), Error);
  EXPECT_EQ(db.stats().records, 1);
  EXPECT_FALSE(db.has(matmul_key(16), kHost, 3));
}

TEST_P(DatabaseOn, StatsSummariesAndRemoveFailed) {
  Database db = Database::open(fresh("log.db"));
  db.add({make_record(16, 1, {2e-3}), make_record(16, 2, {1e-3}),
          make_failure(16, 3, ErrorKind::kRun), make_failure(16, 4, ErrorKind::kRun),
          make_failure(32, 5, ErrorKind::kBuildTimeout), make_record(32, 6, {4e-3})});
  Stats st = db.stats();
  EXPECT_EQ(st.schema_version, kSchemaVersion);
  EXPECT_EQ(st.workloads, 2);
  EXPECT_EQ(st.targets, 1);
  EXPECT_EQ(st.devices, 1);
  EXPECT_EQ(st.records, 6);
  EXPECT_EQ(st.ok_records, 3);
  EXPECT_EQ(st.failed_records, 3);
  EXPECT_EQ(st.failures_by_kind,
            (std::map<std::string, int64_t>{{"build_timeout", 1}, {"run", 2}}));

  auto sums = db.summaries();
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0].workload_key, matmul_key(16));
  EXPECT_EQ(sums[0].records, 4);
  EXPECT_EQ(sums[0].ok_records, 2);
  EXPECT_DOUBLE_EQ(sums[0].best_cost, 1e-3);
  EXPECT_NEAR(sums[0].best_gflops, 2.0 * 16 * 16 * 16 / 1e-3 / 1e9, 1e-9);

  EXPECT_EQ(db.remove_failed(), 3);
  EXPECT_EQ(db.stats().records, 3);
  EXPECT_EQ(db.stats().failed_records, 0);
  EXPECT_EQ(db.remove_failed(), 0);
}

TEST_P(DatabaseOn, ExportImportRoundTrip) {
  Database a = Database::open(fresh("a.db"));
  Record odd = make_failure(16, 3, ErrorKind::kWrongAnswer, TargetKey{"llvm -mtriple=aarch64", ""});
  odd.error_message = "max abs error 0.5 at [3, \"quoted\"]\n";
  std::vector<Record> written = {make_record(16, 1, {2e-3, 1e-3}), odd, make_record(64, 2, {1e-2})};
  a.add(written);
  std::stringstream jsonl;
  EXPECT_EQ(a.export_jsonl(jsonl), 3);

  std::string first;
  std::istringstream lines(jsonl.str());
  std::getline(lines, first);
  auto line = nlohmann::json::parse(first);
  EXPECT_EQ(line["input"][0], kHost.target);
  EXPECT_EQ(line["input"][1], matmul_key(16));
  EXPECT_EQ(line["config"]["index"], 1);
  EXPECT_EQ(line["result"][0], nlohmann::json::array({2e-3, 1e-3}));
  EXPECT_EQ(line["result"][1], "");
  EXPECT_EQ(line["version"], 1);  // a real record keeps version 1, which older ktune builds read
  EXPECT_FALSE(line["meta"].contains("emulated"));

  Database b = Database::open(fresh("b.db"));
  ImportReport report = b.import_jsonl(jsonl);
  EXPECT_EQ(report.imported, 3);
  EXPECT_TRUE(report.errors.empty());
  std::vector<Record> read = b.history("matmul", TargetKey{kHost.target, ""});
  auto arm = b.history("matmul", TargetKey{"llvm -mtriple=aarch64", ""});
  ASSERT_EQ(read.size(), 2u);
  ASSERT_EQ(arm.size(), 1u);
  EXPECT_EQ(arm[0].error_message, odd.error_message);
  EXPECT_EQ(*arm[0].error, ErrorKind::kWrongAnswer);
  for (size_t i = 0; i < 2; ++i) {
    const Record& w = written[i == 0 ? 0 : 2];
    EXPECT_EQ(read[i].workload_key, w.workload_key);
    EXPECT_EQ(read[i].costs, w.costs);
    EXPECT_EQ(read[i].config, w.config);
    EXPECT_EQ(read[i].args, w.args);
    EXPECT_DOUBLE_EQ(read[i].flop, w.flop);
    EXPECT_DOUBLE_EQ(read[i].timestamp, w.timestamp);
    EXPECT_EQ(read[i].ktune_version, w.ktune_version);
  }
  // Exporting one workload only.
  std::stringstream one;
  EXPECT_EQ(b.export_jsonl(one, matmul_key(64)), 1);
}

TEST_P(DatabaseOn, SavedModelsAreFoundByNameScopeAndTarget) {
  Database db = Database::open(fresh("log.db"));
  ModelStore models(db);
  std::vector<uint8_t> blob = {0, 1, 2, 255, 0, 7};
  models.save({"xgb", "matmul", kHost, {{"rounds", 100}}}, blob);
  auto m = models.load("xgb", "matmul", kHost);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->blob, blob);
  EXPECT_EQ(m->info.metadata["rounds"], 100);
  EXPECT_GT(m->info.created_at, 1.6e9);
  // Saving again replaces it.
  models.save({"xgb", "matmul", kHost, {{"rounds", 200}}}, std::vector<uint8_t>{9});
  m = models.load("xgb", "matmul", TargetKey{kHost.target, ""});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->blob, std::vector<uint8_t>{9});
  EXPECT_EQ(m->info.metadata["rounds"], 200);
  EXPECT_EQ(db.stats().models, 1);
  EXPECT_FALSE(models.load("xgb", "conv2d", kHost).has_value());
  EXPECT_FALSE(models.load("xgb", "matmul", TargetKey{kHost.target, "14.0.6"}).has_value());
  models.save({"empty", "matmul", kHost, {}}, std::vector<uint8_t>{});
  EXPECT_TRUE(models.load("empty", "matmul", kHost)->blob.empty());
}

TEST_P(DatabaseOn, RunsKeepBatchQuality) {
  Database db = Database::open(fresh("log.db"));
  RunStore runs(db);
  int64_t run = runs.begin({"xgb", matmul_key(16), kHost.target, {{"n_trial", 64}}});
  Record r = make_record(16, 1, {1e-3});
  r.run_id = run;
  db.add({r});
  EXPECT_EQ(db.best(matmul_key(16), kHost)->run_id, run);
  runs.add_batch_quality(run, {0, 8, std::nullopt});
  runs.add_batch_quality(run, {1, 8, 0.75});
  runs.finish(run);
  auto q = runs.batch_quality(run);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_FALSE(q[0].rank_correlation.has_value());
  EXPECT_DOUBLE_EQ(*q[1].rank_correlation, 0.75);
  try {
    runs.finish(run + 100);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
  EXPECT_THROW(runs.add_batch_quality(run + 100, {0, 1, 0.5}), Error);
}

TEST_P(DatabaseOn, MigratesAVersionOneLogInPlace) {
  std::string path = fresh("v1.db");
  {
    auto conn = sql::Connection::open(path, true);
    sql::Transaction txn(conn);
    apply_migrations(conn, 0, 1);
    conn.exec(
        "INSERT INTO workloads(key, template, args, flop) VALUES ('mm', 'matmul', '{}', 2e9);"
        "INSERT INTO targets(target, llvm_version) VALUES ('llvm', '19');"
        "INSERT INTO devices(key) VALUES ('x86');"
        "INSERT INTO records(workload_id, target_id, device_id, config_index, config, costs, "
        "mean_cost, created_at) VALUES (1, 1, 1, 5, '{\"index\":5,\"entity\":[]}', '[0.5]', 0.5, "
        "0)");
    txn.commit();
  }
  Database db = Database::open(path);
  EXPECT_EQ(db.opened_schema_version(), 1);
  EXPECT_TRUE(db.check().ok());
  auto best = db.best("mm", TargetKey{"llvm", "19"});
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->config_index, 5);
  EXPECT_EQ(best->run_id, 0);
  EXPECT_EQ(db.stats().schema_version, kSchemaVersion);
  // Reopening a current log is not a migration.
  Database again = Database::open(path);
  EXPECT_EQ(again.opened_schema_version(), kSchemaVersion);
}

TEST_P(DatabaseOn, RefusesToMigrateWhenAskedNotTo) {
  std::string path = fresh("v1.db");
  {
    auto conn = sql::Connection::open(path, true);
    sql::Transaction txn(conn);
    apply_migrations(conn, 0, 1);
    txn.commit();
  }
  OpenOptions options;
  options.migrate = false;
  try {
    Database::open(path, options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDatabase);
  }
}

TEST_P(DatabaseOn, ADatabaseOfAnotherApplicationIsRefusedUntouched) {
  const std::string location = fresh("other.db");
  sql::Connection::open(location, true).exec("CREATE TABLE songs(title TEXT)");
  try {
    Database::open(location);
    FAIL() << "a foreign database was opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDatabase);
    EXPECT_NE(std::string(e.what()).find("but not a ktune tuning log"), std::string::npos)
        << e.what();
  }
  sql::Connection conn = sql::Connection::open(location, false);
  EXPECT_EQ(conn.driver().schema_objects(), 1);  // songs, and nothing of ours
  EXPECT_FALSE(conn.driver().has_object("table", "records"));
}

TEST_P(DatabaseOn, AnEmptyLocationIsNoLogWithoutCreateAndAReadOnlyLogRefusesWrites) {
  const std::string location = fresh("log.db");
  try {
    Database::open(location, {.create = false});
    FAIL() << "an empty location opened as a log";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDatabase);
    EXPECT_NE(std::string(e.what()).find("no tuning log"), std::string::npos) << e.what();
  }
  Database::open(location).add({make_record(16, 1, {1e-3})});
  Database reader = Database::open(location, {.read_only = true});
  EXPECT_EQ(reader.opened_schema_version(), kSchemaVersion);
  EXPECT_EQ(reader.best(matmul_key(16), kHost)->config_index, 1);
  try {
    reader.add({make_record(16, 2, {1e-3})});
    FAIL() << "a read-only log took a record";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDatabase);
  }
  EXPECT_EQ(Database::open(location).stats().records, 1);
}

TEST_P(DatabaseOn, CheckOfAFreshLogIsOk) {
  Database db = Database::open(fresh("log.db"));
  db.add({make_record(16, 1, {1e-3})});
  CheckReport report = db.check();
  EXPECT_TRUE(report.ok()) << (report.problems.empty() ? "" : report.problems[0]);
}

TEST_P(DatabaseOn, IsMovable) {
  Database a = Database::open(fresh("log.db"));
  a.add({make_record(16, 1, {1e-3})});
  Database b = std::move(a);
  EXPECT_TRUE(b.best(matmul_key(16), kHost).has_value());
  b.add({make_record(16, 2, {1e-4})});
  EXPECT_EQ(b.best(matmul_key(16), kHost)->config_index, 2);
}

// Importing the same records again adds nothing: the log holds each measurement once.
TEST_P(DatabaseOn, ImportIsIdempotent) {
  Database source = Database::open(fresh("source.db"));
  source.add({testing::make_record(64, 1, {3e-3}), testing::make_record(64, 2, {1e-3}),
              testing::make_failure(64, 3, ErrorKind::kRun)});
  std::stringstream lines;
  ASSERT_EQ(source.export_jsonl(lines), 3);
  const std::string text = lines.str();
  Database target = Database::open(fresh("target.db"));
  std::istringstream first(text + text.substr(0, text.find('\n') + 1));  // a line twice in one file
  ImportReport a = target.import_jsonl(first);
  EXPECT_EQ(a.imported, 3);
  EXPECT_EQ(a.already_present, 1);
  std::istringstream again(text);
  ImportReport b = target.import_jsonl(again);
  EXPECT_EQ(b.imported, 0);
  EXPECT_EQ(b.already_present, 3);
  EXPECT_EQ(target.stats().records, 3);
  // The same config measured again (another time, other costs) is a new measurement.
  tuning_db::Record remeasured = testing::make_record(64, 1, {2e-3});
  remeasured.timestamp += 10;
  std::istringstream other(tuning_db::to_json_line(remeasured) + "\n");
  EXPECT_EQ(target.import_jsonl(other).imported, 1);
  EXPECT_TRUE(a.errors.empty() && b.errors.empty());
}

// A read-only connection beside a writer that holds the log open sees the records still in the
// WAL, and cannot write; with no writer, it leaves no file beside the log.
TEST(Database, ReadOnlyReadsBesideAWriterAndWritesNothing) {
  TempDir dir;
  const std::string path = dir.file("log.db");
  {
    Database writer = Database::open(path);
    writer.add({testing::make_record(64, 1, {3e-3}), testing::make_record(64, 2, {1e-3})});
    ASSERT_TRUE(std::filesystem::exists(path + "-wal"));
    Database reader = Database::open(path, {.read_only = true});
    EXPECT_EQ(reader.stats().records, 2);
    auto best = reader.best(testing::matmul_key(64), testing::kHost);
    ASSERT_TRUE(best.has_value());
    EXPECT_EQ(best->config_index, 2);
    EXPECT_THROW(reader.add({testing::make_record(64, 3, {2e-3})}), Error);
    writer.add({testing::make_record(64, 4, {0.5e-3})});
    EXPECT_EQ(reader.best(testing::matmul_key(64), testing::kHost)->config_index, 4);
  }
  ASSERT_FALSE(std::filesystem::exists(path + "-wal"));
  {
    Database reader = Database::open(path, {.read_only = true});
    EXPECT_EQ(reader.stats().records, 3);
  }
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path + "-shm"));
  EXPECT_THROW(Database::open(dir.file("missing.db"), {.read_only = true}), Error);
}

TEST_P(DatabaseOn, APackHoldsTheBestRecordOfEachWorkloadAndTargetAndMergesWithoutDuplicates) {
  Database db = Database::open(fresh("log.db"));
  const TargetKey other{"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "19.1.7"};
  const TargetKey older{kHost.target, "18.1.0"};  // the same target, another toolchain
  db.add({make_record(64, 1, {3e-3}), make_record(64, 2, {1e-3}),
          make_failure(64, 3, ErrorKind::kRun), make_record(64, 4, {2e-4}, older),
          make_record(64, 5, {5e-3}, other), make_record(32, 6, {4e-4}),
          make_record(32, 7, {2e-4})});
  std::stringstream pack;
  EXPECT_EQ(db.export_best_jsonl(pack), 3);
  std::vector<Record> lines;
  for (std::string line; std::getline(pack, line);) lines.push_back(from_json_line(line));
  ASSERT_EQ(lines.size(), 3u);
  // Ordered by workload key then target; on the host, the fastest of any toolchain.
  EXPECT_EQ(lines[0].workload_key, matmul_key(32));
  EXPECT_EQ(lines[0].config_index, 7);
  EXPECT_EQ(lines[1].workload_key, matmul_key(64));
  EXPECT_EQ(lines[2].workload_key, matmul_key(64));
  std::map<std::string, int64_t> by_target = {{lines[1].target.target, lines[1].config_index},
                                              {lines[2].target.target, lines[2].config_index}};
  EXPECT_EQ(by_target.at(kHost.target), 4);
  EXPECT_EQ(by_target.at(other.target), 5);
  std::stringstream one;
  EXPECT_EQ(db.export_best_jsonl(one, matmul_key(32)), 1);

  // Merged into another log twice: its records once, and the log's own best stays if faster.
  Database target = Database::open(fresh("other.db"));
  target.add({make_record(32, 8, {1e-4})});
  std::stringstream again(pack.str());
  pack.clear();
  pack.seekg(0);
  EXPECT_EQ(target.import_jsonl(pack).imported, 3);
  const ImportReport second = target.import_jsonl(again);
  EXPECT_EQ(second.imported, 0);
  EXPECT_EQ(second.already_present, 3);
  EXPECT_EQ(target.stats().records, 4);
  EXPECT_EQ(target.best(matmul_key(32), TargetKey{kHost.target, ""}, RecordQuery{})->config_index,
            8);
}

}  // namespace
}  // namespace ktune::tuning_db
