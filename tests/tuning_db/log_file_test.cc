// Tests of what surrounds the log file: one server's lock on it (LogLock, refused on a PostgreSQL
// log), paths that are not a file refused before they are opened, and the streaming import
// (batches, progress, duplicates) on both backends.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/error.h"
#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/log_lock.h"

namespace ktune::tuning_db {
namespace {

using testing::TempDir;

// The streaming import runs on both backends.
class StreamingImportOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, StreamingImportOn, testing::kBothBackends,
                         testing::backend_test_name);

// The kind and message of the Error `f` throws; kUnknown and "" when it throws none.
template <class F>
std::pair<ErrorKind, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  return {ErrorKind::kUnknown, ""};
}

TEST(LogLock, ASecondHolderIsRefusedNamingTheFirstUntilItIsReleased) {
  TempDir dir;
  const std::string log = dir.file("server.db");
  {
    LogLock first(log);
    const auto [kind, message] = error_of([&] { LogLock second(log); });
    EXPECT_EQ(kind, ErrorKind::kInvalidArgument);
    EXPECT_NE(message.find("already served by another ktune server"), std::string::npos) << message;
    EXPECT_NE(message.find("pid " + std::to_string(::getpid())), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    // Another log is not held.
    LogLock other(dir.file("other.db"));
  }
  LogLock again(log);  // released with its holder
  EXPECT_TRUE(std::filesystem::exists(LogLock::path_of(log)));
}

// Servers may share a PostgreSQL log (each job is held apart: JobStore::try_hold): its lock
// holds nothing and writes no sidecar.
TEST(LogLock, APostgreSQLLogIsNotLocked) {
  const std::string url = "postgresql://ktune:secret@/log";
  LogLock first(url);
  LogLock second(url);
  EXPECT_FALSE(std::filesystem::exists(LogLock::path_of(url)));
}

// Each path is refused by both kinds of open, at once (a FIFO would block the open forever).
TEST(LogPath, AFifoADeviceAndADirectoryAreRefusedBeforeTheyAreOpened) {
  TempDir dir;
  const std::string fifo = dir.file("fifo.db");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string zero = dir.file("zero.db");
  std::filesystem::create_symlink("/dev/zero", zero);
  const std::string directory = dir.file("dir.db");
  std::filesystem::create_directory(directory);
  const std::vector<std::pair<std::string, std::string>> cases = {{fifo, "is a FIFO"},
                                                                  {zero, "is a device"},
                                                                  {"/dev/null", "is a device"},
                                                                  {directory, "is a directory"}};
  for (const auto& c : cases) {
    for (bool read_only : {false, true}) {
      OpenOptions options;
      options.read_only = read_only;
      const auto [kind, message] = error_of([&] { Database::open(c.first, options); });
      EXPECT_EQ(kind, ErrorKind::kDatabase) << c.first;
      EXPECT_NE(message.find(c.second), std::string::npos) << c.first << ": " << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
  // The FIFO, the directory and /dev/null are as they were.
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(std::filesystem::is_empty(directory));
}

// `n` JSON lines of distinct records (configs 0..n-1), a blank line after every 100th.
std::string lines_of(int64_t n) {
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    out += to_json_line(testing::make_record(64, i, {1e-3 + 1e-6 * static_cast<double>(i)}));
    out += '\n';
    if (i % 100 == 99) out += '\n';
  }
  return out;
}

TEST_P(StreamingImportOn, CommitsInBatchesReportsProgressAndSkipsDuplicates) {
  Database db = Database::open(fresh("log.db"));
  std::vector<ImportReport> progress;
  ImportOptions options;
  options.batch_records = 1000;
  options.on_progress = [&](const ImportReport& r) { progress.push_back(r); };

  std::istringstream in(lines_of(2500));
  const ImportReport report = db.import_jsonl(in, options);
  EXPECT_EQ(report.imported, 2500);
  EXPECT_EQ(report.already_present, 0);
  EXPECT_TRUE(report.errors.empty());
  EXPECT_EQ(report.lines, 2525);  // 25 blank lines
  EXPECT_EQ(report.batches, 3);
  ASSERT_EQ(progress.size(), 2u);  // the last batch's counts are the report's
  EXPECT_EQ(progress[0].imported, 1000);
  EXPECT_EQ(progress[1].imported, 2000);
  EXPECT_EQ(progress[0].lines, 1009);  // the 1000th record is on line 1009
  EXPECT_EQ(progress[0].batches, 1);
  EXPECT_EQ(db.stats().records, 2500);

  // Again, with a malformed line in the middle: every record is a duplicate, the bad line is named.
  std::string again = lines_of(2500);
  again.insert(again.find('\n', again.size() / 2) + 1, "{not json\n");
  std::istringstream in2(again);
  progress.clear();
  const ImportReport second = db.import_jsonl(in2, options);
  EXPECT_EQ(second.imported, 0);
  EXPECT_EQ(second.already_present, 2500);
  ASSERT_EQ(second.errors.size(), 1u);
  EXPECT_GT(second.errors[0].line, 1000);
  EXPECT_EQ(second.batches, 3);  // 2501 taken lines: 1000, 1000, 501
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress[1].already_present, 2000 - 1);  // the bad line is in the second batch
  EXPECT_EQ(db.stats().records, 2500);
}

// What was committed before a failure stays, and importing the file again completes it.
TEST_P(StreamingImportOn, AFailurePartWayLeavesWholeBatchesThatAReimportCompletes) {
  Database db = Database::open(fresh("log.db"));
  ImportOptions options;
  options.batch_records = 100;
  int calls = 0;
  options.on_progress = [&](const ImportReport&) {
    if (++calls == 3) throw Error(ErrorKind::kIo, "stopped on purpose");
  };
  std::istringstream in(lines_of(1000));
  EXPECT_THROW(db.import_jsonl(in, options), Error);
  EXPECT_EQ(db.stats().records, 300);

  options.on_progress = nullptr;
  std::istringstream in2(lines_of(1000));
  const ImportReport report = db.import_jsonl(in2, options);
  EXPECT_EQ(report.already_present, 300);
  EXPECT_EQ(report.imported, 700);
  EXPECT_EQ(db.stats().records, 1000);
}

TEST_P(StreamingImportOn, ABatchOfNoRecordsIsRefused) {
  Database db = Database::open(fresh("log.db"));
  std::istringstream in(lines_of(3));
  ImportOptions options;
  options.batch_records = 0;
  EXPECT_EQ(error_of([&] { db.import_jsonl(in, options); }).first, ErrorKind::kInvalidArgument);
  EXPECT_EQ(db.stats().records, 0);
}

}  // namespace
}  // namespace ktune::tuning_db
