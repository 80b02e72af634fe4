// The --db / --server / --untuned flags of the commands that build from a tuning log.
#include "tools/history_flags.h"

#include <spdlog/spdlog.h>

#include "support/error.h"
#include "tools/service_flags.h"

namespace ktune::tools {

void add_history_flags(CLI::App* cmd, HistoryFlags& flags, const std::string& device_key_help) {
  CLI::Option* db =
      cmd->add_option("--db", flags.db,
                      "Tuning log (SQLite file or postgresql:// URL); one that does not exist is "
                      "an error (see --untuned)")
          ->capture_default_str();
  CLI::Option* server =
      add_client_flags(cmd, flags.server, false)
          ->description("Ask this tuning server's log (HOST:PORT) instead of --db");
  cmd->add_option("--device-key", flags.device_key, device_key_help);
  cmd->add_flag("--untuned", flags.untuned,
                "Read no tuning log: every kernel on its template's fallback config")
      ->excludes(db)
      ->excludes(server);
}

HistorySource history_source(const HistoryFlags& flags) {
  if (flags.untuned) return HistorySource::untuned();
  if (!flags.server.server.empty()) return HistorySource::server(flags.server, flags.device_key);
  if (!flags.device_key.empty())
    throw Error(ErrorKind::kInvalidArgument, "--device-key needs --server");
  return HistorySource::log(flags.db);
}

void warn_if_mostly_untuned(const deploy::StepSources& n, const HistorySource& from,
                            const std::string& model, const std::vector<std::string>& inputs) {
  // A tuned step whose best record is the fallback config runs what an untuned step would.
  const int untuned = n.nearest + n.fallback + n.tuned_fallback_config;
  if (from.is_untuned() || untuned == 0 || 2 * untuned < n.tasks()) return;
  std::string parts = std::to_string(n.fallback) + " fallback, " + std::to_string(n.nearest) +
                      " of the nearest tuned shape";
  if (n.tuned_fallback_config > 0)
    parts += ", " + std::to_string(n.tuned_fallback_config) +
             " whose best record is the fallback config (no trial ran, or none beat it)";
  std::string args = model;
  for (const std::string& input : inputs) args += " --input " + input;
  if (from.is_server()) {
    // The command as it runs: a job on the server needs the devices it tunes on, and the same
    // credentials as this build.
    const rpc_runner::ServiceClientOptions& o = from.server_options();
    args += " --server " + o.server + " --device-key " +
            (from.device_key().empty() ? "KEY" : from.device_key());
    if (!o.token_file.empty()) args += " --token-file " + o.token_file;
    if (!o.tls_ca_file.empty()) args += " --tls-ca " + o.tls_ca_file;
  } else {
    args += " --db " + from.db_path();
  }
  const std::string tune = "`ktune tune-model " + args + "`";
  spdlog::warn(
      "{} of the {} tunable kernels run untuned configs ({}): {}", untuned, n.tasks(), parts,
      n.tuned_fallback_config > 0
          ? tune + " with more trials tunes them"
          : "the " + from.describe() + " holds no records of them; " + tune + " tunes them");
}

}  // namespace ktune::tools
