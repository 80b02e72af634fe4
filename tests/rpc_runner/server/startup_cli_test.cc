// `ktune server` and `ktune worker` at startup, as processes on 127.0.0.1: a second server on a
// log another server holds refuses to start in one line (while reading commands keep working on
// that log), and a worker whose TLS does not match the server's exits 1 with the reason instead of
// retrying forever; so does one whose token file others may read; one against a peer that never
// answers says so within its hello timeout.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/process_util.h"
#include "tests/rpc_runner/server/service_test_util.h"

#define KTUNE_BINARY KTUNE_BIN
#include "tests/cli_util.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using rpc_runner::testing::make_certificate;
using rpc_runner::testing::TempDir;
using testing_process::Child;
using testing_process::read_file;

int lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(StartupCli, ASecondServerOnALogRefusesToStartWhileReadersStillWork) {
  TempDir dir;
  auto path = [&](const std::string& name) { return dir.file(name); };
  const std::string ktune = KTUNE_BIN;
  const std::string db = path("server.db");
  // A log with a record, for the readers below.
  ASSERT_EQ(testing_cli::ktune("tune matmul M=16 N=16 K=16 --tuner random --trials 2 --db " +
                               testing_cli::quote(db))
                .status,
            0);
  Child first({ktune, "server", "--port", "0", "--db", db}, dir.path / "first.out",
              dir.path / "first.err");
  ASSERT_FALSE(testing_process::wait_for_address(dir.path / "first.out").empty())
      << read_file(dir.path / "first.err");

  Child second({ktune, "server", "--port", "0", "--db", db}, dir.path / "second.out",
               dir.path / "second.err");
  EXPECT_EQ(second.wait(30), 1);
  const std::string err = read_file(dir.path / "second.err");
  EXPECT_NE(
      err.find("is already served by another ktune server (pid " + std::to_string(first.pid) + ")"),
      std::string::npos)
      << err;
  EXPECT_EQ(lines(err), 1) << err;
  EXPECT_EQ(read_file(dir.path / "second.out").find("listening on"), std::string::npos);

  // The first one holds the log; what only reads it works beside it.
  const auto stats = testing_cli::ktune("db stats --json --db " + testing_cli::quote(db), true);
  ASSERT_EQ(stats.status, 0) << stats.err;
  EXPECT_EQ(nlohmann::json::parse(stats.out)["records"], 2 + 1);  // 2 trials and the fallback
  const auto best =
      testing_cli::ktune("best matmul M=16 N=16 K=16 --json --db " + testing_cli::quote(db), true);
  EXPECT_EQ(best.status, 0) << best.err;
  const auto built =
      testing_cli::ktune("build matmul M=16 N=16 K=16 --db " + testing_cli::quote(db) + " -o " +
                             testing_cli::quote(path("k.o")),
                         true);
  EXPECT_EQ(built.status, 0) << built.err;

  // Once the first one is gone (even killed), a server starts on the log again.
  first.kill(SIGKILL);
  Child third({ktune, "server", "--port", "0", "--db", db}, dir.path / "third.out",
              dir.path / "third.err");
  EXPECT_FALSE(testing_process::wait_for_address(dir.path / "third.out").empty())
      << read_file(dir.path / "third.err");
}

TEST(StartupCli, AWorkerWhoseTlsOrTokenFileIsWrongExitsWithTheReason) {
  TempDir dir;
  auto path = [&](const std::string& name) { return dir.file(name); };
  const std::string ktune = KTUNE_BIN;
  make_certificate(dir, "server-");
  make_certificate(dir, "other-");  // a CA that did not sign the server's certificate
  Child server({ktune, "server", "--port", "0", "--db", path("server.db"), "--tls-cert",
                path("server-cert.pem"), "--tls-key", path("server-key.pem")},
               dir.path / "server.out", dir.path / "server.err");
  const std::string address = testing_process::wait_for_address(dir.path / "server.out");
  ASSERT_FALSE(address.empty()) << read_file(dir.path / "server.err");

  struct Case {
    std::string name;
    std::vector<std::string> flags;
    std::string says;
  };
  const std::string token = path("token");
  std::ofstream(token) << "a-worker-token-0123456789\n";
  fs::permissions(token, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  std::ofstream(path("ca.txt")) << "not a certificate\n";
  const std::vector<Case> cases = {
      {"wrong-ca", {"--tls-ca", path("other-cert.pem")}, "not signed by the CA of --tls-ca"},
      {"plaintext", {}, "serves TLS only"},
      {"not-pem", {"--tls-ca", path("ca.txt")}, "is not PEM"},
      {"readable-token",
       {"--tls-ca", path("server-cert.pem"), "--token-file", token},
       "is accessible by group or others (mode 0640)"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {ktune,   "worker", "--server", address,
                                     "--key", "k",      "--runner", KTUNE_RUNNER_PATH};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    Child worker(args, dir.path / (c.name + ".out"), dir.path / (c.name + ".err"));
    EXPECT_EQ(worker.wait(60), 1) << c.name;
    const std::string err = read_file(dir.path / (c.name + ".err"));
    EXPECT_NE(err.find(c.says), std::string::npos) << c.name << ": " << err;
    EXPECT_EQ(lines(err), 1) << c.name << ": " << err;
  }
  // With the right CA the same worker attaches (and the readable token is accepted when allowed;
  // the server asks for none).
  Child good({ktune, "worker", "--server", address, "--key", "k", "--runner", KTUNE_RUNNER_PATH,
              "--tls-ca", path("server-cert.pem"), "--token-file", token, "--allow-readable-token"},
             dir.path / "good.out", dir.path / "good.err");
  bool attached = false;
  for (int i = 0; i < 300 && !attached; ++i) {
    const auto listed =
        testing_cli::ktune("server devices --json --server " + address + " --tls-ca " +
                           testing_cli::quote(path("server-cert.pem")));
    attached = listed.status == 0 && nlohmann::json::parse(listed.out).size() == 1;
    if (!attached) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(attached) << read_file(dir.path / "good.err");
}

// A peer that takes the connection and never answers (no ktune server behind the port): the
// worker says so within its hello timeout (10 s), one line, and keeps retrying.
TEST(StartupCli, AWorkerAgainstASilentPeerSaysSoWithinItsHelloTimeout) {
  TempDir dir;
  // A listening socket nobody accepts on: the kernel completes the TCP handshake, nothing answers.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(::listen(silent, 16), 0);
  socklen_t size = sizeof at;
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&at), &size), 0);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(at.sin_port));
  const auto start = std::chrono::steady_clock::now();
  Child worker(
      {KTUNE_BIN, "worker", "--server", address, "--key", "k", "--runner", KTUNE_RUNNER_PATH},
      dir.path / "worker.out", dir.path / "worker.err");
  std::string err;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(40)) {
    err = read_file(dir.path / "worker.err");
    if (err.find("no answer to this worker's hello") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(err.find("tuning server " + address +
                     " unreachable (no answer to this worker's "
                     "hello in 10 s (is it a ktune server's gRPC port?))"),
            std::string::npos)
      << err;
  EXPECT_LT(waited, 25.0) << err;
  EXPECT_EQ(lines(err), 1) << err;
  ::close(silent);
}

}  // namespace
}  // namespace ktune
