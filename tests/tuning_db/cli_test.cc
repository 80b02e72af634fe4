// End-to-end test of `ktune db ...`: the commands read a log written through the API, print
// the right numbers as JSON, and fail with one clear line and a non-zero status on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::make_failure;
using testing::make_record;
using testing::matmul_key;

struct Output {
  int status = -1;
  std::string text;  // stdout, then stderr when `with_stderr`
};

Output ktune(const std::string& args, bool with_stderr = false) {
  std::string cmd =
      std::string(KTUNE_BINARY) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  Output out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.text.append(buf, n);
  int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

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
  ASSERT_EQ(best.status, 0) << best.text;
  auto j = nlohmann::json::parse(best.text);
  EXPECT_EQ(j["config"]["index"], 2);
  EXPECT_DOUBLE_EQ(j["mean_cost"].get<double>(), 1.5e-3);
  EXPECT_EQ(j["input"][0], kHost.target);

  Output top = ktune("db top " + quote(matmul_key(64)) + " -k 2 --target " + quote(kHost.target) +
                     " --db " + path_ + " --json");
  ASSERT_EQ(top.status, 0) << top.text;
  auto t = nlohmann::json::parse(top.text);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0]["config"]["index"], 2);
  EXPECT_EQ(t[1]["config"]["index"], 1);

  Output human = ktune("db best " + quote(matmul_key(64)) + " --db " + path_);
  EXPECT_EQ(human.status, 0);
  EXPECT_NE(human.text.find("config     #2"), std::string::npos) << human.text;
  EXPECT_NE(human.text.find("1.5000 ms"), std::string::npos) << human.text;
}

TEST_F(DbCli, StatsCheckExportImport) {
  Output stats = ktune("db stats --db " + path_ + " --json");
  ASSERT_EQ(stats.status, 0) << stats.text;
  auto s = nlohmann::json::parse(stats.text);
  EXPECT_EQ(s["records"], 4);
  EXPECT_EQ(s["failed_records"], 1);
  EXPECT_EQ(s["failures_by_kind"]["wrong_answer"], 1);

  Output check = ktune("db check --db " + path_ + " --json");
  ASSERT_EQ(check.status, 0) << check.text;
  EXPECT_TRUE(nlohmann::json::parse(check.text)["ok"].get<bool>());

  std::string jsonl = dir_.file("out.jsonl");
  ASSERT_EQ(ktune("db export --db " + path_ + " --out " + jsonl).status, 0);
  { std::ofstream(jsonl, std::ios::app) << "{not json\n"; }
  std::string copy = dir_.file("copy.db");
  Output imp = ktune("db import " + jsonl + " --db " + copy, true);
  EXPECT_EQ(imp.status, 1) << imp.text;  // a malformed line makes the command fail...
  EXPECT_NE(imp.text.find(":5: bad JSON"), std::string::npos) << imp.text;
  Database db = Database::open(copy);  // ...but the 4 good lines are in
  EXPECT_EQ(db.stats().records, 4);
  EXPECT_EQ(db.best(matmul_key(64), kHost)->config_index, 2);
}

TEST_F(DbCli, BadFilesGiveOneClearLine) {
  std::string garbage = dir_.file("garbage.db");
  std::ofstream(garbage) << "definitely not sqlite, just some text that is long enough\n";
  Output check = ktune("db check --db " + garbage, true);
  EXPECT_EQ(check.status, 1);
  EXPECT_NE(check.text.find("ktune: error:"), std::string::npos) << check.text;
  EXPECT_NE(check.text.find("not a database"), std::string::npos) << check.text;

  Output missing = ktune("db stats --db " + dir_.file("absent.db"), true);
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.text.find("no tuning log"), std::string::npos) << missing.text;

  Output unknown = ktune("db best 'conv2d(N=1)' --db " + path_, true);
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.text.find("no records"), std::string::npos) << unknown.text;
}

}  // namespace
}  // namespace ktune::tuning_db
