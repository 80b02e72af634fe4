// End-to-end test of `ktune db ...`: the commands read a log written through the API, print
// the right numbers as JSON, and fail with one clear line and a non-zero status on bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/cli_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::make_failure;
using testing::make_record;
using testing::matmul_key;
using testing_cli::ktune;
using testing_cli::Output;
using testing_cli::quote;

class DbCli : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("cli.db");
    Database db = Database::open(path_);
    db.add({make_record(64, 1, {3e-3}), make_record(64, 2, {1e-3, 2e-3}),
            make_failure(64, 3, ErrorKind::kWrongAnswer), make_record(64, 4, {4e-3})});
  }
  testing::TempDir dir_;
  std::string path_;
};

TEST_F(DbCli, BestAndTopPrintTheFastestSuccessfulRecords) {
  Output best = ktune("db best " + quote(matmul_key(64)) + " --db " + path_ + " --json");
  ASSERT_EQ(best.status, 0) << best.out;
  auto j = nlohmann::json::parse(best.out);
  EXPECT_EQ(j["config"]["index"], 2);
  EXPECT_DOUBLE_EQ(j["mean_cost"].get<double>(), 1.5e-3);
  EXPECT_EQ(j["input"][0], kHost.target);

  Output top = ktune("db top " + quote(matmul_key(64)) + " -k 2 --target " + quote(kHost.target) +
                     " --db " + path_ + " --json");
  ASSERT_EQ(top.status, 0) << top.out;
  auto t = nlohmann::json::parse(top.out);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0]["config"]["index"], 2);
  EXPECT_EQ(t[1]["config"]["index"], 1);

  Output human = ktune("db best " + quote(matmul_key(64)) + " --db " + path_);
  EXPECT_EQ(human.status, 0);
  EXPECT_NE(human.out.find("config     #2"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("1.5000 ms"), std::string::npos) << human.out;
}

TEST_F(DbCli, StatsCheckExportImport) {
  Output stats = ktune("db stats --db " + path_ + " --json");
  ASSERT_EQ(stats.status, 0) << stats.out;
  auto s = nlohmann::json::parse(stats.out);
  EXPECT_EQ(s["records"], 4);
  EXPECT_EQ(s["failed_records"], 1);
  EXPECT_EQ(s["failures_by_kind"]["wrong_answer"], 1);

  Output check = ktune("db check --db " + path_ + " --json");
  ASSERT_EQ(check.status, 0) << check.out;
  EXPECT_TRUE(nlohmann::json::parse(check.out)["ok"].get<bool>());

  std::string jsonl = dir_.file("out.jsonl");
  ASSERT_EQ(ktune("db export --db " + path_ + " --out " + jsonl).status, 0);
  { std::ofstream(jsonl, std::ios::app) << "{not json\n"; }
  std::string copy = dir_.file("copy.db");
  Output imp = ktune("db import " + jsonl + " --db " + copy, true);
  EXPECT_EQ(imp.status, 1) << imp.err;  // a malformed line makes the command fail...
  EXPECT_NE(imp.err.find(":5: malformed record JSON"), std::string::npos) << imp.err;
  Database db = Database::open(copy);  // ...but the 4 good lines are in
  EXPECT_EQ(db.stats().records, 4);
  EXPECT_EQ(db.best(matmul_key(64), kHost)->config_index, 2);
}

TEST_F(DbCli, BadFilesGiveOneClearLine) {
  std::string garbage = dir_.file("garbage.db");
  std::ofstream(garbage) << "definitely not sqlite, just some text that is long enough\n";
  Output check = ktune("db check --db " + garbage, true);
  EXPECT_EQ(check.status, 1);
  EXPECT_NE(check.err.find("ktune: error:"), std::string::npos) << check.err;
  EXPECT_NE(check.err.find("not a database"), std::string::npos) << check.err;

  Output missing = ktune("db stats --db " + dir_.file("absent.db"), true);
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("no tuning log"), std::string::npos) << missing.err;

  Output unknown = ktune("db best 'conv2d(N=1)' --db " + path_, true);
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("no records"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace ktune::tuning_db
