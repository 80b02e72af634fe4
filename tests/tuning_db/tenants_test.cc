// Tests of the tenant columns: records keep their client and worker (in the log and in JSON
// lines, where old lines without them still import), jobs keep their client, and a version 5 log
// migrates with every record and job naming no one (and stays readable, unmigrated, read-only).
#include <gtest/gtest.h>

#include <sstream>

#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/job_store.h"
#include "tuning_db/schema.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::make_record;
using testing::matmul_key;
using testing::TempDir;

// Tenants' jobs run on both backends.
class TenantJobsOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, TenantJobsOn, testing::kBothBackends,
                         testing::backend_test_name);

// Tenants' records run on both backends.
class TenantRecordsOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, TenantRecordsOn, testing::kBothBackends,
                         testing::backend_test_name);

Record measured_by(Record r, const std::string& client, const std::string& worker) {
  r.client = client;
  r.worker = worker;
  return r;
}

TEST_P(TenantRecordsOn, ClientAndWorkerRoundTripThroughTheLogAndJsonLines) {
  Database db = Database::open(fresh("t.db"));
  db.add({measured_by(make_record(64, 1, {2e-3}), "alice", "w1"),
          measured_by(make_record(64, 2, {1e-3}), "bob", "w2"), make_record(64, 3, {3e-3})});
  const auto records = db.history("matmul", kHost);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].client, "alice");
  EXPECT_EQ(records[0].worker, "w1");
  EXPECT_EQ(records[1].client, "bob");
  EXPECT_EQ(records[1].worker, "w2");
  EXPECT_EQ(records[2].client, "");
  EXPECT_EQ(records[2].worker, "");
  EXPECT_EQ(db.best(matmul_key(64), kHost)->client, "bob");

  std::stringstream lines;
  EXPECT_EQ(db.export_jsonl(lines), 3);
  std::vector<nlohmann::json> parsed;
  for (std::string line; std::getline(lines, line);) parsed.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[0]["meta"]["client"], "alice");
  EXPECT_EQ(parsed[0]["meta"]["worker"], "w1");
  EXPECT_EQ(parsed[0]["version"], 1);  // older builds ignore the fields: the version is unchanged
  EXPECT_FALSE(parsed[2]["meta"].contains("client"));
  EXPECT_FALSE(parsed[2]["meta"].contains("worker"));

  Database copy = Database::open(fresh("copy.db"));
  lines.clear();
  lines.seekg(0);
  EXPECT_EQ(copy.import_jsonl(lines).imported, 3);
  const auto imported = copy.history("matmul", kHost);
  ASSERT_EQ(imported.size(), 3u);
  EXPECT_EQ(imported[0].client, "alice");
  EXPECT_EQ(imported[1].worker, "w2");
  EXPECT_EQ(imported[2].client, "");
}

TEST_P(TenantRecordsOn, AnOldLineWithoutTheFieldsImportsAndABadOneIsRefused) {
  nlohmann::json line = to_json(make_record(64, 4, {1e-3}));
  ASSERT_FALSE(line["meta"].contains("client"));
  const Record old = from_json(line);
  EXPECT_EQ(old.client, "");
  EXPECT_EQ(old.worker, "");
  line["meta"]["client"] = 7;
  try {
    from_json(line);
    FAIL() << "a client that is not a string was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("meta.client"), std::string::npos) << e.what();
  }
}

TEST_P(TenantJobsOn, AJobKeepsItsClient) {
  Database db = Database::open(fresh("j.db"));
  JobStore jobs(db);
  JobRow row;
  row.device_key = "x86";
  row.owner = "alice@laptop";
  row.client = "alice";
  const int64_t id = jobs.add(row);
  EXPECT_EQ(jobs.get(id)->client, "alice");
  EXPECT_EQ(jobs.get(id)->owner, "alice@laptop");
  row.client = "";
  EXPECT_EQ(jobs.get(jobs.add(row))->client, "");
}

// A log of schema version 5 (before the tenant columns): opened read-only it is read as is, every
// record naming no one; opened to write it migrates in place, keeping every record and job.
TEST(TenantMigration, AVersionFiveLogKeepsEveryRecordAndJob) {
  TempDir dir;
  const std::string path = dir.file("v5.db");
  testing::write_old_log(
      path, 5,
      "INSERT INTO records(workload_id, target_id, device_id, config_index, config, costs, "
      "mean_cost, error_kind, created_at) VALUES "
      "(1, 1, 1, 5, '{\"index\":5,\"entity\":[]}', '[0.5]', 0.5, '', 0),"
      "(1, 1, 1, 6, '{\"index\":6,\"entity\":[]}', '[0.25]', 0.25, '', 0);"
      "INSERT INTO jobs(spec, device_key, owner, state, created_at, updated_at) VALUES "
      "('{}', 'x86', 'carol@box', 'done', 1, 2);");
  const TargetKey target{"llvm", "19"};
  {
    Database reader = Database::open(path, {.read_only = true});
    EXPECT_EQ(reader.opened_schema_version(), 5);
    const auto best = reader.best("mm", target);
    ASSERT_TRUE(best);
    EXPECT_EQ(best->config_index, 6);
    EXPECT_EQ(best->client, "");
    EXPECT_EQ(best->worker, "");
    std::stringstream lines;
    EXPECT_EQ(reader.export_jsonl(lines), 2);
    EXPECT_EQ(lines.str().find("\"client\""), std::string::npos) << lines.str();
  }
  Database db = Database::open(path);
  EXPECT_EQ(db.opened_schema_version(), 5);
  EXPECT_EQ(db.stats().schema_version, kSchemaVersion);
  EXPECT_TRUE(db.check().ok());
  const auto records = db.history("matmul", target);
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {
    EXPECT_EQ(r.client, "");
    EXPECT_EQ(r.worker, "");
  }
  JobStore jobs(db);
  const auto job = jobs.get(1);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->owner, "carol@box");
  EXPECT_EQ(job->client, "");
  EXPECT_EQ(job->state, JobState::kDone);
  // New records with a client and worker go to the migrated log.
  Record r = make_record(16, 1, {1e-3});
  r.client = "alice";
  r.worker = "w9";
  db.add({r});
  EXPECT_EQ(db.history("matmul", kHost).at(0).worker, "w9");
}

}  // namespace
}  // namespace ktune::tuning_db
