// `ktune server`: run the tuning server until SIGINT/SIGTERM; `ktune server devices`: list its workers.
#include <pthread.h>
#include <signal.h>

#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "rpc_runner/tuning_server.h"
#include "support/error.h"
#include "tools/commands.h"

namespace ktune::tools {
namespace {

struct ServerCommandOptions {
  std::string host = "127.0.0.1";
  int port = 9190;
  std::string server;  // `devices`: the server to ask
  bool json = false;
};

void run_server(const ServerCommandOptions& o) {
  // Blocked before gRPC starts its threads, so the signals reach only sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  rpc_runner::TuningServerOptions options;
  options.host = o.host;
  options.port = o.port;
  rpc_runner::TuningServer server(options);
  std::cout << "listening on " << server.address() << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("{}: shutting down", signal == SIGINT ? "SIGINT" : "SIGTERM");
  server.shutdown();
}

void run_devices(const ServerCommandOptions& o) {
  auto devices = rpc_runner::list_devices(o.server);
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& d : devices)
      j.push_back({{"worker_id", d.worker_id}, {"key", d.key}, {"target", d.target}, {"cores", d.cores},
                   {"leased", d.leased}, {"description", d.description}, {"peer", d.peer}});
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (devices.empty()) {
    std::cout << "no device attached to " << o.server << "\n";
    return;
  }
  std::cout << std::left << std::setw(6) << "id" << std::setw(16) << "key" << std::setw(8) << "leased"
            << std::setw(7) << "cores" << "target\n";
  for (const auto& d : devices)
    std::cout << std::setw(6) << d.worker_id << std::setw(16) << d.key << std::setw(8) << (d.leased ? "yes" : "no")
              << std::setw(7) << d.cores << d.target << "\n"
              << "      " << d.description << " (" << d.peer << ")\n";
}

void add_server(CLI::App& app) {
  auto o = std::make_shared<ServerCommandOptions>();
  auto* cmd = app.add_subcommand("server", "Run the tuning server that device workers attach to");
  cmd->add_option("--host", o->host, "Address to listen on (0.0.0.0 = every interface)")->capture_default_str();
  cmd->add_option("--port", o->port, "Port to listen on (0 = any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  auto* devices = cmd->add_subcommand("devices", "List the device workers attached to a server");
  devices->add_option("--server", o->server, "The tuning server, HOST:PORT")->required();
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
