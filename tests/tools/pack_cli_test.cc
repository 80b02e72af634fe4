// Tests the pre-tuned packs in packs/: each imports into an empty log whole, a second import adds
// nothing, and every record in it is one ktune can build (`ktune build --require-tuned` serves its
// config for its target).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_util.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::ktune;
using testing_cli::Output;
using testing_cli::quote;

std::vector<fs::path> packs() {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(fs::path(KTUNE_SOURCE_DIR_PATH) / "packs"))
    if (e.path().extension() == ".jsonl") found.push_back(e.path());
  return found;
}

std::vector<nlohmann::json> read_lines(const fs::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

class PackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ktune_pack_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PackTest, TheRepositoryHasAPackUnderOneMegabyte) {
  const auto found = packs();
  ASSERT_FALSE(found.empty());
  for (const auto& p : found) EXPECT_LT(fs::file_size(p), 1u << 20) << p;
}

TEST_F(PackTest, ImportsWholeOnceAndEveryRecordBuilds) {
  for (const fs::path& pack : packs()) {
    SCOPED_TRACE(pack.string());
    const auto lines = read_lines(pack);
    ASSERT_GE(lines.size(), 16u);
    const std::string db = (dir_ / (pack.stem().string() + ".db")).string();

    Output first =
        ktune("db import " + quote(pack.string()) + " --db " + quote(db) + " --json", true);
    ASSERT_EQ(first.status, 0) << first.err;
    EXPECT_EQ(nlohmann::json::parse(first.out)["imported"], lines.size()) << first.out;
    Output again =
        ktune("db import " + quote(pack.string()) + " --db " + quote(db) + " --json", true);
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(nlohmann::json::parse(again.out)["imported"], 0) << again.out;

    for (size_t i = 0; i < lines.size(); ++i) {
      const nlohmann::json& line = lines[i];
      const std::string target = line["input"][0];
      std::string args;
      for (const auto& [key, value] : line["input"][2].items())
        args +=
            " " + quote(key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
      const std::string stem = (dir_ / ("k" + std::to_string(i))).string();
      Output b =
          ktune("build " + quote(line["meta"]["template"].get<std::string>()) + args + " --db " +
                    quote(db) + " --target " + quote(target) + " --require-tuned --json -o " +
                    quote(stem + ".o") + " --header " + quote(stem + ".h"),
                true);
      ASSERT_EQ(b.status, 0) << line["input"][1] << ": " << b.err;
      const auto j = nlohmann::json::parse(b.out);
      EXPECT_EQ(j["config_source"], "tuned") << line["input"][1];
      EXPECT_EQ(j["workload"], line["input"][1]);
      EXPECT_EQ(j["config"], line["config"]) << line["input"][1];
      EXPECT_GT(fs::file_size(stem + ".o"), 0u);
    }
  }
}

}  // namespace
}  // namespace ktune
