// Tests of the re-timing at the end of a tuning run (retime_best, TuningSession) and of the spread
// flag: the re-timed figure is stored and ranks best(), a noisy timing is flagged, failed rounds
// are left out, and an emulated run re-times nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "schedule_space/task.h"
#include "schedule_space/workload.h"
#include "tuner/db_log.h"
#include "tuner/retime.h"
#include "tuner/tuning_session.h"
#include "tuning_db/database.h"

namespace ktune::tuner {
namespace {

schedule_space::Task matmul(int n) {
  const std::string s = std::to_string(n);
  return schedule_space::Task::create(
      "matmul", {{"M", s}, {"N", s}, {"K", s}},
      schedule_space::make_target_traits("llvm -mtriple=x86_64-linux-gnu -mcpu=retimetest",
                                         "x86_64-linux-gnu", 256, 2));
}

const tuning_db::TargetKey kTarget{"llvm -mtriple=x86_64-linux-gnu -mcpu=retimetest", "19.1.7"};

// Times each config at a cost set per index (1 ms when unset). The first timing of a config can
// be made lucky (`first`: its costs the first time it is measured), later ones may fail (`fail`),
// and a `noisy` config takes three times its cost the second time it is timed again.
// Remembers every batch it was given.
class ScriptedMeasurer final : public Measurer {
 public:
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) override {
    std::vector<int64_t> batch;
    std::vector<MeasureResult> out;
    for (const auto& in : inputs) {
      const auto index = static_cast<int64_t>(in.config.index());
      batch.push_back(index);
      const int n = times[index]++;
      if (n == 0 && first.count(index)) {
        out.push_back(make_ok_result(first[index]));
        continue;
      }
      if (n > 0 && fail.count(index)) {
        out.push_back(make_error_result(ErrorKind::kRun, "crashed on re-timing"));
        continue;
      }
      double c = cost.count(index) ? cost[index] : 1e-3;
      if (noisy.count(index) && n == 2) c *= 3;
      const std::string worker = workers.empty() ? "" : workers[next_worker++ % workers.size()];
      if (claims_faster.count(worker)) c /= claims_faster[worker];
      out.push_back(make_ok_result({c, c}));
      out.back().worker = worker;
    }
    batches.push_back(batch);
    return out;
  }
  std::map<int64_t, double> cost;
  std::map<int64_t, std::vector<double>> first;
  std::map<int64_t, bool> fail, noisy;
  std::map<int64_t, int> times;
  std::vector<std::vector<int64_t>> batches;
  // The devices that time the configs, one result each in turn (none: the measurer's only device,
  // ""), and how many times faster than `cost` a device says every config runs (1 when unset).
  std::vector<std::string> workers;
  std::map<std::string, double> claims_faster;
  size_t next_worker = 0;
};

std::vector<int64_t> first_valid(const schedule_space::Task& task, size_t n) {
  std::vector<int64_t> out;
  for (uint64_t i = 0; i < task.space().size() && out.size() < n; ++i)
    if (task.space().is_valid(i)) out.push_back(static_cast<int64_t>(i));
  return out;
}

// Logs one timing of each config with `m` (device key "box").
void log_configs(tuning_db::Database& db, const schedule_space::Task& task,
                 const std::vector<int64_t>& indices, ScriptedMeasurer& m,
                 const std::string& device = "box") {
  std::vector<MeasureInput> inputs;
  for (int64_t i : indices) inputs.push_back({&task, task.space().get(static_cast<uint64_t>(i))});
  const auto results = m.measure(inputs);
  const RecordContext context{kTarget, device, "seeded", "test", 0, false};
  std::vector<tuning_db::Record> records;
  for (size_t i = 0; i < inputs.size(); ++i)
    records.push_back(make_record(task, inputs[i].config, results[i], context, 0));
  db.add(records);
}

class Retime : public ::testing::Test {
 protected:
  Retime() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("ktune_retime_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
  }
  ~Retime() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST(Spread, IsTheRangeOverTheMedian) {
  EXPECT_DOUBLE_EQ(tuning_db::spread({}), 0);
  EXPECT_DOUBLE_EQ(tuning_db::spread({2.0}), 0);
  EXPECT_DOUBLE_EQ(tuning_db::spread({1.0, 2.0, 4.0}), 1.5);       // (4 - 1) / 2
  EXPECT_DOUBLE_EQ(tuning_db::spread({1.0, 3.0, 2.0, 5.0}), 1.6);  // (5 - 1) / 2.5
  EXPECT_DOUBLE_EQ(tuning_db::median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(tuning_db::median({4.0, 1.0, 3.0, 2.0}), 2.5);
  tuning_db::Record r;
  r.costs = {1.0, 1.2};  // 18 %: not noisy
  EXPECT_FALSE(r.noisy());
  r.costs = {1.0, 1.3};  // 26 %
  EXPECT_TRUE(r.noisy());
  r.retimed_costs = {1.0, 1.1, 1.05};  // the re-timing decides once there is one
  EXPECT_FALSE(r.noisy());
  EXPECT_DOUBLE_EQ(r.cost(), 1.05);
  EXPECT_DOUBLE_EQ(r.mean_cost(), 1.15);
}

// A config whose first timing was lucky (0.1 ms, really 2 ms) tops the log; re-timing gives it
// its real figure and best() serves the truly fastest one, whose record keeps both timings.
TEST_F(Retime, TheRetimedFigureIsStoredAndRanksBest) {
  const auto task = matmul(16);
  const auto v = first_valid(task, 7);
  ASSERT_EQ(v.size(), 7u);
  auto db = tuning_db::Database::open(file("log.db"));
  ScriptedMeasurer m;
  for (size_t i = 0; i < 7; ++i) m.cost[v[i]] = 1e-3 * static_cast<double>(i + 1);
  m.cost[v[3]] = 2e-3;
  m.first[v[3]] = {1e-4, 1e-4};
  log_configs(db, task, v, m);
  ASSERT_EQ(db.best(task.workload_key(), kTarget)->config_index, v[3]);

  m.batches.clear();
  const RetimeReport report = retime_best(db, task, m, kTarget, RetimeOptions{5, 3, "box"});
  // The five best before (v3 lucky, then v0, v1, v2, and v[4] at 5 ms), three rounds, each a
  // batch of all five in an order rotated by one.
  ASSERT_EQ(report.configs.size(), 5u);
  ASSERT_EQ(m.batches.size(), 3u);
  EXPECT_EQ(m.batches[0], (std::vector<int64_t>{v[3], v[0], v[1], v[2], v[4]}));
  EXPECT_EQ(m.batches[1], (std::vector<int64_t>{v[0], v[1], v[2], v[4], v[3]}));
  EXPECT_EQ(m.batches[2], (std::vector<int64_t>{v[1], v[2], v[4], v[3], v[0]}));
  EXPECT_DOUBLE_EQ(report.best_before_s, 1e-4);
  EXPECT_EQ(report.best_before_index, v[3]);
  EXPECT_DOUBLE_EQ(report.best_after_s, 1e-3);
  EXPECT_EQ(report.best_after_index, v[0]);
  EXPECT_DOUBLE_EQ(report.configs[0].after_s, 2e-3);

  const auto best = db.best(task.workload_key(), kTarget);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config_index, v[0]);
  const auto top = db.top_k(task.workload_key(), kTarget, 7);
  ASSERT_EQ(top.size(), 7u);
  // v3 now ranks by its re-timed 2 ms, tied with v1 (2 ms) and after it by id order.
  const auto lucky = std::find_if(
      top.begin(), top.end(), [&](const tuning_db::Record& r) { return r.config_index == v[3]; });
  ASSERT_NE(lucky, top.end());
  EXPECT_EQ(lucky->costs, (std::vector<double>{1e-4, 1e-4}));  // the first timing stays
  EXPECT_EQ(lucky->retimed_costs, (std::vector<double>{2e-3, 2e-3, 2e-3}));
  EXPECT_DOUBLE_EQ(lucky->cost(), 2e-3);
  EXPECT_NEAR(lucky->gflops(), task.flop() / 2e-3 / 1e9, 1e-9);
  EXPECT_EQ(top.back().config_index, v[6]);  // never re-timed: 7 ms as measured
  EXPECT_TRUE(top.back().retimed_costs.empty());
  const auto st = db.stats();
  EXPECT_EQ(st.retimed_records, 5);
  EXPECT_EQ(st.noisy_records, 0);

  // The figure travels with the record: exported and imported elsewhere, it still ranks.
  std::stringstream lines;
  db.export_jsonl(lines);
  auto other = tuning_db::Database::open(file("other.db"));
  EXPECT_EQ(other.import_jsonl(lines).imported, 7);
  EXPECT_EQ(other.best(task.workload_key(), kTarget)->config_index, v[0]);
  EXPECT_EQ(other.stats().retimed_records, 5);
}

// The fallback's first timing was unlucky (200 ms, really 0.5 ms): ranked 101st, it is still
// re-timed beside the five best, and the build is served it. Without the fallback in the log the
// five best alone are re-timed.
TEST_F(Retime, TheFallbackIsRetimedBesideTheBest) {
  const auto task = matmul(16);
  const auto fallback = static_cast<int64_t>(task.fallback_config().index());
  std::vector<int64_t> v;
  for (int64_t i : first_valid(task, 101))
    if (i != fallback && v.size() < 100) v.push_back(i);
  ASSERT_EQ(v.size(), 100u);
  auto db = tuning_db::Database::open(file("log.db"));
  ScriptedMeasurer m;
  for (size_t i = 0; i < v.size(); ++i) m.cost[v[i]] = 1e-3 * static_cast<double>(i + 1);
  log_configs(db, task, v, m);
  auto without = tuning_db::Database::open(file("without.db"));
  log_configs(without, task, v, m);
  m.cost[fallback] = 5e-4;
  m.first[fallback] = {2e-1, 2e-1};
  log_configs(db, task, {fallback}, m);
  ASSERT_EQ(db.best(task.workload_key(), kTarget)->config_index, v[0]);

  m.batches.clear();
  const RetimeReport report = retime_best(db, task, m, kTarget, RetimeOptions{5, 3, "box"});
  ASSERT_EQ(report.configs.size(), 6u);
  EXPECT_EQ(m.batches.at(0), (std::vector<int64_t>{v[0], v[1], v[2], v[3], v[4], fallback}));
  EXPECT_EQ(report.configs[5].config_index, fallback);
  EXPECT_DOUBLE_EQ(report.configs[5].before_s, 2e-1);
  EXPECT_DOUBLE_EQ(report.configs[5].after_s, 5e-4);
  EXPECT_EQ(report.best_after_index, fallback);
  EXPECT_EQ(db.best(task.workload_key(), kTarget)->config_index, fallback);
  EXPECT_TRUE(report.with_fallback);
  EXPECT_EQ(
      describe(report).rfind("re-timed the 5 best configs and the fallback over 3 interleaved "
                             "rounds",
                             0),
      0u)
      << describe(report);

  EXPECT_EQ(retime_best(without, task, m, kTarget, RetimeOptions{5, 3, "box"}).configs.size(), 5u);
}

// The five best all had lucky first timings (0.1 ms, really 5 ms), and so had the sixth (0.2 ms,
// really 3 ms): the first pass demotes the five, the sixth leads untimed, so a second pass times
// the new top five; the best served (v6, 1 ms) has been re-timed.
TEST_F(Retime, WhenEveryChosenConfigIsDemotedTheNewBestIsRetimedToo) {
  const auto task = matmul(16);
  const auto v = first_valid(task, 8);
  ASSERT_EQ(v.size(), 8u);
  auto db = tuning_db::Database::open(file("log.db"));
  ScriptedMeasurer m;
  for (size_t i = 0; i < 5; ++i) {
    m.cost[v[i]] = 5e-3;
    m.first[v[i]] = {1e-4};
  }
  m.cost[v[5]] = 3e-3;
  m.first[v[5]] = {2e-4};
  m.cost[v[6]] = 1e-3;
  m.cost[v[7]] = 4e-3;
  log_configs(db, task, v, m);
  m.batches.clear();
  const RetimeReport report = retime_best(db, task, m, kTarget, RetimeOptions{5, 3, "box"});
  EXPECT_EQ(report.passes, 2);
  EXPECT_EQ(report.measured, 30);
  ASSERT_EQ(m.batches.size(), 6u);  // two passes of three rounds
  EXPECT_EQ(std::set<int64_t>(m.batches[0].begin(), m.batches[0].end()),
            std::set<int64_t>(v.begin(), v.begin() + 5));
  // The second pass: v5 (0.2 ms), v6 (1 ms), v7 (4 ms) and two of the demoted five (5 ms).
  ASSERT_EQ(m.batches[3].size(), 5u);
  EXPECT_EQ(m.batches[3][0], v[5]);
  EXPECT_EQ(m.batches[3][1], v[6]);
  EXPECT_EQ(m.batches[3][2], v[7]);
  EXPECT_DOUBLE_EQ(report.best_before_s, 1e-4);
  EXPECT_DOUBLE_EQ(report.best_after_s, 1e-3);
  EXPECT_EQ(report.best_after_index, v[6]);
  EXPECT_TRUE(report.best_after_retimed);
  const auto best = db.best(task.workload_key(), kTarget);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config_index, v[6]);
  EXPECT_EQ(best->retimed_costs, (std::vector<double>{1e-3, 1e-3, 1e-3}));
  // Each record once in the report; one re-timed twice keeps its figure from before the first.
  EXPECT_EQ(report.configs.size(), 8u);
  for (const RetimedConfig& c : report.configs) {
    EXPECT_DOUBLE_EQ(c.after_s, m.cost[c.config_index]) << c.config_index;
    EXPECT_DOUBLE_EQ(c.before_s, m.first.count(c.config_index) ? m.first[c.config_index][0]
                                                               : m.cost[c.config_index])
        << c.config_index;
  }
  EXPECT_NE(describe(report).find("in 2 passes"), std::string::npos) << describe(report);
}

// On a machine whose load rose after the search every re-timed config comes out slower than the
// first timings of the others: after kMaxRetimePasses passes the best is a first timing, and the
// report says so rather than calling it re-timed.
TEST_F(Retime, WhenEveryPassDemotesAllItTimesTheBestIsAFirstTimingAndSaysSo) {
  const auto task = matmul(16);
  const auto v = first_valid(task, 8);
  ASSERT_EQ(v.size(), 8u);
  auto db = tuning_db::Database::open(file("log.db"));
  ScriptedMeasurer m;
  for (size_t i = 0; i < v.size(); ++i) {
    m.cost[v[i]] = 5e-3;
    m.first[v[i]] = {1e-4 * static_cast<double>(i + 1)};
  }
  log_configs(db, task, v, m);
  // One config a pass (and the fallback's record when it is one of them): three passes time at
  // most six of the eight, each demoted from its lucky first timing to 5 ms.
  const RetimeReport report = retime_best(db, task, m, kTarget, RetimeOptions{1, 1, "box"});
  EXPECT_EQ(report.passes, kMaxRetimePasses);
  const auto best = db.best(task.workload_key(), kTarget);
  ASSERT_TRUE(best);
  EXPECT_TRUE(best->retimed_costs.empty());
  EXPECT_EQ(report.best_after_index, best->config_index);
  EXPECT_LT(report.best_after_s, 1e-3);
  EXPECT_FALSE(report.best_after_retimed);
  const std::string line = describe(report);
  EXPECT_NE(line.find("; the best, config #" + std::to_string(best->config_index) +
                      ", is a first timing, not re-timed: each of the 3 passes demoted every "
                      "config it re-timed"),
            std::string::npos)
      << line;
  // A job's summary, as a client reads it back, says the same.
  EXPECT_EQ(describe(retime_report_from_json(to_json(report))), line);
  EXPECT_TRUE(retime_report_from_json(nlohmann::json::object()).best_after_retimed);
}

// A timing whose repeats spread more than kNoisySpread is flagged when logged; a re-timing whose
// rounds spread is flagged too, and a round that fails is left out of the median.
TEST_F(Retime, SpreadIsFlaggedAndFailedRoundsAreLeftOut) {
  const auto task = matmul(16);
  const auto v = first_valid(task, 3);
  auto db = tuning_db::Database::open(file("log.db"));
  ScriptedMeasurer m;
  m.cost = {{v[0], 1e-3}, {v[1], 2e-3}, {v[2], 3e-3}};
  m.first[v[0]] = {1e-3, 1.5e-3};  // 40 % apart
  log_configs(db, task, v, m);
  auto records = db.top_k(task.workload_key(), kTarget, 3);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_TRUE(records[0].noisy());
  EXPECT_FALSE(records[1].noisy());
  EXPECT_EQ(db.stats().noisy_records, 1);

  m.noisy[v[1]] = true;  // rounds at 2, 6, 2 ms: the median is 2 ms, the spread 200 %
  m.fail[v[2]] = true;   // every round fails: keeps its 3 ms, not re-timed
  const RetimeReport report = retime_best(db, task, m, kTarget, RetimeOptions{5, 3, "box"});
  ASSERT_EQ(report.configs.size(), 3u);
  EXPECT_FALSE(report.configs[0].noisy);  // v0's rounds agree: the flag goes
  EXPECT_TRUE(report.configs[1].noisy);
  EXPECT_DOUBLE_EQ(report.configs[1].after_s, 2e-3);
  EXPECT_EQ(report.configs[2].failed_rounds, 3);
  EXPECT_DOUBLE_EQ(report.configs[2].after_s, 0);

  records = db.top_k(task.workload_key(), kTarget, 3);
  EXPECT_EQ(records[0].config_index, v[0]);
  EXPECT_FALSE(records[0].noisy());
  EXPECT_EQ(records[1].config_index, v[1]);
  EXPECT_TRUE(records[1].noisy());
  EXPECT_EQ(records[1].retimed_costs, (std::vector<double>{2e-3, 6e-3, 2e-3}));
  EXPECT_TRUE(records[2].retimed_costs.empty());
  EXPECT_DOUBLE_EQ(records[2].cost(), 3e-3);
  EXPECT_EQ(db.stats().noisy_records, 1);
  // The JSON line says so.
  const nlohmann::json line = tuning_db::to_json(records[1]);
  EXPECT_EQ(line["meta"]["noisy"], true);
  EXPECT_EQ(line["meta"]["retimed"].size(), 3u);
}

// Only records of the session's device key are re-timed: another key's device is not this one.
TEST_F(Retime, OnlyTheDeviceKeysRecordsAreRetimed) {
  const auto task = matmul(16);
  const auto v = first_valid(task, 4);
  auto db = tuning_db::Database::open(file("log.db"));
  ScriptedMeasurer m;
  m.cost = {{v[0], 1e-3}, {v[1], 2e-3}, {v[2], 3e-3}, {v[3], 4e-3}};
  log_configs(db, task, {v[0], v[1]}, m, "other");
  log_configs(db, task, {v[2], v[3]}, m, "box");
  m.batches.clear();
  const RetimeReport report = retime_best(db, task, m, kTarget, RetimeOptions{5, 2, "box"});
  ASSERT_EQ(report.configs.size(), 2u);
  EXPECT_EQ(m.batches, (std::vector<std::vector<int64_t>>{{v[2], v[3]}, {v[3], v[2]}}));
}

// On a measurer of several devices (a server's workers), a device that times a record more than
// kDisputeFactor away from its own device's figure disputes it: the record keeps its figure (the
// other device's rounds are not stored), best() passes over it, and a device other than its own
// that agrees settles it. Both ways: a device saying "10x faster" disputes honest records, and an
// honest device disputes a record that one said was 10x faster.
TEST_F(Retime, ADeviceThatDisagreesDisputesARecordAndNeverRewritesIt) {
  const auto task = matmul(16);
  const auto v = first_valid(task, 5);
  ASSERT_EQ(v.size(), 5u);
  auto db = tuning_db::Database::open(file("log.db"));
  ScriptedMeasurer m;
  for (size_t i = 0; i < 5; ++i) m.cost[v[i]] = 1e-3 * static_cast<double>(i + 1);
  m.workers = {"w1"};
  log_configs(db, task, {v[0], v[1], v[2], v[3]}, m);
  ASSERT_EQ(db.best(task.workload_key(), kTarget)->worker, "w1");

  // w2 says every config runs 10x faster than w1 timed it: it rewrites nothing and nothing of
  // w1's is served until another device settles it.
  m.workers = {"w2"};
  m.claims_faster["w2"] = 10;
  const RetimeReport liar = retime_best(db, task, m, kTarget, RetimeOptions{5, 3, "box"});
  ASSERT_EQ(liar.configs.size(), 4u);
  for (const RetimedConfig& c : liar.configs) {
    EXPECT_TRUE(c.disputed) << c.config_index;
    EXPECT_DOUBLE_EQ(c.after_s, c.before_s) << c.config_index;  // its own figure stays
  }
  EXPECT_EQ(liar.passes, 1);
  EXPECT_EQ(liar.best_after_index, -1);
  EXPECT_FALSE(db.best(task.workload_key(), kTarget));
  tuning_db::RecordQuery all;
  all.include_disputed = true;
  for (const tuning_db::Record& r : db.top_k(task.workload_key(), kTarget, 5, all)) {
    EXPECT_TRUE(r.disputed);
    EXPECT_TRUE(r.retimed_costs.empty()) << "w2's rounds were stored on w1's record";
    EXPECT_DOUBLE_EQ(r.cost(), m.cost[r.config_index]);
  }
  EXPECT_EQ(db.stats().disputed_records, 4);
  EXPECT_NE(describe(liar).find("; 4 disputed (another device of the key timed them more than 2x "
                                "away: not served until a device other than theirs agrees)"),
            std::string::npos)
      << describe(liar);
  // The flag travels with the record.
  std::stringstream lines;
  db.export_jsonl(lines);
  auto copy = tuning_db::Database::open(file("copy.db"));
  EXPECT_EQ(copy.import_jsonl(lines).imported, 4);
  EXPECT_EQ(copy.stats().disputed_records, 4);
  EXPECT_FALSE(copy.best(task.workload_key(), kTarget));

  // w3, honest, agrees: the records are settled and served again, its rounds their figure.
  m.workers = {"w3"};
  const RetimeReport settled = retime_best(db, task, m, kTarget, RetimeOptions{5, 3, "box"});
  ASSERT_EQ(settled.configs.size(), 4u);
  for (const RetimedConfig& c : settled.configs) EXPECT_FALSE(c.disputed) << c.config_index;
  auto best = db.best(task.workload_key(), kTarget);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config_index, v[0]);
  EXPECT_EQ(best->retimed_costs, (std::vector<double>{1e-3, 1e-3, 1e-3}));
  EXPECT_EQ(db.stats().disputed_records, 0);

  // w2 logs v4 at 10x its speed: it leads until w1, honest, re-times it; then it is disputed,
  // keeps w2's figure, and the build is served v0 again.
  m.workers = {"w2"};
  log_configs(db, task, {v[4]}, m);
  ASSERT_EQ(db.best(task.workload_key(), kTarget)->config_index, v[4]);
  m.workers = {"w1"};
  const RetimeReport caught = retime_best(db, task, m, kTarget, RetimeOptions{5, 3, "box"});
  EXPECT_EQ(caught.best_before_index, v[4]);
  EXPECT_EQ(caught.best_after_index, v[0]);
  best = db.best(task.workload_key(), kTarget);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config_index, v[0]);
  const auto lie = db.config_best(task.workload_key(), kTarget, v[4], all);
  ASSERT_TRUE(lie);
  EXPECT_TRUE(lie->disputed);
  EXPECT_DOUBLE_EQ(lie->cost(), 5e-4);
  EXPECT_EQ(db.stats().disputed_records, 1);
}

// A session re-times at its end and says so in its report and summary; an emulated one does not.
TEST_F(Retime, SessionRetimesAtItsEndUnlessEmulated) {
  const auto task = matmul(16);
  auto db = tuning_db::Database::open(file("log.db"));
  ScriptedMeasurer m;
  SessionOptions o;
  o.tuner = "random";
  o.trials = 8;
  o.batch_size = 8;
  o.device_key = "box";
  o.claim_configs = false;
  const SessionReport r = TuningSession(task, db, m, kTarget, o).run();
  ASSERT_EQ(r.retime.configs.size(), 5u);
  EXPECT_EQ(r.retime.rounds, 3);
  // The fallback, the 8 trials, then three rounds of five.
  ASSERT_EQ(m.batches.size(), 5u);
  EXPECT_EQ(m.batches[2].size(), 5u);
  EXPECT_EQ(db.stats().retimed_records, 5);
  EXPECT_EQ(db.stats().records, 9);  // re-timing adds no record
  const nlohmann::json summary = summary_json(task, kTarget, r);
  ASSERT_TRUE(summary.contains("retimed"));
  EXPECT_EQ(summary["retimed"]["configs"].size(), 5u);
  EXPECT_EQ(describe(r.retime).rfind("re-timed the 5 best configs over 3 interleaved rounds", 0),
            0u);

  auto emulated_db = tuning_db::Database::open(file("emulated.db"));
  ScriptedMeasurer e;
  o.emulated = true;
  const SessionReport re = TuningSession(task, emulated_db, e, kTarget, o).run();
  EXPECT_TRUE(re.retime.empty());
  EXPECT_EQ(e.batches.size(), 2u);  // the fallback and the trials only
  EXPECT_EQ(emulated_db.stats().retimed_records, 0);
}

}  // namespace
}  // namespace ktune::tuner
