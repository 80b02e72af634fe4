// End-to-end test of the commands: `ktune server`, two `ktune worker`s and `ktune tune --server
// --devices`, as separate processes on 127.0.0.1.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/error.h"
#include "tuning_db/database.h"

extern char** environ;

namespace ktune {
namespace {

namespace fs = std::filesystem;

// A child process with its stdout and stderr sent to files.
struct Child {
  pid_t pid = -1;

  Child(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw Error(ErrorKind::kIo, "cannot start " + args[0]);
  }
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }

  // Waits at most timeout_s for the exit; returns the exit status, or -1 (then the child is
  // killed) when it did not exit in time or died of a signal.
  int wait(double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count_lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

class CliRemote : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ktune_cli_remote_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CliRemote, ServerWorkerAndTuneOnTheDevice) {
  const std::string ktune = KTUNE_BIN;
  Child server({ktune, "server", "--port", "0"}, dir_ / "server.out", dir_ / "server.err");
  std::string address;
  for (int i = 0; i < 500 && address.empty(); ++i) {
    std::string out = read_file(dir_ / "server.out");
    auto at = out.find("listening on ");
    auto end = out.find('\n', at);
    if (at != std::string::npos && end != std::string::npos) address = out.substr(at + 13, end - at - 13);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(address.empty()) << read_file(dir_ / "server.err");
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  ASSERT_NE(address, "127.0.0.1:0");

  // Two workers of key k; the tune asks for three devices, so it warns and measures on two.
  Child worker({ktune, "worker", "--server", address, "--key", "k", "--runner", KTUNE_RUNNER_PATH},
               dir_ / "worker.out", dir_ / "worker.err");
  Child worker2({ktune, "worker", "--server", address, "--key", "k", "--runner", KTUNE_RUNNER_PATH},
                dir_ / "worker2.out", dir_ / "worker2.err");
  auto list_devices = [&] {
    Child devices({ktune, "server", "devices", "--server", address, "--json"}, dir_ / "devices.out",
                  dir_ / "devices.err");
    EXPECT_EQ(devices.wait(30), 0) << read_file(dir_ / "devices.err");
    return nlohmann::json::parse(read_file(dir_ / "devices.out"));
  };
  for (int i = 0; i < 250 && list_devices().size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(40));
  ASSERT_EQ(list_devices().size(), 2u);

  const fs::path db = dir_ / "tmp.db";
  Child tune({ktune, "tune", "matmul", "M=64", "N=64", "K=64", "--trials", "16", "--tuner", "random",
              "--batch-size", "8", "--server", address, "--device-key", "k", "--devices", "3",
              "--lease-timeout", "1", "--db", db.string(), "--json"},
             dir_ / "tune.out", dir_ / "tune.err");
  ASSERT_EQ(tune.wait(90), 0) << read_file(dir_ / "tune.err");
  auto summary = nlohmann::json::parse(read_file(dir_ / "tune.out"));
  EXPECT_EQ(summary["measured"], 16);
  const std::string tune_err = read_file(dir_ / "tune.err");
  EXPECT_NE(tune_err.find("leased 2 of 3 devices"), std::string::npos) << tune_err;

  {
    auto log = tuning_db::Database::open(db.string());
    auto stats = log.stats();
    EXPECT_EQ(stats.records, 16);
    EXPECT_GE(stats.ok_records, 4);
    EXPECT_EQ(stats.ok_records, summary["ok"].get<int64_t>());
  }

  // Both workers are listed, and free again now that the tune has ended.
  auto listed = list_devices();
  ASSERT_EQ(listed.size(), 2u);
  for (const auto& device : listed) {
    EXPECT_EQ(device["key"], "k");
    EXPECT_EQ(device["leased"], false);
  }

  ::kill(worker2.pid, SIGTERM);
  EXPECT_EQ(worker2.wait(30), 0) << read_file(dir_ / "worker2.err");
  ::kill(worker.pid, SIGTERM);
  EXPECT_EQ(worker.wait(30), 0) << read_file(dir_ / "worker.err");
  ::kill(server.pid, SIGTERM);
  EXPECT_EQ(server.wait(30), 0) << read_file(dir_ / "server.err");
}

TEST_F(CliRemote, UnreachableServerIsOneLineAndExitOneAndNoLog) {
  const fs::path db = dir_ / "never.db";
  Child tune({KTUNE_BIN, "tune", "matmul", "M=64", "N=64", "K=64", "--trials", "4", "--server", "127.0.0.1:1",
              "--device-key", "k", "--db", db.string()},
             dir_ / "tune.out", dir_ / "tune.err");
  EXPECT_EQ(tune.wait(30), 1);
  std::string err = read_file(dir_ / "tune.err");
  EXPECT_EQ(count_lines(err), 1u) << err;
  EXPECT_NE(err.find("cannot reach the tuning server at 127.0.0.1:1"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(db));
}

}  // namespace
}  // namespace ktune
