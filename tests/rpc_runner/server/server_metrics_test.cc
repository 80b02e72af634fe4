// Unit tests of ServerMetrics (gauges from a snapshot, counters and histograms from logged
// batches, the HTTP endpoint's errors) and of the text format's reader.
#include "rpc_runner/server/server_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rpc_runner/protocol/metrics_text.h"
#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

WorkerInfo worker(const std::string& key, int slots, int in_flight) {
  WorkerInfo w;
  w.key = key;
  w.slots = slots;
  w.in_flight = in_flight;
  return w;
}

JobStatus job(tuning_db::JobState state) {
  JobStatus s;
  s.state = state;
  return s;
}

TEST(ServerMetrics, GaugesFollowTheSnapshotAndKeysThatGoAwayDisappear) {
  FleetSnapshot fleet;
  fleet.workers = {worker("a", 2, 1), worker("a", 1, 0), worker("b", 4, 0)};
  fleet.queued = {{"a", 7}, {"c", 0}};
  fleet.jobs = {job(tuning_db::JobState::kRunning), job(tuning_db::JobState::kDone),
                job(tuning_db::JobState::kDone)};
  ServerMetrics metrics([&] { return fleet; });
  auto m = parse_metrics_text(metrics.text());
  EXPECT_EQ(metric_sum(m, "ktune_devices", {{"key", "a"}, {"state", "busy"}}), 1);
  EXPECT_EQ(metric_sum(m, "ktune_devices", {{"key", "a"}, {"state", "idle"}}), 1);
  EXPECT_EQ(metric_sum(m, "ktune_devices", {{"key", "b"}, {"state", "idle"}}), 1);
  EXPECT_EQ(metric_sum(m, "ktune_device_slots", {{"key", "a"}}), 3);
  EXPECT_EQ(metric_sum(m, "ktune_candidates_in_flight", {{"key", "a"}}), 1);
  EXPECT_EQ(metric_sum(m, "ktune_queue_depth", {{"key", "a"}}), 7);
  EXPECT_EQ(metric_sum(m, "ktune_jobs", {{"state", "done"}}), 2);
  EXPECT_EQ(metric_sum(m, "ktune_jobs", {{"state", "running"}}), 1);
  EXPECT_EQ(metric_sum(m, "ktune_jobs", {{"state", "failed"}}), 0);
  // Every state has its sample, at 0 too; key "c" has a queue but no device.
  size_t job_samples = 0;
  for (const auto& s : m) job_samples += s.name == "ktune_jobs";
  EXPECT_EQ(job_samples, 5u);
  EXPECT_EQ(metric_sum(m, "ktune_devices", {{"key", "c"}}), 0);

  fleet.workers = {worker("b", 4, 4)};
  m = parse_metrics_text(metrics.text());
  EXPECT_EQ(metric_sum(m, "ktune_devices"), 1);
  EXPECT_EQ(metric_sum(m, "ktune_devices", {{"key", "b"}, {"state", "busy"}}), 1);
  for (const auto& s : m) {
    if (s.name == "ktune_devices") {
      EXPECT_NE(s.labels.at("key"), "a");
    }
  }
}

TEST(ServerMetrics, LoggedBatchesCountTrialsErrorsAndTimes) {
  ServerMetrics metrics([] { return FleetSnapshot{}; });
  std::vector<tuner::MeasureResult> batch{
      tuner::make_ok_result({0.5}, 0.2, 0.03),
      tuner::make_error_result(ErrorKind::kBuildTimeout, "slow", 2.0),
      tuner::make_error_result(ErrorKind::kWrongAnswer, "off", 0.3, 0.04),
      tuner::MeasureResult{},  // no costs and no error: the log records kUnknown
  };
  metrics.logged("k", batch, 0.004);
  metrics.logged("k", {tuner::make_error_result(ErrorKind::kBuildTimeout, "slow", 2.5)}, 0.5);
  metrics.queue_wait("k", 0.05);
  metrics.queue_wait("k", 120);
  const auto m = parse_metrics_text(metrics.text());
  EXPECT_EQ(metric_sum(m, "ktune_trials_total", {{"key", "k"}}), 5);
  EXPECT_EQ(metric_sum(m, "ktune_trial_errors_total", {{"key", "k"}}), 4);
  EXPECT_EQ(metric_sum(m, "ktune_trial_errors_total", {{"kind", "build_timeout"}}), 2);
  EXPECT_EQ(metric_sum(m, "ktune_trial_errors_total", {{"kind", "wrong_answer"}}), 1);
  EXPECT_EQ(metric_sum(m, "ktune_trial_errors_total", {{"kind", "unknown"}}), 1);
  // Build and run times of the trials that built / ran.
  EXPECT_EQ(metric_sum(m, "ktune_build_seconds_count"), 4);
  EXPECT_DOUBLE_EQ(metric_sum(m, "ktune_build_seconds_sum"), 0.2 + 2.0 + 0.3 + 2.5);
  EXPECT_EQ(metric_sum(m, "ktune_run_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(metric_sum(m, "ktune_run_seconds_sum"), 0.03 + 0.04);
  EXPECT_EQ(metric_sum(m, "ktune_build_seconds_bucket", {{"le", "1"}}), 2);
  EXPECT_EQ(metric_sum(m, "ktune_log_write_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(metric_sum(m, "ktune_log_write_seconds_sum"), 0.504);
  EXPECT_EQ(metric_sum(m, "ktune_log_write_seconds_bucket", {{"le", "0.005"}}), 1);
  EXPECT_EQ(metric_sum(m, "ktune_queue_wait_seconds_bucket", {{"key", "k"}, {"le", "0.1"}}), 1);
  EXPECT_EQ(metric_sum(m, "ktune_queue_wait_seconds_bucket", {{"key", "k"}, {"le", "+Inf"}}), 2);
}

TEST(ServerMetrics, APortInUseIsOneClearError) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int taken = ntohs(addr.sin_port);
  ServerMetrics metrics([] { return FleetSnapshot{}; });
  try {
    metrics.serve("127.0.0.1", taken, [] { return Readiness{}; });
    ADD_FAILURE() << "served on a port in use";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_EQ(std::string(e.what()), "cannot serve metrics on 127.0.0.1:" + std::to_string(taken) +
                                         ": Address already in use");
  }
  EXPECT_EQ(metrics.port(), 0);
  ::close(fd);
  metrics.serve("127.0.0.1", 0, [] { return Readiness{}; });
  EXPECT_GT(metrics.port(), 0);
  EXPECT_NE(metrics.port(), taken);
}

// The reply to one GET on 127.0.0.1:port within `timeout_s` ("" when none came in time).
std::string get(int port, const std::string& path, int timeout_s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string reply;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
        reply.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return reply;
}

// Forty idle connections (no token needed to open them) do not hold up a scrape, and the server
// drops a connection that stays silent.
TEST(ServerMetrics, IdleConnectionsDoNotHoldUpAScrape) {
  ServerMetrics metrics([] { return FleetSnapshot{}; });
  metrics.serve("127.0.0.1", 0, [] { return Readiness{"", 1}; });
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(metrics.port()));
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(::socket(AF_INET, SOCK_STREAM, 0));
    ASSERT_EQ(::connect(idle.back(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  }
  // A deadline, not a timing: held up, the scrape waits for the idle connections' turns (8
  // threads, 5 s each with httplib's defaults: 25 s).
  const std::string reply = get(metrics.port(), "/metrics", 4);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_NE(reply.find("ktune_jobs"), std::string::npos);
  EXPECT_EQ(get(metrics.port(), "/healthz", 4).rfind("HTTP/1.1 200", 0), 0u);
  // Each silent connection is closed by the server: its read sees the end, not a timeout.
  for (int fd : idle) {
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char byte;
    EXPECT_EQ(::recv(fd, &byte, 1, 0), 0);
    ::close(fd);
  }
}

// Ready takes both: a log that takes writes and an attached worker; the text says which is missing.
TEST(ServerMetrics, ReadinessNeedsTheLogAndAWorker) {
  EXPECT_TRUE((Readiness{"", 2}).ready());
  EXPECT_EQ((Readiness{"", 2}).text(), "log: takes writes\nworkers: 2 attached\nready\n");
  EXPECT_FALSE((Readiness{"", 0}).ready());
  const Readiness locked{"database is locked", 1};
  EXPECT_FALSE(locked.ready());
  EXPECT_EQ(locked.text(), "log: database is locked\nworkers: 1 attached\nnot ready\n");
}

TEST(MetricsText, ReadsLabelsEscapesSpecialValuesAndTimestamps) {
  const auto m = parse_metrics_text(
      "# HELP x A help line\n# TYPE x gauge\n"
      "x{a=\"1\",b=\"q\\\"uote\\\\back\\nline\"} 2.5\n"
      "y 7 1700000000000\r\n\n"
      "z{le=\"+Inf\"} +Inf\nw NaN\nv -Inf\nu{} 3\n");
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].name, "x");
  EXPECT_EQ(m[0].labels.at("a"), "1");
  EXPECT_EQ(m[0].labels.at("b"), "q\"uote\\back\nline");
  EXPECT_EQ(m[0].value, 2.5);
  EXPECT_EQ(m[1].value, 7);
  EXPECT_TRUE(std::isinf(m[2].value) && m[2].value > 0);
  EXPECT_TRUE(std::isnan(m[3].value));
  EXPECT_TRUE(std::isinf(m[4].value) && m[4].value < 0);
  EXPECT_EQ(m[5].value, 3);
  EXPECT_EQ(metric_sum(m, "x", {{"a", "1"}}), 2.5);
  EXPECT_EQ(metric_sum(m, "x", {{"a", "2"}}), 0);
}

TEST(MetricsText, ALineThatDoesNotReadIsNamed) {
  for (const char* bad : {"x{a=1} 2", "x{a=\"1} 2", "x", "x 2z", "{a=\"1\"} 2"}) {
    try {
      parse_metrics_text(std::string("ok 1\n") + bad + "\n");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace ktune::rpc_runner
