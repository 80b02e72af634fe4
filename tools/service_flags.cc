// Client flags and the job table.
#include "tools/service_flags.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace ktune::tools {

CLI::Option* add_client_flags(CLI::App* cmd, rpc_runner::ServiceClientOptions& options,
                              bool required) {
  CLI::Option* server = cmd->add_option("--server", options.server, "The tuning server, HOST:PORT");
  if (required) server->required();
  cmd->add_option("--token-file", options.token_file,
                  "File with a client's or the admin's token (a bare token, the client's "
                  "'client NAME: TOKEN' line, or the server's token file)")
      ->check(CLI::ExistingFile);
  cmd->add_flag(
      "--allow-readable-token", options.allow_readable_token,
      "Accept a token file that group or others may read (refused by default, as ssh does)");
  cmd->add_option("--tls-ca", options.tls_ca_file,
                  "PEM of the CA that signed the server's certificate (TLS)")
      ->check(CLI::ExistingFile);
  return server;
}

std::string job_owner() {
  // $USER, else the account's name (a service or a container may set no USER).
  const char* user = std::getenv("USER");
  if (!user || !*user)
    if (const passwd* pw = ::getpwuid(::getuid())) user = pw->pw_name;
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(user ? user : "?") + "@" + host;
}

void print_jobs(std::ostream& out, const std::vector<rpc_runner::JobStatus>& jobs) {
  out << std::left << std::setw(5) << "id" << std::setw(11) << "state" << std::setw(14) << "trials"
      << std::setw(12) << "best GF/s" << std::setw(9) << "devices" << std::setw(5) << "prio"
      << std::setw(14) << "key" << std::setw(10) << "client"
      << "workload\n";
  for (const auto& j : jobs) {
    std::ostringstream trials, best, devices;
    trials << j.done << "/" << j.trials;
    best << std::fixed << std::setprecision(2) << j.best_gflops;
    devices << j.measuring << "/" << j.devices;
    out << std::setw(5) << j.id << std::setw(11) << j.state << std::setw(14) << trials.str()
        << std::setw(12) << (j.best_gflops > 0 ? best.str() : "-") << std::setw(9) << devices.str()
        << std::setw(5) << j.priority << std::setw(14) << j.device_key << std::setw(10)
        << (j.client.empty() ? "-" : j.client) << j.workload << "\n";
    if (!j.message.empty() && j.state != tuning_db::JobState::kDone)
      out << "     " << j.message << "\n";
  }
}

nlohmann::json to_json(const rpc_runner::JobStatus& j) {
  return {{"id", j.id},
          {"state", tuning_db::to_string(j.state)},
          {"workload", j.workload},
          {"device_key", j.device_key},
          {"target", j.target},
          {"trials", j.trials},
          {"done", j.done},
          {"best_gflops", j.best_gflops},
          {"devices", j.devices},
          {"measuring", j.measuring},
          {"priority", j.priority},
          {"owner", j.owner},
          {"client", j.client},
          {"message", j.message},
          {"tuner", j.tuner},
          {"created_at", j.created_at},
          {"model", j.model}};
}

}  // namespace ktune::tools
