// Tests that the commands which only read a tuning log (best, build, db
// stats/check/best/top/export) work on a log the user may not write, write nothing to it or beside
// it, and that a writing command fails there with one line. As root, the commands run as user
// nobody (setpriv); otherwise the file and its directory are made read-only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/cli_util.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::quote;

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

TEST(ReadOnlyCli, ReadingCommandsWorkOnALogTheUserCannotWrite) {
  const fs::path root =
      fs::temp_directory_path() / ("ktune_read_only_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path logs = root / "logs", out = root / "out";
  fs::create_directories(logs);
  fs::create_directories(out);
  const std::string db = (logs / "tune.db").string();
  const std::string workload = "matmul M=32 N=32 K=32";
  ASSERT_EQ(testing_cli::ktune("tune " + workload + " --tuner random --trials 8 --db " + quote(db))
                .status,
            0);
  ASSERT_FALSE(fs::exists(db + "-wal"));  // closed cleanly: the WAL was checkpointed away

  std::string as_reader;
  if (::geteuid() == 0) {
    // Root writes anything: run as nobody, who may read the log but not write it or its folder.
    fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                            fs::perms::others_read);
    fs::permissions(root, fs::perms::all & ~fs::perms::group_write & ~fs::perms::others_write);
    fs::permissions(logs, fs::perms::all & ~fs::perms::group_write & ~fs::perms::others_write);
    fs::permissions(out, fs::perms::all);
    // The kernel cache ctest names is root's: nobody would be warned that it cannot use it.
    as_reader = "setpriv --reuid=65534 --regid=65534 --clear-groups -- env KTUNE_KERNEL_CACHE=off ";
  } else {
    fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    fs::permissions(logs, fs::perms::owner_read | fs::perms::owner_exec);
  }
  const std::string bin = as_reader + KTUNE_BINARY + " ";
  const std::string before = bytes_of(db);
  const auto files = listing(logs);
  const std::string key = "'matmul(M=32,N=32,K=32,layout=nn,dtype=float32)'";

  auto run = [&](const std::string& args) { return testing_cli::shell(bin + args, true); };
  auto best = run("best " + workload + " --db " + quote(db));
  EXPECT_EQ(best.status, 0) << best.err;
  EXPECT_NE(best.out.find("GFLOP/s"), std::string::npos) << best.out;
  auto stats = run("db stats --db " + quote(db));
  EXPECT_EQ(stats.status, 0) << stats.err;
  // 8 trials and the fallback the run measured.
  EXPECT_NE(stats.out.find("records    9"), std::string::npos) << stats.out;
  auto check = run("db check --db " + quote(db));
  EXPECT_EQ(check.status, 0) << check.err;
  auto exported = run("db export --db " + quote(db));
  EXPECT_EQ(exported.status, 0) << exported.err;
  EXPECT_EQ(std::count(exported.out.begin(), exported.out.end(), '\n'), 9);
  auto top = run("db top " + key + " --db " + quote(db) + " -k 3");
  EXPECT_EQ(top.status, 0) << top.err;
  auto built = run("build " + workload + " --db " + quote(db) + " --require-tuned -o " +
                   quote((out / "k.o").string()) + " --header " + quote((out / "k.h").string()));
  EXPECT_EQ(built.status, 0) << built.err;
  EXPECT_TRUE(fs::exists(out / "k.o"));

  // Nothing was written to the log or beside it.
  EXPECT_EQ(bytes_of(db), before);
  EXPECT_EQ(listing(logs), files);
  // A command that writes fails with one line.
  auto removed = run("db remove-failed --db " + quote(db));
  EXPECT_EQ(removed.status, 1);
  EXPECT_EQ(std::count(removed.err.begin(), removed.err.end(), '\n'), 1) << removed.err;

  fs::permissions(logs, fs::perms::all);
  fs::remove_all(root);
}

}  // namespace
}  // namespace ktune
