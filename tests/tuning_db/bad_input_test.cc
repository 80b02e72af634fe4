// Bad input gives clear typed errors: a corrupt file, a file that is not a ktune log, a newer
// schema version, malformed JSON lines (reported by line number; the good lines imported).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/schema.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::make_record;
using testing::matmul_key;
using testing::TempDir;

// Returns the message of the Error(kDatabase) that opening `path` throws ("" if none/other).
std::string open_error(const std::string& path, const OpenOptions& options = {}) {
  try {
    Database::open(path, options);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDatabase) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "opening " << path << " did not throw";
  return "";
}

TEST(BadInput, GarbageFileIsRefused) {
  TempDir dir;
  std::string path = dir.file("garbage.db");
  {
    std::ofstream out(path, std::ios::binary);
    std::mt19937 rng(7);
    for (int i = 0; i < 8192; ++i) out.put(static_cast<char>(rng() & 0xff));
  }
  std::string message = open_error(path);
  EXPECT_NE(message.find("not a database"), std::string::npos) << message;
  EXPECT_NE(message.find(path), std::string::npos) << message;
  // The file was not modified by the attempt.
  EXPECT_EQ(std::filesystem::file_size(path), 8192u);
}

TEST(BadInput, TextFileIsRefused) {
  TempDir dir;
  std::string path = dir.file("notes.txt");
  std::ofstream(path) << "this is a text file, not a tuning log\n";
  EXPECT_NE(open_error(path).find("not a database"), std::string::npos);
}

TEST(BadInput, OtherApplicationsSqliteFileIsRefusedUntouched) {
  TempDir dir;
  std::string path = dir.file("other.db");
  {
    auto conn = sql::Connection::open(path, true);
    conn.exec("CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)");
    conn.exec("INSERT INTO customers(name) VALUES ('ada')");
  }
  std::string message = open_error(path);
  EXPECT_NE(message.find("not a ktune tuning log"), std::string::npos) << message;
  auto conn = sql::Connection::open(path, false);
  EXPECT_EQ(conn.query_text("PRAGMA journal_mode"), "delete");  // not switched to WAL
  EXPECT_EQ(conn.query_int("SELECT count(*) FROM sqlite_master"), 1);
}

TEST(BadInput, NewerSchemaIsRefused) {
  TempDir dir;
  std::string path = dir.file("future.db");
  { Database::open(path).add({make_record(16, 1, {1e-3})}); }
  {
    auto conn = sql::Connection::open(path, false);
    conn.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
  }
  std::string message = open_error(path);
  EXPECT_NE(message.find("newer"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(kSchemaVersion + 1)), std::string::npos) << message;
}

TEST(BadInput, MissingFileWithoutCreateIsRefused) {
  TempDir dir;
  OpenOptions options;
  options.create = false;
  open_error(dir.file("absent.db"), options);
  EXPECT_FALSE(std::filesystem::exists(dir.file("absent.db")));
}

TEST(BadInput, DamagedPagesAreFoundByTheChecks) {
  TempDir dir;
  std::string path = dir.file("damaged.db");
  {
    Database db = Database::open(path);
    std::vector<Record> batch;
    for (int i = 0; i < 3000; ++i) batch.push_back(make_record(16 + i % 5, i, {1e-3 * (i + 1)}));
    db.add(batch);
  }  // closing the last connection checkpoints the WAL into the file
  ASSERT_FALSE(std::filesystem::exists(path + "-wal"));
  auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 64u * 4096u);
  {
    // Overwrite pages in the middle (records and index b-tree pages), keep the header.
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    std::mt19937 rng(11);
    f.seekp(static_cast<std::streamoff>(size / 2));
    for (int i = 0; i < 16 * 4096; ++i) f.put(static_cast<char>(rng() & 0xff));
  }
  OpenOptions checked;
  checked.check_integrity = true;
  std::string message = open_error(path, checked);
  EXPECT_FALSE(message.empty());

  // Without the open-time check, `check()` reports the damage (or reading it fails typed).
  try {
    Database db = Database::open(path);
    CheckReport report = db.check();
    EXPECT_FALSE(report.ok());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDatabase) << e.what();
  }
}

TEST(BadInput, MalformedJsonLinesAreReportedAndGoodLinesImported) {
  TempDir dir;
  Database db = Database::open(dir.file("log.db"));
  std::string good1 = to_json_line(make_record(16, 1, {1e-3}));
  std::string good2 = to_json_line(make_record(16, 2, {2e-3}));
  nlohmann::json unknown_error = to_json(make_record(16, 3, {1e-3}));
  unknown_error["result"][1] = "exploded";
  nlohmann::json no_meta = to_json(make_record(16, 4, {1e-3}));
  no_meta.erase("meta");
  nlohmann::json bad_cost = to_json(make_record(16, 5, {1e-3}));
  bad_cost["result"][0] = nlohmann::json::array({"fast"});
  nlohmann::json other_template = to_json(make_record(16, 6, {1e-3}));
  other_template["meta"]["template"] = "dense";  // the workload key is already a matmul
  std::stringstream in;
  in << good1 << "\n"                   // line 1
     << "{\"input\": [\"llvm\", \n"     // line 2: truncated JSON
     << "\n"                            // line 3: blank, skipped
     << unknown_error.dump() << "\n"    // line 4
     << good2 << "\n"                   // line 5
     << no_meta.dump() << "\n"          // line 6
     << "[1, 2, 3]\n"                   // line 7: not an object
     << bad_cost.dump() << "\n"         // line 8
     << other_template.dump() << "\n";  // line 9
  ImportReport report = db.import_jsonl(in);
  EXPECT_EQ(report.imported, 2);
  ASSERT_EQ(report.errors.size(), 6u);
  std::vector<int64_t> lines;
  for (const auto& e : report.errors) lines.push_back(e.line);
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 4, 6, 7, 8, 9}));
  EXPECT_NE(report.errors[0].message.find("malformed record JSON"), std::string::npos);
  EXPECT_NE(report.errors[1].message.find("exploded"), std::string::npos);
  EXPECT_NE(report.errors[2].message.find("meta"), std::string::npos);
  EXPECT_NE(report.errors[5].message.find("template"), std::string::npos);
  EXPECT_EQ(db.measured_indices(matmul_key(16), kHost), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(db.stats().records, 2);
}

TEST(BadInput, FromJsonLineNamesTheProblem) {
  try {
    from_json_line("{\"version\": 1, \"input\": [\"llvm\", \"mm\"]}");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("input"), std::string::npos) << e.what();
  }
  nlohmann::json future = to_json(make_record(16, 1, {1e-3}));
  future["version"] = kRecordLineVersion + 1;
  EXPECT_THROW(from_json(future), Error);
  nlohmann::json success_without_costs = to_json(make_record(16, 1, {}));
  EXPECT_THROW(from_json(success_without_costs), Error);
}

}  // namespace
}  // namespace ktune::tuning_db
