// End-to-end test of the tuning server's monitoring, with `ktune server` and `ktune worker`
// processes on 127.0.0.1: the Prometheus endpoint scraped with a plain HTTP GET during and after
// jobs (its trial and error counters against the records in the log), gRPC health checking and
// reflection, `ktune server status` (with the client token rule), and a metrics port in use.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/protocol/metrics_text.h"
#include "tests/process_util.h"
#include "tests/rpc_runner/server/grpc_health.grpc.pb.h"
#include "tests/rpc_runner/server/grpc_reflection.grpc.pb.h"
#include "tests/rpc_runner/server/service_test_util.h"

#define KTUNE_BINARY KTUNE_BIN
#include "tests/cli_util.h"

namespace ktune::rpc_runner {
namespace {

namespace fs = std::filesystem;
using testing::wait_until;
using testing_process::Child;
using testing_process::read_file;

// The body of GET /metrics on 127.0.0.1:port; "" when the server does not answer 200.
std::string http_get_metrics(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) response.append(buf, n);
    }
  }
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.1 200", 0) != 0 && response.rfind("HTTP/1.0 200", 0) != 0) return "";
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// Waits for "metrics on http://HOST:PORT/metrics" in the server's stdout; returns PORT or 0.
int wait_for_metrics_port(const fs::path& out) {
  int port = 0;
  wait_until(
      [&] {
        const std::string text = read_file(out);
        const auto at = text.find("metrics on http://127.0.0.1:");
        if (at == std::string::npos) return false;
        port = std::stoi(text.substr(at + 28));
        return true;
      },
      20);
  return port;
}

JobSpec matmul_job(uint64_t trials, double build_timeout_s) {
  JobSpec s;
  s.template_name = "matmul";
  s.args = {{"M", "64"}, {"N", "64"}, {"K", "64"}};
  s.session.device_key = "k";
  s.session.trials = trials;
  s.session.tuner = "random";
  s.session.seed = 3;
  s.session.batch_size = 4;
  s.measure.min_repeat_ms = 20;  // a few candidates per second: scrapes land mid-job
  s.measure.build_timeout_s = build_timeout_s;
  return s;
}

// The counters of trials and errors by kind equal what the log holds.
void expect_counters_match(const std::vector<MetricSample>& m,
                           const std::vector<tuning_db::Record>& records) {
  EXPECT_EQ(metric_sum(m, "ktune_trials_total", {{"key", "k"}}), records.size());
  size_t errors = 0;
  for (const auto& [kind, n] : testing::kinds_of(records)) {
    if (kind == "ok") continue;
    errors += n;
    EXPECT_EQ(metric_sum(m, "ktune_trial_errors_total", {{"key", "k"}, {"kind", kind}}), n) << kind;
  }
  EXPECT_EQ(metric_sum(m, "ktune_trial_errors_total", {{"key", "k"}}), errors);
}

TEST(Monitoring, MetricsHealthReflectionAndStatusOfARunningServer) {
  testing::TempDir dir;
  const testing::TokenFiles tokens = testing::write_token_files(dir);
  const std::string db = dir.file("server.db");
  Child server({KTUNE_BIN, "server", "--port", "0", "--metrics-port", "0", "--db", db,
                "--token-file", tokens.server},
               dir.path / "server.out", dir.path / "server.err");
  const std::string address = testing_process::wait_for_address(dir.path / "server.out");
  ASSERT_FALSE(address.empty()) << read_file(dir.path / "server.err");
  const int metrics_port = wait_for_metrics_port(dir.path / "server.out");
  ASSERT_GT(metrics_port, 0) << read_file(dir.path / "server.out");

  // Alive, not ready: no worker yet (a probe's exit status and one line).
  const std::string http = " --http 127.0.0.1:" + std::to_string(metrics_port);
  const auto alive = testing_cli::ktune("server health" + http, true);
  EXPECT_EQ(alive.status, 0) << alive.err;
  EXPECT_EQ(alive.out, "ok\n");
  testing_cli::expect_one_line_error(
      testing_cli::ktune("server health --ready" + http, true),
      "/readyz: 503 log: takes writes; workers: 0 attached; not ready");

  // Before any device: every job state is there at 0, no key yet.
  auto m = parse_metrics_text(http_get_metrics(metrics_port));
  for (const char* state : {"queued", "running", "done", "failed", "cancelled"})
    EXPECT_EQ(metric_sum(m, "ktune_jobs", {{"state", state}}), 0) << state;
  EXPECT_EQ(metric_sum(m, "ktune_devices"), 0);

  Child worker({KTUNE_BIN, "worker", "--server", address, "--key", "k", "--slots", "1", "--runner",
                KTUNE_RUNNER_PATH, "--token-file", tokens.worker},
               dir.path / "worker.out", dir.path / "worker.err");
  ServiceClientOptions options;
  options.server = address;
  options.token_file = tokens.client;
  ServiceClient client(options);
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 20))
      << read_file(dir.path / "worker.err");

  // Health checking and reflection answer without a token.
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status s =
        grpc::health::v1::Health::NewStub(channel)->Check(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  {
    grpc::ClientContext ctx;
    auto stream =
        grpc::reflection::v1alpha::ServerReflection::NewStub(channel)->ServerReflectionInfo(&ctx);
    grpc::reflection::v1alpha::ServerReflectionRequest request;
    request.set_list_services("*");
    ASSERT_TRUE(stream->Write(request));
    stream->WritesDone();
    grpc::reflection::v1alpha::ServerReflectionResponse response;
    ASSERT_TRUE(stream->Read(&response));
    std::vector<std::string> services;
    for (const auto& s : response.list_services_response().service()) services.push_back(s.name());
    EXPECT_NE(std::find(services.begin(), services.end(), "ktune.rpc.Tuning"), services.end());
    EXPECT_NE(std::find(services.begin(), services.end(), "grpc.health.v1.Health"), services.end());
    EXPECT_TRUE(stream->Finish().ok());
  }

  // During a job: it runs, the worker is there, and no counter runs ahead of the log.
  const uint64_t first = client.submit(matmul_job(24, 10)).id;
  bool seen_mid_job = false;
  ASSERT_TRUE(wait_until(
      [&] {
        m = parse_metrics_text(http_get_metrics(metrics_port));
        const double trials = metric_sum(m, "ktune_trials_total", {{"key", "k"}});
        if (trials == 0 || trials >= 24) return trials >= 24;
        seen_mid_job = true;
        EXPECT_EQ(metric_sum(m, "ktune_jobs", {{"state", "running"}}), 1);
        EXPECT_EQ(metric_sum(m, "ktune_devices", {{"key", "k"}}), 1);
        EXPECT_EQ(metric_sum(m, "ktune_device_slots", {{"key", "k"}}), 1);
        EXPECT_LE(trials, testing::log_records(db).size());
        return true;
      },
      120));
  EXPECT_TRUE(seen_mid_job) << "no scrape landed between the job's first and last batch";
  ASSERT_EQ(client.watch(first).job.state, tuning_db::JobState::kDone);

  // A job whose every build is over its timeout: errors by kind.
  const uint64_t second = client.submit(matmul_job(8, 0.001)).id;
  ASSERT_EQ(client.watch(second).job.state, tuning_db::JobState::kDone);

  // After the jobs: the counters equal the log's records, the histograms saw every trial.
  const auto records = testing::log_records(db);
  ASSERT_EQ(records.size(), 33u);  // 24 + 8 trials and the workload's fallback, logged once
  m = parse_metrics_text(http_get_metrics(metrics_port));
  expect_counters_match(m, records);
  EXPECT_EQ(metric_sum(m, "ktune_trial_errors_total", {{"kind", "build_timeout"}}), 8)
      << "every build of the second job is over its 1 ms";
  EXPECT_EQ(metric_sum(m, "ktune_jobs", {{"state", "done"}}), 2);
  EXPECT_EQ(metric_sum(m, "ktune_queue_depth", {{"key", "k"}}), 0);
  // Every candidate the fleet measured waited in the queue once (the fallback configs too).
  EXPECT_GE(metric_sum(m, "ktune_queue_wait_seconds_count", {{"key", "k"}}), 32);
  EXPECT_GE(metric_sum(m, "ktune_build_seconds_count", {{"key", "k"}}), 24);
  EXPECT_GE(metric_sum(m, "ktune_run_seconds_count", {{"key", "k"}}), 24);
  EXPECT_GE(metric_sum(m, "ktune_log_write_seconds_count"), 24 / 4 + 8 / 4);
  EXPECT_EQ(metric_sum(m, "ktune_queue_wait_seconds_bucket", {{"key", "k"}, {"le", "+Inf"}}),
            metric_sum(m, "ktune_queue_wait_seconds_count", {{"key", "k"}}));

  // The Status RPC carries the same counters; `ktune server status` shows them and the device.
  const ServerStatus status = client.status();
  expect_counters_match(status.metrics, records);
  ASSERT_EQ(status.devices.size(), 1u);
  const std::string flags = " --server " + address + " --token-file " + options.token_file;
  const auto shown = testing_cli::ktune("server status" + flags, true);
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("w1    k"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("done 2"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("build_timeout 8"), std::string::npos) << shown.out;
  // The client token rule of the rest of the API.
  testing_cli::expect_one_line_error(testing_cli::ktune("server status --server " + address, true),
                                     "refused");

  // Ready with a worker attached; not ready while another connection holds the log's write lock
  // (the probe waits 2 s for it, then says why).
  const auto ready = testing_cli::ktune("server health --ready" + http, true);
  EXPECT_EQ(ready.status, 0) << ready.err;
  EXPECT_EQ(ready.out, "log: takes writes\nworkers: 1 attached\nready\n");
  {
    Child holder({"/usr/bin/python3", "-c",
                  "import sqlite3, sys, time\n"
                  "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                  "c.execute('BEGIN IMMEDIATE')\n"
                  "print('locked', flush=True)\n"
                  "time.sleep(8)\n",
                  db},
                 dir.path / "holder.out", dir.path / "holder.err");
    ASSERT_TRUE(wait_until([&] { return read_file(dir.path / "holder.out") == "locked\n"; }, 20))
        << read_file(dir.path / "holder.err");
    testing_cli::expect_one_line_error(testing_cli::ktune("server health --ready" + http, true),
                                       "locked");
  }
  testing_cli::expect_one_line_error(testing_cli::ktune("server health --http 127.0.0.1:1", true),
                                     "cannot reach 127.0.0.1:1/healthz");

  // A metrics port in use: one line, exit 1, and the log that start would have created is not
  // left behind (nor its lock).
  testing_cli::expect_one_line_error(
      testing_cli::ktune("server --port 0 --db " + dir.file("other.db") + " --metrics-port " +
                             std::to_string(metrics_port),
                         true),
      "cannot serve metrics on 127.0.0.1:" + std::to_string(metrics_port) +
          ": Address already in use");
  EXPECT_FALSE(std::filesystem::exists(dir.file("other.db")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("other.db") + ".lock"));
  // Its gRPC port in use, by a server of another log: refused the same way (gRPC's default
  // SO_REUSEPORT once let both listen, the connections split between two logs).
  const std::string port = address.substr(address.rfind(':') + 1);
  testing_cli::expect_one_line_error(
      testing_cli::ktune("server --port " + port + " --db " + dir.file("third.db"), true),
      "cannot listen on 127.0.0.1:" + port + " (in use by another process");
  EXPECT_FALSE(std::filesystem::exists(dir.file("third.db")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("third.db") + ".lock"));
}

}  // namespace
}  // namespace ktune::rpc_runner
