// Tests of the record check: import rejects records this ktune cannot instantiate (line number and
// reason) and skips malformed lines one by one; best/top pass over such records; check() reports
// them and remove_invalid() deletes them.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "schedule_space/task.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/record_check.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::TempDir;

// The one target this test's ktune knows (a stand-in for codegen's parser).
schedule_space::TargetTraits resolve(const std::string& target) {
  if (target != kHost.target)
    throw Error(ErrorKind::kInvalidArgument, "unknown target '" + target + "'");
  return schedule_space::make_target_traits(target, "x86_64-linux-gnu", 512, 2);
}

OpenOptions checked() {
  OpenOptions o;
  o.record_check = std::make_shared<RecordCheck>(resolve);
  return o;
}

const schedule_space::Task& task() {
  static const auto t = schedule_space::Task::create(
      "matmul", {{"M", "16"}, {"N", "16"}, {"K", "16"}}, resolve(kHost.target));
  return t;
}

// A successful record of config `index` of task(), as the tuner writes it.
Record record_of(uint64_t index, double cost) {
  const auto config = task().space().get(index);
  Record r;
  r.workload_key = task().workload_key();
  r.template_name = "matmul";
  r.args = task().args_json();
  r.flop = task().flop();
  r.target = kHost;
  r.device_key = "x86";
  r.config_index = static_cast<int64_t>(index);
  r.config = config.to_json();
  r.costs = {cost};
  r.timestamp = 1.7e9 + static_cast<double>(index);
  return r;
}

uint64_t first_index(bool valid) {
  for (uint64_t i = 0; i < task().space().size(); ++i)
    if (task().space().is_valid(i) == valid) return i;
  ADD_FAILURE() << "no " << (valid ? "valid" : "invalid") << " config";
  return 0;
}

TEST(RecordCheck, ImportRejectsWhatDoesNotInstantiateAndSkipsMalformedLines) {
  TempDir dir;
  auto db = Database::open(dir.file("t.db"), checked());
  const uint64_t good = first_index(true), bad = first_index(false);
  std::vector<std::string> lines;
  lines.push_back(to_json_line(record_of(good, 1e-3)));  // 1: imported
  lines.push_back(to_json_line(record_of(bad, 1e-4)));   // 2: violates a constraint
  Record r = record_of(good, 1e-3);
  r.config_index = -5;
  r.config["index"] = -5;
  lines.push_back(to_json_line(r));  // 3: negative index
  r.config_index = int64_t{1} << 62;
  r.config["index"] = int64_t{1} << 62;
  lines.push_back(to_json_line(r));  // 4: huge index
  r = record_of(good, 1e-3);
  r.template_name = "no_such_template";
  lines.push_back(to_json_line(r));  // 5: unknown template
  r = record_of(good, 1e-3);
  r.workload_key = "matmul(M=16,N=16,K=17,dtype=float32)";
  lines.push_back(to_json_line(r));  // 6: key mismatch
  r = record_of(good, 1e-3);
  r.target.target = "llvm -mtriple=garbage";
  lines.push_back(to_json_line(r));                  // 7: garbage target
  lines.push_back("{\"version\": 1, \"input\": [");  // 8: malformed
  std::string overflow = to_json_line(record_of(good + 1, 2e-3));
  const size_t flop_at = overflow.find("\"flop\":") + 7;  // 9: 1e400
  overflow.replace(flop_at, overflow.find_first_of(",}", flop_at) - flop_at, "1e400");
  lines.push_back(overflow);
  r = record_of(good, 1e-3);
  std::string big = to_json_line(r);
  big.replace(big.find("\"index\":") + 8, std::to_string(good).size(),
              "99999999999999999999");  // 10: > 2^64
  lines.push_back(big);
  r = record_of(good, 1e-3);
  r.config["entity"][0][2] = nlohmann::json::array({-1, 3, 3});  // 11: entity not in the space
  lines.push_back(to_json_line(r));
  lines.push_back(to_json_line(record_of(good, 1e-3)));  // 12: already present
  Record failed = record_of(bad, 0);                     // 13: a failure may keep a
  failed.costs.clear();                                  //     config that does not
  failed.error = ErrorKind::kInstantiation;              //     instantiate
  lines.push_back(to_json_line(failed));

  std::stringstream in;
  for (const auto& l : lines) in << l << "\n";
  const ImportReport report = db.import_jsonl(in);
  // A line whose (workload, target, config index) the log already holds is skipped as present
  // before its config is checked (what keeps a re-import fast): lines 5 and 11 share line 1's, and
  // like every skipped or refused line they add nothing to the log.
  EXPECT_EQ(report.imported, 2);
  EXPECT_EQ(report.already_present, 3);
  EXPECT_EQ(report.rejected, 5);
  const std::vector<std::pair<int64_t, std::string>> expected = {{2, "violates constraint"},
                                                                 {3, "outside the space"},
                                                                 {4, "outside the space"},
                                                                 {6, "does not match"},
                                                                 {7, "target"},
                                                                 {8, "malformed record JSON"},
                                                                 {9, "malformed record JSON"},
                                                                 {10, "config.index"}};
  ASSERT_EQ(report.errors.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(report.errors[i].line, expected[i].first) << report.errors[i].message;
    EXPECT_NE(report.errors[i].message.find(expected[i].second), std::string::npos)
        << "line " << expected[i].first << ": " << report.errors[i].message;
  }
  EXPECT_EQ(db.stats().records, 2);
  EXPECT_TRUE(db.check().ok());
}

TEST(RecordCheck, BestPassesOverRecordsThatDoNotInstantiateAndCheckFindsThem) {
  TempDir dir;
  const uint64_t good = first_index(true), bad = first_index(false);
  {
    // Written by an older ktune (add() trusts its caller): the fastest record is invalid.
    auto raw = Database::open(dir.file("t.db"));
    Record unknown = record_of(good, 1e-6);
    unknown.template_name = "gone_template";
    unknown.workload_key = "gone_template(N=1)";
    raw.add({record_of(bad, 1e-5), record_of(good, 1e-3), record_of(good + 1, 2e-3), unknown});
  }
  auto db = Database::open(dir.file("t.db"), checked());
  const auto best = db.best(task().workload_key(), kHost);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->config_index, static_cast<int64_t>(good));
  const auto top = db.top_k(task().workload_key(), kHost, 5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[1].config_index, static_cast<int64_t>(good + 1));
  EXPECT_EQ(db.top_k(task().workload_key(), kHost, 1).size(), 1u);

  CheckReport report = db.check();
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.invalid_records, 2);
  ASSERT_EQ(report.invalid_examples.size(), 2u);
  EXPECT_NE(report.invalid_examples[0].find("record 1 ("), std::string::npos)
      << report.invalid_examples[0];
  EXPECT_NE(report.invalid_examples[0].find("violates constraint"), std::string::npos)
      << report.invalid_examples[0];
  EXPECT_NE(report.invalid_examples[1].find("gone_template"), std::string::npos)
      << report.invalid_examples[1];

  EXPECT_EQ(db.remove_failed(), 0);
  EXPECT_EQ(db.remove_invalid(), 2);
  EXPECT_EQ(db.stats().records, 2);
  EXPECT_TRUE(db.check().ok());
  EXPECT_EQ(db.best(task().workload_key(), kHost)->config_index, static_cast<int64_t>(good));

  // Without a check (a program that installed none) the log answers as it did.
  auto plain = Database::open(dir.file("t.db"));
  EXPECT_EQ(plain.top_k(task().workload_key(), kHost, 5).size(), 2u);
}

// The emulated flag has no say in whether a record instantiates: the check takes an emulated
// record like a real one, and best passes over an invalid emulated record like a real one.
TEST(RecordCheck, EmulatedRecordsAreCheckedLikeRealOnes) {
  TempDir dir;
  const uint64_t good = first_index(true), bad = first_index(false);
  auto db = Database::open(dir.file("t.db"), checked());
  Record fast = record_of(good, 1e-4), invalid = record_of(bad, 1e-5),
         real = record_of(good + 1, 1e-3);
  fast.emulated = invalid.emulated = true;
  std::stringstream in;
  in << to_json_line(fast) << "\n" << to_json_line(invalid) << "\n" << to_json_line(real) << "\n";
  const ImportReport report = db.import_jsonl(in);
  EXPECT_EQ(report.imported, 2);
  EXPECT_EQ(report.rejected, 1);
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].line, 2);
  EXPECT_NE(report.errors[0].message.find("violates constraint"), std::string::npos)
      << report.errors[0].message;
  EXPECT_TRUE(db.check().ok());
  EXPECT_EQ(db.best(task().workload_key(), kHost)->config_index, static_cast<int64_t>(good + 1));
  RecordQuery with;
  with.include_emulated = true;
  const auto best = db.best(task().workload_key(), kHost, with);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->config_index, static_cast<int64_t>(good));
  EXPECT_TRUE(best->emulated);
}

TEST(RecordCheck, BestChecksOnlyTheRecordItServes) {
  TempDir dir;
  {
    auto raw = Database::open(dir.file("t.db"));
    std::vector<Record> records;
    for (uint64_t i = 0, n = 0; i < task().space().size() && n < 200; ++i)
      if (task().space().is_valid(i))
        records.push_back(record_of(i, 1e-3 + 1e-6 * static_cast<double>(n++)));
    ASSERT_EQ(records.size(), 200u);
    raw.add(records);
  }
  OpenOptions options = checked();
  const auto check = options.record_check;
  auto db = Database::open(dir.file("t.db"), options);
  const auto first = db.best(task().workload_key(), kHost);
  ASSERT_TRUE(first.has_value());
  // Walking the index in cost order, best() stops at the first record that instantiates: one
  // check per call, not one per record of the workload (200 here).
  EXPECT_EQ(check->records_asked(), 1);
  for (int i = 0; i < 100; ++i) {
    const auto again = db.best(task().workload_key(), kHost);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->id, first->id);
  }
  EXPECT_EQ(check->records_asked(), 101);
  EXPECT_EQ(db.top_k(task().workload_key(), kHost, 5).size(), 5u);
  EXPECT_EQ(check->records_asked(), 106);
}

}  // namespace
}  // namespace ktune::tuning_db
