// `ktune server`: run the tuning service until SIGINT/SIGTERM; `ktune server devices`: list its
// workers.
#include <pthread.h>
#include <signal.h>

#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

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
};

void run_server(const ServerCommandOptions& o) {
  // Blocked before gRPC starts its threads, so the signals reach only sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  rpc_runner::TuningServer server(o.server);
  std::cout << "listening on " << server.address() << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("{}: shutting down (unfinished jobs resume at the next start)",
               signal == SIGINT ? "SIGINT" : "SIGTERM");
  server.shutdown();
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
                   {"description", d.description},
                   {"peer", d.peer}});
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (devices.empty()) {
    std::cout << "no device attached to " << o.client.server << "\n";
    return;
  }
  std::cout << std::left << std::setw(6) << "id" << std::setw(16) << "key" << std::setw(10)
            << "busy" << std::setw(8) << "served" << std::setw(7) << "cores"
            << "target\n";
  for (const auto& d : devices)
    std::cout << std::setw(6) << d.worker_id << std::setw(16) << d.key << std::setw(10)
              << (std::to_string(d.in_flight) + "/" + std::to_string(d.slots)) << std::setw(8)
              << d.served << std::setw(7) << d.cores << d.target << (d.emulated ? "  EMULATED" : "")
              << "\n"
              << "      " << d.description << " (" << d.peer << ")\n";
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
  cmd->add_option("--db", s.db_path, "The tuning log the server owns (SQLite)")
      ->capture_default_str();
  cmd->add_option("--token-file", s.token_file,
                  "Lines 'worker: TOKEN' and 'client: TOKEN' (each >= 16 chars)")
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
  auto* devices = cmd->add_subcommand("devices", "List the device workers attached to a server");
  add_client_flags(devices, o->client, true);
  devices->add_flag("--json", o->json, "Print JSON");
  devices->callback([o] { run_devices(*o); });
  cmd->callback([o, devices] {
    if (devices->parsed()) return;
    run_server(*o);
  });
}

}  // namespace

KTUNE_REGISTER_COMMAND(server, add_server);

}  // namespace ktune::tools
