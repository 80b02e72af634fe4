// Tests of emulated records (timed on an emulated device, e.g. qemu): best/top-k pass over them
// unless asked, resume, claims and history keep them apart from real ones, stats count them
// apart, the JSON-lines form carries the flag, and a version 4 log migrates with every record
// real (and stays readable, unmigrated, when opened read-only).
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <sstream>

#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/claim_store.h"
#include "tuning_db/database.h"
#include "tuning_db/schema.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::make_failure;
using testing::make_record;
using testing::matmul_key;
using testing::TempDir;

Record emulated(Record r) {
  r.emulated = true;
  return r;
}

std::vector<int64_t> indices_of(const std::vector<Record>& records) {
  std::vector<int64_t> out;
  for (const auto& r : records) out.push_back(r.config_index);
  return out;
}

std::vector<double> costs_of(const std::vector<Record>& records) {
  std::vector<double> out;
  for (const auto& r : records) out.push_back(r.mean_cost());
  return out;
}

// matmul 64 on the host, device key "rk3399" for all: two real records, two emulated ones (one
// faster than every real record) and an emulated failure; and matmul 32 measured only emulated.
class Emulated : public testing::OnBothBackends {
 protected:
  void SetUp() override {
    OnBothBackends::SetUp();
    if (IsSkipped()) return;
    db_.emplace(Database::open(fresh()));
    ids_ = db_->add({make_record(64, 1, {3e-3}, kHost, "rk3399"),
                     make_record(64, 2, {1e-3, 3e-3}, kHost, "rk3399"),
                     emulated(make_record(64, 3, {1e-3}, kHost, "rk3399")),
                     emulated(make_record(64, 4, {2.5e-3}, kHost, "rk3399")),
                     emulated(make_failure(64, 5, ErrorKind::kRun)),
                     emulated(make_record(32, 1, {4e-4}))});
  }
  std::optional<Database> db_;
  std::vector<int64_t> ids_;
};

INSTANTIATE_TEST_SUITE_P(Backends, Emulated, testing::kBothBackends, testing::backend_test_name);

TEST_P(Emulated, BestAndTopKServeEmulatedRecordsOnlyWhenAsked) {
  ASSERT_EQ(ids_.size(), 6u);
  auto best = db_->best(matmul_key(64), kHost);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->id, ids_[1]);
  EXPECT_DOUBLE_EQ(best->mean_cost(), 2e-3);
  EXPECT_FALSE(best->emulated);
  auto top = db_->top_k(matmul_key(64), kHost, 10);
  EXPECT_EQ(indices_of(top), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(costs_of(top), (std::vector<double>{2e-3, 3e-3}));
  EXPECT_EQ(db_->best(matmul_key(64), kHost, RecordQuery{"rk3399"})->id, ids_[1]);
  EXPECT_EQ(db_->best(matmul_key(64), kHost, "rk3399")->id, ids_[1]);

  RecordQuery with;
  with.include_emulated = true;
  best = db_->best(matmul_key(64), kHost, with);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->id, ids_[2]);
  EXPECT_TRUE(best->emulated);
  EXPECT_DOUBLE_EQ(best->mean_cost(), 1e-3);
  top = db_->top_k(matmul_key(64), kHost, 10, with);
  EXPECT_EQ(indices_of(top), (std::vector<int64_t>{3, 2, 4, 1}));
  EXPECT_EQ(costs_of(top), (std::vector<double>{1e-3, 2e-3, 2.5e-3, 3e-3}));
  EXPECT_EQ(top[0].emulated + top[1].emulated + top[2].emulated + top[3].emulated, 2);
  EXPECT_EQ(indices_of(db_->top_k(matmul_key(64), kHost, 2, with)), (std::vector<int64_t>{3, 2}));

  // A workload measured only under emulation answers like one never measured, unless asked.
  EXPECT_FALSE(db_->best(matmul_key(32), kHost).has_value());
  EXPECT_TRUE(db_->top_k(matmul_key(32), kHost, 5).empty());
  EXPECT_EQ(db_->best(matmul_key(32), kHost, with)->id, ids_[5]);
  // ...and count_emulated tells the two apart (successes only; per device when asked).
  EXPECT_EQ(db_->count_emulated(matmul_key(32), kHost), 1);
  EXPECT_EQ(db_->count_emulated(matmul_key(64), kHost), 2);
  EXPECT_EQ(db_->count_emulated(matmul_key(64), kHost, "rk3399"), 2);
  EXPECT_EQ(db_->count_emulated(matmul_key(64), kHost, "x86"), 0);
  EXPECT_EQ(db_->count_emulated(matmul_key(128), kHost), 0);
}

TEST_P(Emulated, ResumeHistoryAndClaimsKeepRealAndEmulatedApart) {
  EXPECT_EQ(db_->measured_indices(matmul_key(64), kHost), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(db_->measured_indices(matmul_key(64), kHost, true), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_TRUE(db_->has(matmul_key(64), kHost, 1));
  EXPECT_FALSE(db_->has(matmul_key(64), kHost, 3));
  EXPECT_TRUE(db_->has(matmul_key(64), kHost, 3, true));
  EXPECT_FALSE(db_->has(matmul_key(64), kHost, 1, true));

  auto real = db_->history("matmul", kHost);
  auto emu = db_->history("matmul", kHost, 0, true);
  EXPECT_EQ(indices_of(real), (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(emu.size(), 4u);
  EXPECT_EQ(emu[0].id, ids_[2]);
  EXPECT_EQ(emu[3].id, ids_[5]);
  for (const auto& r : real) EXPECT_FALSE(r.emulated);
  for (const auto& r : emu) EXPECT_TRUE(r.emulated);
  EXPECT_EQ(indices_of(db_->history("matmul", kHost, 2, true)),
            (std::vector<int64_t>{5, 1}));  // the newest two

  // A real run may claim what was only measured under emulation, and the reverse; claims of
  // real and emulated runs do not block each other.
  const ClaimOwner real_run = ClaimOwner::this_process(), emulated_run = ClaimOwner::this_process(),
                   other_real_run = ClaimOwner::this_process();
  ClaimStore claims(*db_);
  EXPECT_EQ(claims.claim(matmul_key(64), kHost, {1, 3, 6}, real_run, 3600),
            (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(claims.claim(matmul_key(64), kHost, {1, 3, 6}, emulated_run, 3600, true),
            (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(claims.claim(matmul_key(64), kHost, {3, 6, 7}, other_real_run, 3600),
            (std::vector<int64_t>{7}));
  EXPECT_EQ(db_->stats().claims, 5);
  EXPECT_EQ(claims.release_all(emulated_run), 2);
  EXPECT_EQ(claims.release_all(real_run), 2);
  EXPECT_EQ(claims.release_all(other_real_run), 1);
}

TEST_P(Emulated, StatsAndSummariesCountThemApart) {
  Stats st = db_->stats();
  EXPECT_EQ(st.records, 6);
  EXPECT_EQ(st.ok_records, 5);
  EXPECT_EQ(st.emulated_records, 4);
  EXPECT_EQ(st.emulated_ok_records, 3);
  auto summaries = db_->summaries();
  ASSERT_EQ(summaries.size(), 2u);
  const WorkloadSummary& s32 = summaries[0];  // keys sort "...M=32" before "...M=64"
  const WorkloadSummary& s64 = summaries[1];
  ASSERT_EQ(s64.workload_key, matmul_key(64));
  EXPECT_EQ(s64.records, 5);
  EXPECT_EQ(s64.ok_records, 4);
  EXPECT_EQ(s64.emulated_records, 3);
  EXPECT_EQ(s64.emulated_ok_records, 2);
  EXPECT_DOUBLE_EQ(s64.best_cost, 2e-3);
  EXPECT_DOUBLE_EQ(s64.best_gflops, 2.0 * 64 * 64 * 64 / 2e-3 / 1e9);
  EXPECT_DOUBLE_EQ(s64.emulated_best_cost, 1e-3);
  EXPECT_DOUBLE_EQ(s64.emulated_best_gflops, 2.0 * 64 * 64 * 64 / 1e-3 / 1e9);
  ASSERT_EQ(s32.workload_key, matmul_key(32));
  EXPECT_EQ(s32.records, 1);
  EXPECT_EQ(s32.emulated_records, 1);
  EXPECT_EQ(s32.best_cost, 0);  // no real record
  EXPECT_EQ(s32.best_gflops, 0);
  EXPECT_DOUBLE_EQ(s32.emulated_best_cost, 4e-4);
}

TEST_P(Emulated, JsonLinesCarryTheFlag) {
  std::stringstream lines;
  ASSERT_EQ(db_->export_jsonl(lines), 6);
  std::vector<nlohmann::json> parsed;
  for (std::string line; std::getline(lines, line);) parsed.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(parsed.size(), 6u);
  EXPECT_EQ(parsed[0]["version"], 1);
  EXPECT_FALSE(parsed[0]["meta"].contains("emulated"));
  EXPECT_EQ(parsed[2]["version"], 2);  // older readers refuse it rather than take it as real
  EXPECT_EQ(parsed[2]["meta"]["emulated"], true);

  Database copy = Database::open(fresh("copy.db"));
  std::istringstream in(lines.str());
  ImportReport report = copy.import_jsonl(in);
  EXPECT_EQ(report.imported, 6);
  EXPECT_TRUE(report.errors.empty());
  EXPECT_EQ(copy.stats().emulated_records, 4);
  EXPECT_EQ(indices_of(copy.history("matmul", kHost, 0, true)), (std::vector<int64_t>{3, 4, 5, 1}));
  EXPECT_EQ(copy.best(matmul_key(64), kHost)->config_index, 2);
  RecordQuery with;
  with.include_emulated = true;
  EXPECT_EQ(copy.best(matmul_key(64), kHost, with)->config_index, 3);
  // Importing again adds nothing; the same measurement with the other flag is another one.
  std::istringstream again(lines.str());
  EXPECT_EQ(copy.import_jsonl(again).already_present, 6);
  Record real_twin = make_record(64, 3, {1e-3}, kHost, "rk3399");
  std::istringstream twin(to_json_line(real_twin) + "\n");
  EXPECT_EQ(copy.import_jsonl(twin).imported, 1);

  // Absent is false; a version 1 line may carry the flag; a flag that is not a boolean is refused.
  nlohmann::json line = parsed[0];
  EXPECT_FALSE(from_json(line).emulated);
  line["meta"]["emulated"] = true;
  EXPECT_TRUE(from_json(line).emulated);
  line["meta"]["emulated"] = "yes";
  try {
    from_json(line);
    FAIL() << "a non-boolean emulated flag was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("meta.emulated"), std::string::npos) << e.what();
  }
}

// A log of schema version 4 (before the flag): opened read-only it is read as is, every record
// real; opened to write it migrates in place, keeping every record (as real) and its claims.
TEST(EmulatedMigration, AVersionFourLogKeepsEveryRecordAsReal) {
  TempDir dir;
  const std::string path = dir.file("v4.db");
  {
    auto conn = sql::Connection::open(path, true);
    sql::Transaction txn(conn);
    apply_migrations(conn, 0, 4);
    conn.exec(
        "INSERT INTO workloads(key, template, args, flop) VALUES ('mm', 'matmul', '{}', 2e9);"
        "INSERT INTO targets(target, llvm_version) VALUES ('llvm', '19');"
        "INSERT INTO devices(key) VALUES ('x86');"
        "INSERT INTO records(workload_id, target_id, device_id, config_index, config, costs, "
        "mean_cost, error_kind, "
        "created_at) VALUES "
        "(1, 1, 1, 5, '{\"index\":5,\"entity\":[]}', '[0.5]', 0.5, '', 0),"
        "(1, 1, 1, 6, '{\"index\":6,\"entity\":[]}', '[0.25,0.75]', 0.5, '', 0),"
        "(1, 1, 1, 7, '{\"index\":7,\"entity\":[]}', '[0.125]', 0.125, '', 0),"
        "(1, 1, 1, 8, '{\"index\":8,\"entity\":[]}', '[]', NULL, 'run', 0);"
        "INSERT INTO claims(workload_key, target, config_index, owner, host, pid, expires_at) "
        "VALUES ('mm', 'llvm', 9, 'someone', 'elsewhere', 1, 4e9);");
    txn.commit();
  }
  const TargetKey target{"llvm", "19"};
  {
    Database reader = Database::open(path, {.read_only = true});
    EXPECT_EQ(reader.opened_schema_version(), 4);
    EXPECT_EQ(reader.best("mm", target)->config_index, 7);
    EXPECT_FALSE(reader.best("mm", target)->emulated);
    EXPECT_EQ(reader.stats().records, 4);
    EXPECT_EQ(reader.stats().emulated_records, 0);
    EXPECT_EQ(reader.summaries().at(0).emulated_records, 0);
    EXPECT_EQ(reader.count_emulated("mm", target), 0);
    EXPECT_EQ(reader.measured_indices("mm", target), (std::vector<int64_t>{5, 6, 7, 8}));
    EXPECT_TRUE(reader.measured_indices("mm", target, true).empty());
  }
  Database db = Database::open(path);
  ClaimStore claims(db);
  EXPECT_EQ(db.opened_schema_version(), 4);
  EXPECT_EQ(db.stats().schema_version, kSchemaVersion);
  EXPECT_TRUE(db.check().ok());
  const auto records = db.history("matmul", target);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(indices_of(records), (std::vector<int64_t>{5, 6, 7, 8}));
  EXPECT_EQ(records[1].costs, (std::vector<double>{0.25, 0.75}));
  EXPECT_EQ(*records[3].error, ErrorKind::kRun);
  for (const auto& r : records) EXPECT_FALSE(r.emulated);
  EXPECT_TRUE(db.history("matmul", target, 0, true).empty());
  EXPECT_EQ(db.stats().emulated_records, 0);
  EXPECT_EQ(db.best("mm", target)->config_index, 7);
  // The claim survived the rebuilt table, as a real run's: it blocks real runs only.
  EXPECT_EQ(db.stats().claims, 1);
  EXPECT_TRUE(claims.claim("mm", target, {9}, ClaimOwner::this_process(), 60).empty());
  EXPECT_EQ(claims.claim("mm", target, {9}, ClaimOwner::this_process(), 60, true),
            (std::vector<int64_t>{9}));
  // New records of either kind are written to the migrated log.
  Record r = make_record(16, 1, {1e-3});
  r.emulated = true;
  db.add({r});
  EXPECT_EQ(db.stats().emulated_records, 1);
}

}  // namespace
}  // namespace ktune::tuning_db
