// Benchmark: the tuning service with a fleet of 10, 100 and 1000 devices. A `ktune server` process
// and, in this process, simulated devices (rpc_runner/worker/simulated_fleet.h) that answer from
// the recorded landscape of matmul 512 after a delay, each on a connection of its own. Per fleet:
//   memory per attached device (server RSS delta / devices, idle),
//   heartbeat cost (server CPU with the fleet idle, less the CPU of the server alone),
//   concurrent jobs of the random tuner, then of xgb: trials/s, server CPU per trial (from
//   /proc/PID/stat), dispatch latency p50/p99 (a candidate queued -> sent to a device: the
//   server's ktune_queue_wait_seconds histogram, over the phase),
//   reconnection: the server killed and started again on its port and log; time until every
//   device is attached again (the devices back off with jitter, at most --reconnect-max),
//   loss: a tenth of the devices fall silent mid-job; time until the server has taken them for
//   lost and requeued their candidates (its worker timeout, --worker-timeout).
// The batch size is devices / jobs (xgb: at least 16), so that a batch finds free devices and the
// dispatch latency is the server's, not the fleet's capacity; the trials per job are those given
// for 1000 devices, scaled down with the fleet (at least 200).
// Usage: fleet_scale [--delay-ms D] [--jobs J] [--random-trials N] [--xgb-trials N] [sizes...]
// Last line: `fleet_trials_per_s_1000 <x>`, random trials/s with 1000 devices.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/protocol/metrics_text.h"
#include "rpc_runner/worker/simulated_fleet.h"
#include "tests/process_util.h"

namespace {

using namespace ktune;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing_process::Child;
using testing_process::cpu_seconds;
using testing_process::rss_bytes;

constexpr double kHeartbeatS = 2;
constexpr double kWorkerTimeoutS = 6;
constexpr double kReconnectMaxS = 2;

struct Settings {
  double delay_ms = 20;
  int jobs = 4;
  uint64_t random_trials = 4000;  // per job
  uint64_t xgb_trials = 1000;     // per job
  std::vector<int> sizes{10, 100, 1000};
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void wait_until(const std::function<bool()>& done, double timeout_s, const std::string& what) {
  const auto start = Clock::now();
  while (!done()) {
    if (seconds_since(start) > timeout_s)
      throw std::runtime_error("timed out after " + std::to_string(timeout_s) + " s: " + what);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The histogram's buckets (upper bound -> cumulative count) of a metric of the key.
std::vector<std::pair<double, double>> buckets(const std::vector<rpc_runner::MetricSample>& m,
                                               const std::string& name) {
  std::vector<std::pair<double, double>> out;
  for (const auto& s : m) {
    if (s.name != name + "_bucket") continue;
    const std::string le = s.labels.at("le");
    out.emplace_back(le == "+Inf" ? 1e300 : std::stod(le), s.value);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The q-quantile of the observations between two scrapes, interpolated within its bucket.
double quantile(const std::vector<std::pair<double, double>>& before,
                const std::vector<std::pair<double, double>>& after, double q) {
  std::vector<std::pair<double, double>> d = after;
  for (size_t i = 0; i < d.size() && i < before.size(); ++i) d[i].second -= before[i].second;
  if (d.empty() || d.back().second <= 0) return 0;
  const double rank = q * d.back().second;
  double lower = 0, below = 0;
  for (const auto& [le, n] : d) {
    if (n >= rank) {
      if (le >= 1e300) return lower;
      return lower + (le - lower) * (n > below ? (rank - below) / (n - below) : 1);
    }
    lower = le;
    below = n;
  }
  return lower;
}

// A `ktune server` process on `port` (0 = any) and its log.
struct Server {
  std::unique_ptr<Child> process;
  std::string address;

  Server(const fs::path& dir, int port) {
    process = std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "server", "--port", std::to_string(port), "--db",
                                 (dir / "server.db").string(), "--heartbeat",
                                 std::to_string(kHeartbeatS), "--worker-timeout",
                                 std::to_string(kWorkerTimeoutS),
                                 // Simulated devices run nothing to prove.
                                 "--calibration-proof", "0"},
        dir / "server.out", dir / "server.err");
    address = testing_process::wait_for_address(dir / "server.out");
    if (address.empty())
      throw std::runtime_error("the server did not start: " +
                               testing_process::read_file(dir / "server.err"));
  }
  pid_t pid() const { return process->pid; }
  int port() const { return std::stoi(address.substr(address.rfind(':') + 1)); }
};

// A job on the simulated devices: the landscape's workload.
rpc_runner::JobSpec matmul_job(const std::string& tuner, uint64_t trials, size_t batch,
                               uint64_t seed) {
  rpc_runner::JobSpec spec;
  spec.template_name = "matmul";
  spec.args = {{"M", "512"}, {"N", "512"}, {"K", "512"}};
  spec.session.device_key = "sim";
  spec.session.trials = trials;
  spec.session.tuner = tuner;
  spec.session.seed = seed;
  spec.session.batch_size = batch;
  spec.session.transfer = false;
  return spec;
}

struct JobsRow {
  double trials_per_s = 0, cpu_ms_per_trial = 0, p50_ms = 0, p99_ms = 0;
};

// `jobs` concurrent jobs of a tuner; every one must end done with its trials.
JobsRow run_jobs(rpc_runner::ServiceClient& client, const Server& server, const std::string& tuner,
                 int jobs, uint64_t trials, size_t batch, uint64_t seed) {
  const auto before = client.status().metrics;
  const double cpu_before = cpu_seconds(server.pid());
  const auto start = Clock::now();
  std::vector<uint64_t> ids;
  for (int j = 0; j < jobs; ++j)
    ids.push_back(
        client.submit(matmul_job(tuner, trials, batch, seed + static_cast<uint64_t>(j))).id);
  uint64_t done = 0;
  for (uint64_t id : ids) {
    const rpc_runner::JobEvent last = client.watch(id);
    if (last.job.state != tuning_db::JobState::kDone || last.job.done != trials)
      throw std::runtime_error("job " + std::to_string(id) + " " +
                               std::string(tuning_db::to_string(last.job.state)) + " with " +
                               std::to_string(last.job.done) + " of " + std::to_string(trials) +
                               " trials: " + last.job.message);
    done += last.job.done + 1;  // and the fallback, which the server also handled
  }
  const double wall = seconds_since(start);
  const double cpu = cpu_seconds(server.pid()) - cpu_before;
  const auto after = client.status().metrics;
  const auto b = buckets(before, "ktune_queue_wait_seconds");
  const auto a = buckets(after, "ktune_queue_wait_seconds");
  return {static_cast<double>(done) / wall, 1e3 * cpu / static_cast<double>(done),
          1e3 * quantile(b, a, 0.5), 1e3 * quantile(b, a, 0.99)};
}

struct SizeRow {
  int devices = 0;
  double attach_s = 0, kb_per_device = 0, heartbeat_us = 0, idle_cpu_pct = 0;
  JobsRow random, xgb;
  double reconnect_s = 0, lost_s = 0;
  int lost = 0;
  double requeued = 0;
};

SizeRow run_size(int devices, const Settings& settings, const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  SizeRow row;
  row.devices = devices;
  auto server = std::make_unique<Server>(dir, 0);
  rpc_runner::ServiceClientOptions co;
  co.server = server->address;
  rpc_runner::ServiceClient client(co);

  // The server alone, idle: its baseline CPU and memory.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  constexpr double kIdleS = 6;
  double cpu0 = cpu_seconds(server->pid());
  std::this_thread::sleep_for(std::chrono::duration<double>(kIdleS));
  const double idle_alone = cpu_seconds(server->pid()) - cpu0;
  const double rss0 = rss_bytes(server->pid());

  rpc_runner::SimulatedFleetOptions fo;
  fo.worker.server = server->address;
  fo.worker.key = "sim";
  fo.worker.reconnect_max_s = kReconnectMaxS;
  fo.devices = devices;
  fo.delay_s = settings.delay_ms / 1e3;
  auto answers = std::make_shared<rpc_runner::LandscapeAnswers>(
      tuner::read_landscape(std::string(KTUNE_LANDSCAPE_DIR) + "/matmul_512.txt"));
  auto start = Clock::now();
  rpc_runner::SimulatedFleet fleet(fo, answers);
  wait_until([&] { return fleet.attached() == devices; }, 120, "the fleet attaching");
  row.attach_s = seconds_since(start);

  // Idle with the fleet: memory, and heartbeats (with gRPC's keepalive pings) over kIdleS.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  cpu0 = cpu_seconds(server->pid());
  std::this_thread::sleep_for(std::chrono::duration<double>(kIdleS));
  const double idle_fleet = cpu_seconds(server->pid()) - cpu0;
  row.kb_per_device = (rss_bytes(server->pid()) - rss0) / 1024 / devices;
  const double beats = devices * kIdleS / kHeartbeatS;
  row.heartbeat_us = 1e6 * std::max(idle_fleet - idle_alone, 0.0) / beats;
  row.idle_cpu_pct = 100 * idle_fleet / kIdleS;

  // Smaller fleets measure fewer trials (they are slower by their delay, not by the server).
  auto scaled = [&](uint64_t trials) {
    return std::max<uint64_t>(trials * static_cast<uint64_t>(devices) / 1000, 200);
  };
  const int share = std::max(devices / settings.jobs, 1);
  row.random = run_jobs(client, *server, "random", settings.jobs, scaled(settings.random_trials),
                        static_cast<size_t>(share), 1);
  // xgb refits per batch: batches under its default of 16 would measure the refits alone.
  row.xgb = run_jobs(client, *server, "xgb", settings.jobs, scaled(settings.xgb_trials),
                     static_cast<size_t>(std::max(share, 16)), 100);

  // Reconnection: the server killed and started again on its port and log.
  const int port = server->port();
  server->process->kill(SIGKILL);
  wait_until([&] { return fleet.attached() == 0; }, 60, "the fleet noticing the server's end");
  server = std::make_unique<Server>(dir, port);
  start = Clock::now();
  wait_until([&] { return fleet.attached() == devices; }, 120, "the fleet reattaching");
  row.reconnect_s = seconds_since(start);

  // Loss: a tenth of the devices fall silent while a job keeps every device busy.
  rpc_runner::ServiceClientOptions co2;
  co2.server = server->address;
  rpc_runner::ServiceClient again(co2);
  // Cancelled once the loss is measured.
  const uint64_t job =
      again.submit(matmul_job("random", rpc_runner::kMaxJobTrials, static_cast<size_t>(devices), 7))
          .id;
  wait_until([&] { return again.job(job).done > 2 * static_cast<uint64_t>(devices); }, 120,
             "the loss job starting");
  const double requeued_before =
      rpc_runner::metric_sum(again.status().metrics, "ktune_candidates_requeued_total", {});
  row.lost = fleet.silence(std::max(devices / 10, 1));
  start = Clock::now();
  wait_until([&] { return static_cast<int>(again.devices().size()) <= devices - row.lost; },
             kWorkerTimeoutS * 4, "the server taking the silent devices for lost");
  row.lost_s = seconds_since(start);
  row.requeued =
      rpc_runner::metric_sum(again.status().metrics, "ktune_candidates_requeued_total", {}) -
      requeued_before;
  again.cancel(job);
  again.watch(job);
  fleet.stop();
  server->process->kill(SIGTERM);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return std::string(argv[++i]);
    };
    try {
      if (a == "--delay-ms")
        settings.delay_ms = std::stod(value());
      else if (a == "--jobs")
        settings.jobs = std::stoi(value());
      else if (a == "--random-trials")
        settings.random_trials = std::stoull(value());
      else if (a == "--xgb-trials")
        settings.xgb_trials = std::stoull(value());
      else
        sizes.push_back(std::stoi(a));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fleet_scale: bad argument %s (%s)\n", a.c_str(), e.what());
      return 1;
    }
  }
  if (!sizes.empty()) settings.sizes = sizes;
  const fs::path dir =
      fs::temp_directory_path() / ("ktune-fleet-scale-" + std::to_string(::getpid()));
  try {
    std::vector<SizeRow> rows;
    for (int n : settings.sizes) {
      rows.push_back(run_size(n, settings, dir));
      std::fprintf(stderr, "fleet_scale: %d devices done\n", n);
    }
    fs::remove_all(dir);
    std::printf(
        "tuning server with simulated devices (matmul 512 landscape, %.0f ms per answer), %d "
        "concurrent jobs per tuner (%llu random / %llu xgb trials each at 1000 devices), heartbeat "
        "%.0f s, worker timeout %.0f s\n",
        settings.delay_ms, settings.jobs, static_cast<unsigned long long>(settings.random_trials),
        static_cast<unsigned long long>(settings.xgb_trials), kHeartbeatS, kWorkerTimeoutS);
    std::printf("%7s %8s %8s %9s %9s | %-37s | %-37s | %9s %13s\n", "devices", "attach", "KB/dev",
                "beat us", "idle cpu", "random: trials/s  ms/trial  p50  p99 ms",
                "xgb: trials/s  ms/trial  p50  p99 ms", "reconnect", "lost->requeue");
    for (const SizeRow& r : rows)
      std::printf(
          "%7d %7.2fs %8.1f %9.1f %8.1f%% | %14.0f %9.3f %5.1f %5.1f | %14.0f %9.3f %5.1f %5.1f | "
          "%8.2fs %6.2fs (%d dev, %.0f cand)\n",
          r.devices, r.attach_s, r.kb_per_device, r.heartbeat_us, r.idle_cpu_pct,
          r.random.trials_per_s, r.random.cpu_ms_per_trial, r.random.p50_ms, r.random.p99_ms,
          r.xgb.trials_per_s, r.xgb.cpu_ms_per_trial, r.xgb.p50_ms, r.xgb.p99_ms, r.reconnect_s,
          r.lost_s, r.lost, r.requeued);
    double at_1000 = 0;
    for (const SizeRow& r : rows)
      if (r.devices == 1000) at_1000 = r.random.trials_per_s;
    std::printf("fleet_trials_per_s_1000 %.0f\n", at_1000);
    return 0;
  } catch (const std::exception& e) {
    fs::remove_all(dir);
    std::fprintf(stderr, "fleet_scale: %s\n", e.what());
    return 1;
  }
}
