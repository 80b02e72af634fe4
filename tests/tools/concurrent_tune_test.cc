// Two `ktune tune` processes on the same workload and log, started at once: each claims configs
// in the log before measuring them, so no config is measured twice and both finish. Their budgets
// together exceed the valid configs of the space, so without claims some config would certainly be
// measured twice.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "codegen/target.h"
#include "schedule_space/task.h"
#include "tests/cli_util.h"
#include "tuning_db/database.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::quote;

TEST(ConcurrentTune, TwoProcessesNeverMeasureAConfigTwice) {
  const fs::path dir =
      fs::temp_directory_path() / ("ktune_concurrent_tune_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "log.db").string();
  const std::string workload = "matmul M=4 N=4 K=2";
  const auto host = codegen::Target::host();
  const auto task = schedule_space::Task::create(
      "matmul", {{"M", "4"}, {"N", "4"}, {"K", "2"}},
      schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(),
                                         host.cores()));
  int64_t valid = 0;
  for (uint64_t i = 0; i < task.space().size(); ++i) valid += task.space().is_valid(i);
  ASSERT_LT(valid, 2 * 80) << "the two budgets must exceed the space";
  auto tune = [&](int seed) {
    return std::string(KTUNE_BINARY) + " tune " + workload +
           " --tuner random --trials 80 --batch-size 8 --seed " + std::to_string(seed) +
           " --number 1 --repeat 1 --min-repeat-ms 0 --threads 1 --json --db " + quote(db) + " >" +
           quote((dir / ("out" + std::to_string(seed))).string()) + " 2>&1";
  };
  // Both start at once; the shell prints both exit statuses.
  const auto r = testing_cli::shell("(" + tune(1) + ") & a=$!; (" + tune(2) +
                                    ") & b=$!; wait $a; sa=$?; wait $b; " + "echo $sa $?");
  auto tail = [&](int seed) {
    std::ifstream in(dir / ("out" + std::to_string(seed)));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > 600 ? text.substr(text.size() - 600) : text;
  };
  EXPECT_EQ(r.out, "0 0\n") << r.err << "\nrun 1 ended with:\n"
                            << tail(1) << "\nrun 2 ended with:\n"
                            << tail(2);

  tuning_db::OpenOptions read;
  read.read_only = true;
  auto log = tuning_db::Database::open(db, read);
  const std::string key = task.workload_key();
  const auto summaries = log.summaries();
  ASSERT_EQ(summaries.size(), 1u);
  ASSERT_EQ(summaries[0].workload_key, key);
  const auto measured = log.measured_indices(key, summaries[0].target);
  // Every record is a distinct config, and together the runs measured the whole valid space.
  EXPECT_EQ(static_cast<int64_t>(measured.size()), summaries[0].records);
  EXPECT_EQ(summaries[0].records, valid);
  // Both runs released their claims.
  EXPECT_EQ(log.stats().claims, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ktune
