// `ktune server`: run the tuning service until SIGINT/SIGTERM; `ktune server devices`: list its
// workers; `ktune server status`: its metrics and devices on one screen.
#include <pthread.h>
#include <signal.h>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/server/tuning_server.h"
#include "support/error.h"
#include "tools/commands.h"
#include "tools/service_flags.h"

namespace ktune::tools {
namespace {

struct ServerCommandOptions {
  rpc_runner::TuningServerOptions server;
  rpc_runner::ServiceClientOptions client;  // `devices`
  bool json = false;
  // `health`: the server's HTTP port (--metrics-port), and whether to ask /readyz.
  std::string http_address;
  bool ready = false;
  double timeout_s = 5;
};

// `ktune server health`: GET /healthz (or /readyz) of the server's HTTP port, for a container's
// probe: prints the answer, exit status 0 on 200; anything else is one error line (exit 1).
void run_health(const ServerCommandOptions& o) {
  const auto colon = o.http_address.rfind(':');
  const std::string host = colon == std::string::npos ? "" : o.http_address.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : o.http_address.substr(colon + 1);
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      port.size() > 5 || std::stoi(port) > 65535)
    throw Error(
        ErrorKind::kInvalidArgument,
        "--http takes HOST:PORT (the server's --metrics-port), not '" + o.http_address + "'");
  httplib::Client client(host, std::stoi(port));
  const auto timeout = std::chrono::duration<double>(o.timeout_s);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  const std::string path = o.ready ? "/readyz" : "/healthz";
  const httplib::Result res = client.Get(path);
  if (!res) {
    // httplib's names ("Connection", "Read") are one word: say what happened.
    const httplib::Error e = res.error();
    const std::string what = e == httplib::Error::Connection ? "the connection failed (refused, "
                                                               "or no route)"
                             : e == httplib::Error::ConnectionTimeout ? "no connection in time"
                             : e == httplib::Error::Read              ? "no answer in time"
                                                                      : httplib::to_string(e);
    throw Error(ErrorKind::kIo, "cannot reach " + o.http_address + path + ": " + what +
                                    " (is it the server's --metrics-port?)");
  }
  if (res->status != 200) {
    std::string body;  // its lines joined: one error line
    std::istringstream lines(res->body);
    for (std::string line; std::getline(lines, line);) body += (body.empty() ? "" : "; ") + line;
    throw Error(ErrorKind::kIo,
                o.http_address + path + ": " + std::to_string(res->status) + " " + body);
  }
  std::cout << res->body;
}

void run_server(const ServerCommandOptions& o) {
  // Blocked before gRPC starts its threads, so the signals reach only sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  rpc_runner::TuningServer server(o.server);
  if (server.metrics_port() > 0)
    std::cout << "metrics on http://" << o.server.host << ":" << server.metrics_port()
              << "/metrics\n";
  std::cout << "listening on " << server.address() << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("{}: shutting down (unfinished jobs resume at the next start)",
               signal == SIGINT ? "SIGINT" : "SIGTERM");
  server.shutdown();
}

// The devices, one line each and a line of description and address.
void print_devices(const std::vector<rpc_runner::DeviceInfo>& devices) {
  std::cout << std::left << std::setw(6) << "id" << std::setw(16) << "key" << std::setw(10)
            << "busy" << std::setw(8) << "served" << std::setw(7) << "cores"
            << "target\n";
  for (const auto& d : devices) {
    std::cout << std::setw(6) << d.worker_id << std::setw(16) << d.key << std::setw(10)
              << (std::to_string(d.in_flight) + "/" + std::to_string(d.slots)) << std::setw(8)
              << d.served << std::setw(7) << d.cores << d.target << (d.emulated ? "  EMULATED" : "")
              << "\n"
              << "      " << d.description << " (" << d.peer << ")\n";
    if (d.core_gflops > 0)
      std::cout << "      calibrated: " << std::fixed << std::setprecision(1) << d.core_gflops
                << " GFLOP/s on one core, " << d.all_gflops << " on all" << std::defaultfloat
                << std::setprecision(6) << (d.calibration_note.empty() ? "" : " (")
                << d.calibration_note << (d.calibration_note.empty() ? "" : ")") << "\n";
    else
      std::cout << "      calibrating\n";
    if (d.refused > 0)
      std::cout << "      FLAGGED: " << d.refused << " result(s) refused, the last: " << d.flagged
                << "\n";
  }
}

// "1.23 s", "45 ms": a duration in the unit that reads best.
std::string seconds(double s) {
  std::ostringstream out;
  out << std::setprecision(3);
  if (s < 1)
    out << s * 1e3 << " ms";
  else
    out << s << " s";
  return out.str();
}

// A histogram's line: count, mean and the bucket bound under which 90% of the samples fall.
void print_latency(const std::vector<rpc_runner::MetricSample>& m, const std::string& what,
                   const std::string& name) {
  const double count = rpc_runner::metric_sum(m, name + "_count");
  std::cout << "  " << std::setw(12) << what << std::right << std::setw(8) << count;
  if (count > 0) {
    std::map<double, double> cumulative;  // by bucket bound, summed over the keys
    for (const auto& s : m)
      if (s.name == name + "_bucket") cumulative[std::stod(s.labels.at("le"))] += s.value;
    double p90 = INFINITY;
    for (const auto& [le, n] : cumulative)
      if (n >= 0.9 * count) {
        p90 = le;
        break;
      }
    std::cout << std::setw(12) << seconds(rpc_runner::metric_sum(m, name + "_sum") / count)
              << std::setw(14) << (std::isinf(p90) ? std::string("above all") : seconds(p90));
  }
  std::cout << std::left << "\n";
}

void run_status(const ServerCommandOptions& o) {
  const rpc_runner::ServerStatus status = rpc_runner::ServiceClient(o.client).status();
  const auto& m = status.metrics;
  auto sum = [&](const std::string& name, std::map<std::string, std::string> match = {}) {
    return static_cast<uint64_t>(rpc_runner::metric_sum(m, name, match));
  };
  const auto up = static_cast<int64_t>(status.uptime_s);
  std::cout << status.server_version << " (protocol " << status.protocol_version << ") at "
            << o.client.server << ", up " << up / 3600 << "h " << std::setfill('0') << std::setw(2)
            << up % 3600 / 60 << "m " << std::setw(2) << up % 60 << "s\n\n"
            << std::setfill(' ');

  std::set<std::string> keys;  // every key the metrics name
  for (const auto& s : m)
    if (auto it = s.labels.find("key"); it != s.labels.end()) keys.insert(it->second);
  std::cout << std::left << std::setw(18) << "key" << std::right << std::setw(6) << "idle"
            << std::setw(6) << "busy" << std::setw(7) << "slots" << std::setw(10) << "in flight"
            << std::setw(8) << "queued" << std::setw(8) << "trials" << std::setw(8) << "errors"
            << "  errors by kind\n";
  for (const std::string& key : keys) {
    std::string kinds;
    for (const auto& s : m)
      if (s.name == "ktune_trial_errors_total" && s.labels.at("key") == key && s.value > 0)
        kinds += (kinds.empty() ? "" : ", ") + s.labels.at("kind") + " " +
                 std::to_string(static_cast<uint64_t>(s.value));
    std::cout << std::left << std::setw(18) << key << std::right << std::setw(6)
              << sum("ktune_devices", {{"key", key}, {"state", "idle"}}) << std::setw(6)
              << sum("ktune_devices", {{"key", key}, {"state", "busy"}}) << std::setw(7)
              << sum("ktune_device_slots", {{"key", key}}) << std::setw(10)
              << sum("ktune_candidates_in_flight", {{"key", key}}) << std::setw(8)
              << sum("ktune_queue_depth", {{"key", key}}) << std::setw(8)
              << sum("ktune_trials_total", {{"key", key}}) << std::setw(8)
              << sum("ktune_trial_errors_total", {{"key", key}}) << "  " << kinds << "\n";
  }
  std::cout << std::left << "\njobs:";
  for (const char* state : {"queued", "running", "done", "failed", "cancelled"})
    std::cout << "  " << state << " " << sum("ktune_jobs", {{"state", state}});
  std::cout << "\n\n"
            << std::setw(14) << "latency" << std::right << std::setw(8) << "count" << std::setw(12)
            << "mean" << std::setw(14) << "90% within" << std::left << "\n";
  print_latency(m, "queue wait", "ktune_queue_wait_seconds");
  print_latency(m, "build", "ktune_build_seconds");
  print_latency(m, "run", "ktune_run_seconds");
  print_latency(m, "log write", "ktune_log_write_seconds");
  std::cout << "\n";
  if (status.devices.empty())
    std::cout << "no device attached\n";
  else
    print_devices(status.devices);
}

void run_devices(const ServerCommandOptions& o) {
  auto devices = rpc_runner::ServiceClient(o.client).devices();
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& d : devices)
      j.push_back({{"worker_id", d.worker_id},
                   {"key", d.key},
                   {"target", d.target},
                   {"cores", d.cores},
                   {"slots", d.slots},
                   {"in_flight", d.in_flight},
                   {"served", d.served},
                   {"emulated", d.emulated},
                   {"refused", d.refused},
                   {"flagged", d.flagged},
                   {"core_gflops", d.core_gflops},
                   {"all_gflops", d.all_gflops},
                   {"calibration_note", d.calibration_note},
                   {"description", d.description},
                   {"peer", d.peer}});
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (devices.empty()) {
    std::cout << "no device attached to " << o.client.server << "\n";
    return;
  }
  print_devices(devices);
}

void add_server(CLI::App& app) {
  auto o = std::make_shared<ServerCommandOptions>();
  rpc_runner::TuningServerOptions& s = o->server;
  auto* cmd = app.add_subcommand(
      "server", "Run the tuning service: it owns the log, the device fleet and the jobs");
  cmd->add_option("--host", s.host, "Address to listen on (0.0.0.0 = every interface)")
      ->capture_default_str();
  cmd->add_option("--port", s.port, "Port to listen on (0 = any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--db", s.db_path,
                  "The tuning log: a SQLite file (one server per file) or a "
                  "postgresql:// URL (servers may share it)")
      ->capture_default_str();
  cmd->add_option("--db-retry-s", s.db_retry_s,
                  "A PostgreSQL log that goes away is waited for this long (its jobs pause) "
                  "before its jobs fail, s (0 = at once)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--token-file", s.token_file,
                  "Lines 'worker: TOKEN', 'admin: TOKEN' and 'client NAME: TOKEN' (each token "
                  ">= 16 chars; an older file's 'client: TOKEN' is the admin's)")
      ->check(CLI::ExistingFile);
  cmd->add_flag(
      "--allow-readable-token", s.allow_readable_token,
      "Accept a token file that group or others may read (refused by default, as ssh does)");
  cmd->add_option("--tls-cert", s.tls_cert_file, "PEM certificate: serve TLS only")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", s.tls_key_file, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  cmd->add_option("--heartbeat", s.heartbeat_s, "Workers send a heartbeat at least this often, s")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  cmd->add_option("--worker-timeout", s.worker_timeout_s,
                  "A worker silent this long is lost (its candidates requeued), s")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--metrics-port", s.metrics_port,
                  "Serve Prometheus metrics at http://HOST:PORT/metrics, and the /healthz and "
                  "/readyz probes (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--max-jobs-per-minute", s.max_jobs_per_minute,
                  "Job submissions a client may make a minute (a burst of that many, then one "
                  "every 60/N s; 0 = no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--calibration-proof", s.calibration_proof_s,
                  "Seconds of work at its claimed speed in which each attaching worker proves its "
                  "calibration, timed here (0 = no proof: only for simulated devices)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60.0));
  cmd->add_option("--deadline-margin", s.deadline_margin_s,
                  "A candidate's deadline on a worker: its build and run timeouts plus this, s "
                  "(then the worker is lost and the candidate requeued)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  auto* devices = cmd->add_subcommand("devices", "List the device workers attached to a server");
  add_client_flags(devices, o->client, true);
  devices->add_flag("--json", o->json, "Print JSON");
  devices->callback([o] { run_devices(*o); });
  auto* status =
      cmd->add_subcommand("status", "Show a server's devices, queues, jobs, trials and latencies");
  add_client_flags(status, o->client, true);
  status->callback([o] { run_status(*o); });
  auto* health = cmd->add_subcommand(
      "health",
      "Ask a server's HTTP port whether it is alive (/healthz) or ready (/readyz): exit "
      "status 0 when it is, for a container's probe");
  health->add_option("--http", o->http_address, "HOST:PORT of the server's --metrics-port")
      ->required();
  health->add_flag("--ready", o->ready,
                   "Ask whether jobs can run now (the log takes writes, a worker is attached)");
  health->add_option("--timeout", o->timeout_s, "Seconds to wait for the answer")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  health->callback([o] { run_health(*o); });
  cmd->callback([o, devices, status, health] {
    if (devices->parsed() || status->parsed() || health->parsed()) return;
    run_server(*o);
  });
}

}  // namespace

KTUNE_REGISTER_COMMAND(server, add_server);

}  // namespace ktune::tools
