// End-to-end tests of the commands on a PostgreSQL log (a throwaway cluster of the test's own):
// `ktune db migrate` SQLite -> PostgreSQL -> SQLite keeps every record, re-timing, run, model,
// job and step thread choice, refuses a non-empty target without --append and counts what --append
// finds held; `ktune tune`, `report` and `db stats/check/export/best/top` on a postgresql:// URL.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_util.h"
#include "tests/tuning_db/postgres_util.h"
#include "tuning_db/database.h"
#include "tuning_db/job_store.h"
#include "tuning_db/model_store.h"
#include "tuning_db/run_store.h"
#include "tuning_db/step_threads_store.h"

namespace ktune::tuning_db {
namespace {

using nlohmann::json;
using testing_cli::ktune;
using testing_cli::quote;

class PostgresCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    postgres_ = testing::shared_postgres(&why);
    if (!postgres_) GTEST_SKIP() << "PostgreSQL not tested: " << why;
  }
  testing::PostgresServer* postgres_ = nullptr;
  testing::TempDir dir_;
};

// The lines a command wrote to stderr (a refusal is one).
int64_t lines_of(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

// `counts` (db migrate --json) has these values.
void expect_counts(const json& counts, const std::map<std::string, int64_t>& expected) {
  for (const auto& [name, n] : expected) EXPECT_EQ(counts[name], n) << name;
}

// A SQLite log with a bit of everything: 5 records of a run (one failed, one re-timed) and 2 of
// no run, the run's batch quality, a saved model, a finished job of the run and a queued one, a
// model's step thread choice.
void write_source(const std::string& path) {
  Database db = Database::open(path);
  RunStore runs(db);
  const int64_t run = runs.begin({"xgb", testing::matmul_key(64), testing::kHost.target, {}});
  runs.add_batch_quality(run, {0, 4, std::nullopt});
  runs.add_batch_quality(run, {1, 1, 0.75});
  runs.finish(run);
  std::vector<Record> records;
  for (int64_t i = 0; i < 5; ++i) {
    records.push_back(i == 3 ? testing::make_failure(64, i, ErrorKind::kRunTimeout)
                             : testing::make_record(64, i, {1e-3 * static_cast<double>(i + 1)}));
    records.back().run_id = run;
  }
  records.push_back(testing::make_record(128, 7, {4e-3, 5e-3}));
  records.push_back(testing::make_record(128, 8, {3e-3}));
  const std::vector<int64_t> ids = db.add(records);
  db.retime(ids[1], {0.5e-3, 0.6e-3, 0.55e-3});
  ModelStore(db).save({"xgb-rank", "matmul", testing::kHost, {{"rounds", 40}}},
                      std::vector<uint8_t>{0, 1, 2, 255, 0, 7});
  JobStore jobs(db);
  JobRow done;
  done.spec = {{"template", "matmul"}, {"trials", 5}};
  done.device_key = "x86";
  done.state = JobState::kDone;
  done.run_id = run;
  done.summary = R"({"best":{"gflops":1.5}})";
  jobs.add(done);
  JobRow queued;
  queued.spec = {{"template", "matmul"}, {"trials", 9}};
  queued.device_key = "arm";
  queued.client = "alice";
  jobs.add(queued);
  StepThreadsRow steps;
  steps.model_key = "onnx-0123456789abcdef";
  steps.target = testing::kHost.target;
  steps.threads = 2;
  steps.steps = {{"conv1", 1, 2.5e-5, 9.0e-6}, {"fc", 0, 1.25e-4, 2.0e-4}};
  steps.uncapped_s = 2.75e-3;
  steps.capped_s = 2.5e-3;
  StepThreadsStore(db).save(steps);
}

TEST_F(PostgresCli, MigrateSqliteToPostgresAndBackKeepsEverything) {
  const std::string a = dir_.file("a.db"), b = dir_.file("b.db");
  write_source(a);
  const std::string url = postgres_->create_database();

  const auto there = ktune("db migrate --from " + quote(a) + " --to " + quote(url) + " --json");
  ASSERT_EQ(there.status, 0) << there.out;
  expect_counts(json::parse(there.out), {{"records", 7},
                                         {"records_present", 0},
                                         {"runs", 1},
                                         {"run_batches", 2},
                                         {"models", 1},
                                         {"jobs", 2},
                                         {"step_threads", 1}});
  const auto back = ktune("db migrate --from " + quote(url) + " --to " + quote(b), true);
  ASSERT_EQ(back.status, 0) << back.err;
  EXPECT_NE(back.out.find("records       7\n"), std::string::npos) << back.out;

  // The same records (re-timings included) on all three, in the same order.
  const auto exported_a = ktune("db export --db " + quote(a));
  const auto exported_url = ktune("db export --db " + quote(url));
  const auto exported_b = ktune("db export --db " + quote(b));
  ASSERT_EQ(exported_a.status, 0);
  EXPECT_EQ(lines_of(exported_a.out), 7);
  EXPECT_EQ(exported_url.out, exported_a.out);
  EXPECT_EQ(exported_b.out, exported_a.out);

  // Runs, their records and batches, the model and the jobs came along.
  Database copy = Database::open(b, {.create = false});
  const auto runs = RunStore(copy).all();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].info.tuner, "xgb");
  EXPECT_TRUE(runs[0].finished_at.has_value());
  EXPECT_EQ(RunStore(copy).count_records(runs[0].id), 5);
  const auto quality = RunStore(copy).batch_quality(runs[0].id);
  ASSERT_EQ(quality.size(), 2u);
  EXPECT_FALSE(quality[0].rank_correlation.has_value());
  EXPECT_DOUBLE_EQ(quality[1].rank_correlation.value_or(0), 0.75);
  const auto model = ModelStore(copy).load("xgb-rank", "matmul", testing::kHost);
  ASSERT_TRUE(model.has_value());
  EXPECT_EQ(model->blob, (std::vector<uint8_t>{0, 1, 2, 255, 0, 7}));
  EXPECT_EQ(model->info.metadata["rounds"], 40);
  const auto jobs = JobStore(copy).all();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].state, JobState::kDone);
  EXPECT_EQ(jobs[0].run_id, runs[0].id);
  EXPECT_EQ(jobs[0].summary, R"({"best":{"gflops":1.5}})");
  EXPECT_EQ(jobs[1].state, JobState::kQueued);
  EXPECT_EQ(jobs[1].run_id, 0);
  EXPECT_EQ(jobs[1].client, "alice");
  EXPECT_EQ(copy.stats().retimed_records, 1);
  const auto steps = StepThreadsStore(copy).find("onnx-0123456789abcdef", testing::kHost.target);
  ASSERT_TRUE(steps.has_value());
  EXPECT_EQ(steps->threads, 2);
  ASSERT_EQ(steps->steps.size(), 2u);
  EXPECT_EQ(steps->steps[0].layer, "conv1");
  EXPECT_EQ(steps->steps[0].max_threads, 1);
  EXPECT_DOUBLE_EQ(steps->steps[1].one_s, 2.0e-4);
  EXPECT_DOUBLE_EQ(steps->capped_s, 2.5e-3);

  // A target that holds a log is refused in one line, unless --append: then what it holds is
  // counted and not copied again.
  const auto refused = ktune("db migrate --from " + quote(a) + " --to " + quote(url), true);
  EXPECT_EQ(refused.status, 1);
  EXPECT_EQ(lines_of(refused.err), 1) << refused.err;
  EXPECT_NE(refused.err.find("is not empty (7 records, 1 runs, 1 models, 2 jobs, 1 step_threads)"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("--append"), std::string::npos) << refused.err;
  const auto appended =
      ktune("db migrate --from " + quote(a) + " --to " + quote(url) + " --append --json");
  ASSERT_EQ(appended.status, 0) << appended.out;
  expect_counts(json::parse(appended.out), {{"records", 0},
                                            {"records_present", 7},
                                            {"runs", 0},
                                            {"runs_present", 1},
                                            {"models_present", 1},
                                            {"jobs_present", 2},
                                            {"step_threads_present", 1}});
  EXPECT_EQ(ktune("db export --db " + quote(url)).out, exported_a.out);

  // A log into itself, and a source that does not exist: one line each.
  for (const std::string& args : {"--from " + quote(url) + " --to " + quote(url),
                                  "--from " + quote(dir_.file("none.db")) + " --to " + quote(b)}) {
    const auto bad = ktune("db migrate " + args + " --append", true);
    EXPECT_EQ(bad.status, 1) << args;
    EXPECT_EQ(lines_of(bad.err), 1) << bad.err;
  }
}

TEST_F(PostgresCli, TuneReportAndDbCommandsWorkOnAUrl) {
  const std::string url = postgres_->create_database();
  const std::string workload = "matmul M=32 N=32 K=32";
  const auto tuned = ktune("tune " + workload + " --tuner random --trials 8 --db " + quote(url));
  ASSERT_EQ(tuned.status, 0) << tuned.out;

  Database db = Database::open(url, {.create = false});
  const auto summaries = db.summaries();
  ASSERT_EQ(summaries.size(), 1u);
  const std::string key = summaries[0].workload_key;
  const auto top_record = db.best(key, summaries[0].target);
  ASSERT_TRUE(top_record.has_value());
  const auto best = ktune("db best " + quote(key) + " --json --db " + quote(url));
  ASSERT_EQ(best.status, 0) << best.out;
  const json best_json = json::parse(best.out);
  EXPECT_EQ(best_json["config"]["index"], top_record->config_index);
  EXPECT_EQ(best_json["id"], top_record->id);
  EXPECT_DOUBLE_EQ(best_json["mean_cost_s"].get<double>(), top_record->cost());

  // What a build asks: `ktune best` prints the logged best, `ktune build --require-tuned` builds
  // it (a record of the log, not the fallback).
  const auto best_cmd = ktune("best " + workload + " --json --db " + quote(url));
  ASSERT_EQ(best_cmd.status, 0) << best_cmd.out;
  const json best_cmd_json = json::parse(best_cmd.out)["best"];
  EXPECT_EQ(best_cmd_json["config"]["index"], top_record->config_index) << best_cmd.out;
  EXPECT_DOUBLE_EQ(best_cmd_json["mean_cost_s"].get<double>(), top_record->cost());
  const std::string object = dir_.file("mm.o");
  const auto built = ktune("build " + workload + " --require-tuned --db " + quote(url) + " -o " +
                           quote(object) + " --header " + quote(dir_.file("mm.h")));
  ASSERT_EQ(built.status, 0) << built.out << built.err;
  EXPECT_TRUE(std::filesystem::exists(object));

  const std::string page = dir_.file("report.html");
  const auto report = ktune("report --db " + quote(url) + " -o " + quote(page), true);
  ASSERT_EQ(report.status, 0) << report.err;
  std::ifstream page_in(page);
  const std::string page_text((std::istreambuf_iterator<char>(page_in)), {});
  EXPECT_NE(page_text.find("matmul(M=32,N=32,K=32"), std::string::npos);

  // 8 trials and the fallback config.
  const auto stats = ktune("db stats --json --db " + quote(url));
  ASSERT_EQ(stats.status, 0) << stats.out;
  EXPECT_EQ(json::parse(stats.out)["records"], 9);
  const auto check = ktune("db check --json --db " + quote(url));
  ASSERT_EQ(check.status, 0) << check.out;
  EXPECT_EQ(json::parse(check.out)["ok"], true);
  const auto exported = ktune("db export --db " + quote(url));
  ASSERT_EQ(exported.status, 0);
  EXPECT_EQ(lines_of(exported.out), 9);
  const auto top = ktune("db top " + quote(key) + " -k 3 --json --db " + quote(url));
  ASSERT_EQ(top.status, 0) << top.out;
  const json listed = json::parse(top.out);
  const auto expected = db.top_k(key, summaries[0].target, 3);
  ASSERT_EQ(listed.size(), 3u);
  ASSERT_EQ(expected.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(listed[i]["config"]["index"], expected[i].config_index) << i;
    EXPECT_DOUBLE_EQ(listed[i]["mean_cost_s"].get<double>(), expected[i].cost()) << i;
  }

  // A URL whose database does not exist: one line, exit 1, the password not shown.
  const std::string missing = "postgresql://ktune:secret@/nosuchdb?host=/nonexistent";
  const auto refused = ktune("db stats --db " + quote(missing), true);
  EXPECT_EQ(refused.status, 1);
  EXPECT_EQ(lines_of(refused.err), 1) << refused.err;
  EXPECT_EQ(refused.err.find("secret"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace ktune::tuning_db
