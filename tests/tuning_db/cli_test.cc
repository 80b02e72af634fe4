// End-to-end test of `ktune db ...`: the commands read a log written through the API, print
// the right numbers as JSON, and fail with one clear line and a non-zero status on bad input.
// Records that do not instantiate are never served, are reported by check and removed by
// remove-invalid.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "codegen/target.h"
#include "schedule_space/task.h"
#include "tests/cli_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"

namespace ktune::tuning_db {
namespace {

using testing_cli::ktune;
using testing_cli::Output;
using testing_cli::quote;

// matmul n on this host, as `ktune tune` would tune it: db best/top serve only records whose
// config instantiates on their target.
schedule_space::Task host_matmul(int n) {
  const auto host = codegen::Target::host();
  const std::string s = std::to_string(n);
  return schedule_space::Task::create(
      "matmul", {{"M", s}, {"N", s}, {"K", s}},
      schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(),
                                         host.cores()));
}
const schedule_space::Task& task() {
  static const auto t = host_matmul(64);
  return t;
}
const TargetKey& host_key() {
  static const TargetKey key{codegen::Target::host().str(), codegen::llvm_version()};
  return key;
}

// The n-th valid (or invalid) config index of the space.
int64_t nth(int n, bool valid = true) {
  for (uint64_t i = 0; i < task().space().size(); ++i)
    if (task().space().is_valid(i) == valid && n-- == 0) return static_cast<int64_t>(i);
  ADD_FAILURE() << "space too small";
  return 0;
}

Record record(int64_t index, std::vector<double> costs) {
  Record r = testing::make_record(64, index, std::move(costs), host_key());
  r.workload_key = task().workload_key();
  r.args = task().args_json();
  r.config = task().space().get(static_cast<uint64_t>(index)).to_json();
  return r;
}

class DbCli : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("cli.db");
    Database db = Database::open(path_);
    Record failure = record(nth(2), {});
    failure.error = ErrorKind::kWrongAnswer;
    db.add({record(nth(0), {3e-3}), record(nth(1), {1e-3, 2e-3}), failure, record(nth(3), {4e-3})});
  }
  testing::TempDir dir_;
  std::string path_;
};

TEST_F(DbCli, BestAndTopPrintTheFastestSuccessfulRecords) {
  const std::string key = quote(task().workload_key());
  Output best = ktune("db best " + key + " --db " + path_ + " --json");
  ASSERT_EQ(best.status, 0) << best.out;
  auto j = nlohmann::json::parse(best.out);
  EXPECT_EQ(j["config"]["index"], nth(1));
  EXPECT_DOUBLE_EQ(j["mean_cost_s"].get<double>(), 1.5e-3);
  EXPECT_EQ(j["input"][0], host_key().target);

  Output top = ktune("db top " + key + " -k 2 --target " + quote(host_key().target) + " --db " +
                     path_ + " --json");
  ASSERT_EQ(top.status, 0) << top.out;
  auto t = nlohmann::json::parse(top.out);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0]["config"]["index"], nth(1));
  EXPECT_EQ(t[1]["config"]["index"], nth(0));

  Output human = ktune("db best " + key + " --db " + path_);
  EXPECT_EQ(human.status, 0);
  EXPECT_NE(human.out.find("config     #" + std::to_string(nth(1))), std::string::npos)
      << human.out;
  EXPECT_NE(human.out.find("1.5000 ms"), std::string::npos) << human.out;

  // A key typed without one of its arguments (matmul's layout) is refused with the log's keys
  // of that template; one of a template the log lacks points to db stats.
  Output typed = ktune("db best 'matmul(M=64,N=64,K=64,dtype=float32)' --db " + path_, true);
  EXPECT_EQ(typed.status, 1);
  EXPECT_NE(typed.err.find("its workloads of template 'matmul' (a key names every argument): " +
                           task().workload_key() + "\n"),
            std::string::npos)
      << typed.err;
  EXPECT_EQ(std::count(typed.err.begin(), typed.err.end(), '\n'), 1) << typed.err;
  Output other = ktune("db best 'conv2d(N=1)' --db " + path_, true);
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.err.find("(`ktune db stats` lists its workloads)"), std::string::npos)
      << other.err;
}

// nth(1)'s timings (1 and 2 ms) spread 67 %: flagged noisy in best, db stats and the report. A
// re-timing of nth(0) (3 ms at first, 1 ms in each round) makes it the best, marked re-timed.
TEST_F(DbCli, NoisyAndRetimedRecordsAreShown) {
  const std::string key = quote(task().workload_key());
  const std::string workload = "matmul M=64 N=64 K=64 --target " + quote(host_key().target);
  Output stats = ktune("db stats --db " + path_ + " --json");
  ASSERT_EQ(stats.status, 0) << stats.out;
  EXPECT_EQ(nlohmann::json::parse(stats.out)["noisy_records"], 1);
  EXPECT_EQ(nlohmann::json::parse(stats.out)["retimed_records"], 0);
  Output best = ktune("best " + workload + " --db " + path_ + " --json");
  ASSERT_EQ(best.status, 0) << best.out;
  auto j = nlohmann::json::parse(best.out);
  EXPECT_EQ(j["best"]["config"]["index"], nth(1));
  EXPECT_EQ(j["best"]["noisy"], true);
  EXPECT_EQ(j["best"]["retimed"], false);
  EXPECT_EQ(j["best"]["meta"]["noisy"], true);
  EXPECT_NE(ktune("best " + workload + " --db " + path_).out.find("NOISY timing"),
            std::string::npos);
  const std::string page = dir_.file("report.html");
  Output report = ktune("report --db " + path_ + " -o " + quote(page));
  ASSERT_EQ(report.status, 0) << report.out;
  EXPECT_EQ(report.out, "noisy best: " + task().workload_key() + " on " + host_key().target +
                            ": its timings spread more than 25%\n");
  std::ifstream in(page);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("NOISY"), std::string::npos);

  // A copy of the log before the re-timing: an import of the re-timed records adds it there.
  const std::string before = dir_.file("before.db");
  {
    Database db = Database::open(path_);
    std::ofstream copy(dir_.file("before.jsonl"));
    db.export_jsonl(copy);
  }
  ASSERT_EQ(
      ktune("db import --db " + quote(before) + " " + quote(dir_.file("before.jsonl"))).status, 0);
  {
    Database db = Database::open(path_);
    const auto top = db.top_k(task().workload_key(), host_key(), 3);
    ASSERT_EQ(top.size(), 3u);
    ASSERT_EQ(top[1].config_index, nth(0));
    db.retime(top[1].id, {1e-3, 1e-3, 1e-3});
  }
  best = ktune("best " + workload + " --db " + path_ + " --json");
  ASSERT_EQ(best.status, 0) << best.out;
  j = nlohmann::json::parse(best.out);
  EXPECT_EQ(j["best"]["config"]["index"], nth(0));
  EXPECT_EQ(j["best"]["retimed"], true);
  EXPECT_EQ(j["best"]["noisy"], false);
  EXPECT_DOUBLE_EQ(j["best"]["mean_cost_s"].get<double>(), 1e-3);
  stats = ktune("db stats --db " + path_ + " --json");
  EXPECT_EQ(nlohmann::json::parse(stats.out)["retimed_records"], 1);
  Output human = ktune("db best " + key + " --db " + path_);
  EXPECT_NE(human.out.find("re-timed   1.0000 ms, the median of 3 interleaved rounds"),
            std::string::npos)
      << human.out;
  report = ktune("report --db " + path_ + " -o " + quote(page));
  EXPECT_EQ(report.out, "");  // the best is no longer noisy

  // Exported and imported into another log, the re-timed record keeps its rounds: the other log
  // serves the same config by the same figure. Into the copy that holds the record without its
  // re-timing, the import adds the re-timing and nothing else.
  const std::string lines = quote(dir_.file("records.jsonl"));
  ASSERT_EQ(ktune("db export --db " + path_ + " --out " + lines).status, 0);
  for (const std::string& other : {dir_.file("o.db"), before}) {
    Output imported = ktune("db import --json --db " + quote(other) + " " + lines);
    ASSERT_EQ(imported.status, 0) << imported.out << imported.err;
    const auto counts = nlohmann::json::parse(imported.out);
    EXPECT_EQ(counts["imported"], other == before ? 0 : 4) << other;
    EXPECT_EQ(counts["retimed"], other == before ? 1 : 0) << other;
    EXPECT_EQ(counts["already_present"], other == before ? 3 : 0) << other;
    best = ktune("best " + workload + " --db " + quote(other) + " --json");
    ASSERT_EQ(best.status, 0) << best.out;
    j = nlohmann::json::parse(best.out);
    EXPECT_EQ(j["best"]["config"]["index"], nth(0)) << other;
    EXPECT_EQ(j["best"]["retimed"], true) << other;
    EXPECT_EQ(j["best"]["meta"]["retimed"], (std::vector<double>{1e-3, 1e-3, 1e-3})) << other;
    EXPECT_DOUBLE_EQ(j["best"]["mean_cost_s"].get<double>(), 1e-3) << other;
    stats = ktune("db stats --db " + quote(other) + " --json");
    EXPECT_EQ(nlohmann::json::parse(stats.out)["retimed_records"], 1) << other;
    EXPECT_EQ(nlohmann::json::parse(stats.out)["noisy_records"], 1) << other;  // nth(1)'s
  }
  // Imported again: held with its re-timing, nothing changes.
  Output again = ktune("db import --json --db " + quote(before) + " " + lines);
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(nlohmann::json::parse(again.out)["retimed"], 0);
  EXPECT_EQ(nlohmann::json::parse(again.out)["already_present"], 4);
}

TEST_F(DbCli, RecordsThatDoNotInstantiateAreNeverServedReportedAndRemoved) {
  {
    // Written by another program (add() trusts its caller): faster than every valid record.
    Database db = Database::open(path_);
    Record unknown = record(nth(0), {1e-6});
    unknown.template_name = "gone_template";
    unknown.workload_key = "gone_template(N=1)";
    db.add({record(nth(0, false), {1e-5}), unknown});
  }
  const std::string key = quote(task().workload_key());
  Output best = ktune("db best " + key + " --db " + path_ + " --json");
  ASSERT_EQ(best.status, 0) << best.out;
  EXPECT_EQ(nlohmann::json::parse(best.out)["config"]["index"], nth(1));
  Output top = ktune("db top " + key + " -k 10 --db " + path_ + " --json");
  ASSERT_EQ(top.status, 0) << top.out;
  EXPECT_EQ(nlohmann::json::parse(top.out).size(), 3u);
  Output tuned = ktune("best matmul M=64 N=64 K=64 --db " + path_ + " --json");
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  EXPECT_EQ(nlohmann::json::parse(tuned.out)["best"]["config"]["index"], nth(1));

  // ktune build compiles the best record that instantiates (it used to fail on the invalid one).
  Output build =
      ktune("build matmul M=64 N=64 K=64 --db " + path_ + " -o " + quote(dir_.file("k.o")) +
                " --header " + quote(dir_.file("k.h")) + " --json",
            true);
  ASSERT_EQ(build.status, 0) << build.err;
  auto b = nlohmann::json::parse(build.out);
  EXPECT_EQ(b["config_source"], "tuned");
  EXPECT_EQ(b["config"]["index"], nth(1));

  Output check = ktune("db check --db " + path_ + " --json", true);
  EXPECT_EQ(check.status, 1) << check.err;
  auto c = nlohmann::json::parse(check.out);
  EXPECT_EQ(c["invalid_records"], 2);
  ASSERT_EQ(c["invalid_examples"].size(), 2u);
  EXPECT_NE(c["invalid_examples"][0].get<std::string>().find("violates constraint"),
            std::string::npos)
      << c;
  EXPECT_NE(c["invalid_examples"][1].get<std::string>().find("unknown template 'gone_template'"),
            std::string::npos)
      << c;

  Output failed = ktune("db remove-failed --db " + path_ + " --json");
  EXPECT_EQ(nlohmann::json::parse(failed.out)["removed"], 1);
  Output removed = ktune("db remove-invalid --db " + path_ + " --json");
  ASSERT_EQ(removed.status, 0) << removed.out;
  EXPECT_EQ(nlohmann::json::parse(removed.out)["removed"], 2);
  EXPECT_EQ(ktune("db check --db " + path_).status, 0);
  EXPECT_EQ(Database::open(path_).stats().records, 3);
}

TEST_F(DbCli, ImportRejectsRecordsThatDoNotInstantiateLineByLine) {
  std::string jsonl = dir_.file("in.jsonl");
  {
    std::ofstream out(jsonl);
    out << to_json_line(record(nth(5), {2e-3})) << "\n";         // 1: good
    out << to_json_line(record(nth(0, false), {1e-5})) << "\n";  // 2: violates a constraint
    Record garbage = record(nth(6), {2e-3});
    garbage.target.target = "llvm -mtriple=no-such-arch";
    out << to_json_line(garbage) << "\n";  // 3: garbage target
    std::string overflow = to_json_line(record(nth(7), {2e-3}));
    const size_t at = overflow.find("\"flop\":") + 7;
    overflow.replace(at, overflow.find_first_of(",}", at) - at, "1e400");
    out << overflow << "\n";                              // 4: a number overflow
    out << to_json_line(record(nth(8), {3e-3})) << "\n";  // 5: good
  }
  Output imp = ktune("db import " + jsonl + " --db " + path_ + " --json", true);
  EXPECT_EQ(imp.status, 1) << imp.err;
  auto j = nlohmann::json::parse(imp.out);
  EXPECT_EQ(j["imported"], 2);
  EXPECT_EQ(j["rejected"], 2);
  ASSERT_EQ(j["errors"].size(), 3u) << j;
  EXPECT_EQ(j["errors"][0]["line"], 2);
  EXPECT_NE(j["errors"][0]["error"].get<std::string>().find("violates constraint"),
            std::string::npos)
      << j;
  EXPECT_EQ(j["errors"][1]["line"], 3);
  EXPECT_NE(j["errors"][1]["error"].get<std::string>().find("target"), std::string::npos) << j;
  EXPECT_EQ(j["errors"][2]["line"], 4);
  EXPECT_NE(j["errors"][2]["error"].get<std::string>().find("number overflow parsing '1e400'"),
            std::string::npos)
      << j;
  EXPECT_NE(imp.err.find("1 malformed lines and 2 records that do not instantiate skipped"),
            std::string::npos)
      << imp.err;
  EXPECT_EQ(Database::open(path_).stats().records, 4 + 2);
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
  EXPECT_EQ(db.best(task().workload_key(), host_key())->config_index, nth(1));
}

// `db import` streams: a progress line on stderr per committed batch before the last, duplicates
// counted (a second import of the file adds nothing).
TEST_F(DbCli, ImportShowsProgressPerBatchAndCountsDuplicates) {
  const std::string jsonl = dir_.file("many.jsonl");
  {
    std::ofstream out(jsonl);
    for (int i = 0; i < 250; ++i) {
      Record r = record(nth(i % 5 + 5), {1e-3 + 1e-6 * i});
      r.timestamp = 1.8e9 + i;  // 250 measurements of 5 configs: distinct records
      out << to_json_line(r) << "\n";
    }
  }
  auto progress_lines = [](const std::string& err) {
    int n = 0;
    for (size_t at = err.find("import: "); at != std::string::npos;
         at = err.find("import: ", at + 1))
      ++n;
    return n;
  };
  Output first = ktune("db import " + jsonl + " --batch 100 --db " + path_, true);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(first.out, "imported 250 records from " + jsonl + "\n");
  // After the batches of 100 and 200; the last one's counts are the summary's.
  EXPECT_EQ(progress_lines(first.err), 2) << first.err;
  EXPECT_NE(first.err.find("import: 100 lines, 100 imported, 0 already in the log"),
            std::string::npos)
      << first.err;
  EXPECT_NE(first.err.find("import: 200 lines, 200 imported"), std::string::npos) << first.err;

  Output again = ktune("db import " + jsonl + " --batch 100 --db " + path_ + " --json", true);
  ASSERT_EQ(again.status, 0) << again.err;
  const auto j = nlohmann::json::parse(again.out);
  EXPECT_EQ(j["imported"], 0);
  EXPECT_EQ(j["already_present"], 250);
  EXPECT_EQ(progress_lines(again.err), 2) << again.err;
  EXPECT_NE(again.err.find("import: 200 lines, 0 imported, 200 already in the log"),
            std::string::npos)
      << again.err;
  EXPECT_EQ(Database::open(path_).stats().records, 4 + 250);

  Output zero = ktune("db import " + jsonl + " --batch 0 --db " + path_, true);
  EXPECT_NE(zero.status, 0);
}

// A log path that is a FIFO, a device (or a link to one) or a directory: every command that opens a
// log says so in one line and exits 1 at once (a FIFO used to block, /dev/zero to read as a log).
TEST_F(DbCli, ALogPathThatIsNoFileIsRefusedInOneLine) {
  const std::string fifo = dir_.file("fifo.db");
  ASSERT_EQ(std::system(("mkfifo " + quote(fifo)).c_str()), 0);
  const std::string zero = dir_.file("zero.db");
  ASSERT_EQ(std::system(("ln -s /dev/zero " + quote(zero)).c_str()), 0);
  const std::string directory = dir_.file("dir.db");
  ASSERT_EQ(std::system(("mkdir " + quote(directory)).c_str()), 0);
  const std::string jsonl = dir_.file("one.jsonl");
  std::ofstream(jsonl) << to_json_line(record(nth(0), {1e-3})) << "\n";
  const std::vector<std::pair<std::string, std::string>> paths = {
      {fifo, "is a FIFO"}, {zero, "is a device"}, {directory, "is a directory"}};
  const std::vector<std::string> commands = {"db stats",
                                             "db best " + quote(task().workload_key()),
                                             "db check",
                                             "db import " + jsonl,
                                             "best matmul M=64 N=64 K=64",
                                             "tune matmul M=8 N=8 K=8 --trials 1"};
  for (const auto& [path, says] : paths) {
    for (const auto& command : commands) {
      // `timeout`: a command that blocks on the FIFO fails the test instead of hanging it.
      const Output r = testing_cli::shell("timeout 60 " + std::string(KTUNE_BINARY) + " " +
                                          command + " --db " + quote(path));
      EXPECT_EQ(r.status, 1) << command << " --db " << path << ": " << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << command << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << command << ": " << r.err;
    }
  }
}

// A log that does not exist: best says so in one line, with what writes one, and creates none.
TEST_F(DbCli, BestOnALogThatDoesNotExistSaysWhatWritesOne) {
  const std::string missing = dir_.file("missing.db");
  const Output r = ktune("best matmul M=64 N=64 K=64 --db " + quote(missing), true);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("no tuning log at " + missing +
                       " (`ktune tune` and `ktune tune-model` write one)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(missing));
}

// Records of emulated devices: counted apart by db stats, never served by best, db best or build
// without --emulated (a workload measured only under emulation says so and names the flag), and
// marked when served with it.
TEST_F(DbCli, EmulatedRecordsAreCountedApartAndServedOnlyWithTheFlag) {
  const auto small = host_matmul(32);
  const int64_t small_index = small.space().is_valid(0) ? 0 : 1;
  {
    Database db = Database::open(path_);
    Record fast = record(nth(4), {0.5e-3});  // faster than every real record (best: nth(1), 1.5 ms)
    fast.emulated = true;
    fast.device_key = "rk3399";
    Record only = testing::make_record(32, 0, {0.25e-3}, host_key(), "rk3399");
    only.workload_key = small.workload_key();
    only.args = small.args_json();
    only.config = small.space().get(static_cast<uint64_t>(small_index)).to_json();
    only.config_index = small_index;
    only.emulated = true;
    db.add({fast, only});
  }
  Output stats = ktune("db stats --db " + path_ + " --json");
  ASSERT_EQ(stats.status, 0) << stats.out;
  auto s = nlohmann::json::parse(stats.out);
  EXPECT_EQ(s["records"], 6);
  EXPECT_EQ(s["emulated_records"], 2);
  EXPECT_EQ(s["emulated_ok_records"], 2);
  ASSERT_EQ(s["per_workload"].size(), 2u);
  const auto& w32 = s["per_workload"][0];  // "M=32" sorts before "M=64"
  const auto& w64 = s["per_workload"][1];
  EXPECT_EQ(w64["records"], 5);
  EXPECT_EQ(w64["emulated_records"], 1);
  EXPECT_DOUBLE_EQ(w64["best_cost"].get<double>(), 1.5e-3);
  EXPECT_DOUBLE_EQ(w64["emulated_best_cost"].get<double>(), 0.5e-3);
  EXPECT_EQ(w32["records"], 1);
  EXPECT_EQ(w32["emulated_records"], 1);
  EXPECT_EQ(w32["best_cost"], 0);
  EXPECT_DOUBLE_EQ(w32["emulated_best_cost"].get<double>(), 0.25e-3);
  Output human = ktune("db stats --db " + path_);
  EXPECT_NE(human.out.find("emulated   2 of them (2 ok)"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("emulated best 500.0000 us"), std::string::npos) << human.out;

  // ktune best: the real best without the flag; the emulated one, marked, with it.
  Output real = ktune("best matmul M=64 N=64 K=64 --db " + path_ + " --json", true);
  ASSERT_EQ(real.status, 0) << real.err;
  auto r = nlohmann::json::parse(real.out);
  EXPECT_EQ(r["best"]["config"]["index"], nth(1));
  EXPECT_EQ(r["best"]["emulated"], false);
  Output with =
      ktune("best matmul M=64 N=64 K=64 --top 3 --emulated --db " + path_ + " --json", true);
  ASSERT_EQ(with.status, 0) << with.err;
  auto e = nlohmann::json::parse(with.out);
  EXPECT_EQ(e["best"]["config"]["index"], nth(4));
  EXPECT_EQ(e["best"]["emulated"], true);
  EXPECT_DOUBLE_EQ(e["best"]["mean_cost_s"].get<double>(), 0.5e-3);
  ASSERT_EQ(e["top"].size(), 3u);
  EXPECT_EQ(e["top"][1]["config"]["index"], nth(1));
  EXPECT_EQ(e["top"][2]["config"]["index"], nth(0));
  EXPECT_NE(with.err.find("emulated device"), std::string::npos) << with.err;
  Output marked = ktune("best matmul M=64 N=64 K=64 --emulated --db " + path_);
  EXPECT_NE(marked.out.find("EMULATED device"), std::string::npos) << marked.out;

  // Only emulated records: "none", with a note naming them and the flag.
  Output none = ktune("best matmul M=32 N=32 K=32 --db " + path_ + " --json");
  ASSERT_EQ(none.status, 0) << none.out;
  auto n = nlohmann::json::parse(none.out);
  EXPECT_TRUE(n["best"].is_null());
  EXPECT_NE(n["note"].get<std::string>().find("holds 1 successful record"), std::string::npos) << n;
  EXPECT_NE(n["note"].get<std::string>().find("--emulated serves them"), std::string::npos) << n;
  Output none_text = ktune("best matmul M=32 N=32 K=32 --db " + path_);
  EXPECT_NE(none_text.out.find("best:     none\nnote:     "), std::string::npos) << none_text.out;
  Output served = ktune("best matmul M=32 N=32 K=32 --emulated --db " + path_ + " --json");
  EXPECT_EQ(nlohmann::json::parse(served.out)["best"]["config"]["index"], small_index);

  // db best: likewise; a workload with only emulated records is an error that names the flag.
  Output db_best = ktune("db best " + quote(task().workload_key()) + " --db " + path_ + " --json");
  EXPECT_EQ(nlohmann::json::parse(db_best.out)["config"]["index"], nth(1));
  Output db_best_e =
      ktune("db best " + quote(task().workload_key()) + " --emulated --db " + path_ + " --json");
  EXPECT_EQ(nlohmann::json::parse(db_best_e.out)["config"]["index"], nth(4));
  EXPECT_EQ(nlohmann::json::parse(db_best_e.out)["emulated"], true);
  Output db_none = ktune("db best " + quote(small.workload_key()) + " --db " + path_, true);
  EXPECT_EQ(db_none.status, 1);
  EXPECT_NE(db_none.err.find("1 successful record measured on an emulated device"),
            std::string::npos)
      << db_none.err;
  EXPECT_NE(db_none.err.find("--emulated serves them"), std::string::npos) << db_none.err;

  // build: refuses an emulated-only workload under --require-tuned (naming the flag); with
  // --emulated it builds the emulated record's config and warns on stderr.
  const std::string outputs =
      " -o " + quote(dir_.file("e.o")) + " --header " + quote(dir_.file("e.h"));
  Output refused =
      ktune("build matmul M=32 N=32 K=32 --require-tuned --db " + path_ + outputs, true);
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("--emulated serves them"), std::string::npos) << refused.err;
  Output built =
      ktune("build matmul M=64 N=64 K=64 --emulated --require-tuned --json --db " + path_ + outputs,
            true);
  ASSERT_EQ(built.status, 0) << built.err;
  auto b = nlohmann::json::parse(built.out);
  EXPECT_EQ(b["config"]["index"], nth(4));
  EXPECT_EQ(b["record"]["emulated"], true);
  EXPECT_NE(built.err.find("timed on an emulated device"), std::string::npos) << built.err;
  Output built_real =
      ktune("build matmul M=64 N=64 K=64 --require-tuned --json --db " + path_ + outputs, true);
  ASSERT_EQ(built_real.status, 0) << built_real.err;
  EXPECT_EQ(nlohmann::json::parse(built_real.out)["config"]["index"], nth(1));
  EXPECT_EQ(built_real.err.find("emulated"), std::string::npos) << built_real.err;

  // Over the service (QueryBest with include_emulated): rpc_arm_device_test.
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
