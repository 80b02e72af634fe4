// `ktune best <template> key=value... --db PATH | --server HOST:PORT [--top K] [--emulated]`: the
// best logged config of a workload (or its K best), or the fallback.
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "deploy/history_lookup.h"
#include "support/error.h"
#include "support/ms_text.h"
#include "tools/commands.h"
#include "tools/service_flags.h"
#include "tuning_db/record.h"

namespace ktune::tools {
namespace {

using deploy::best_records;
using deploy::emulated_only_note;
using deploy::emulated_warning;
using deploy::resolve_workload;
using deploy::toolchain_warning;
using deploy::Workload;

struct BestOptions {
  std::string template_name;
  std::vector<std::string> args;
  std::string target = "host";
  std::string db = "ktune.db";
  rpc_runner::ServiceClientOptions server;  // set: ask this server instead of --db
  std::string device_key;
  int64_t top = 1;        // how many of the best records to print
  bool emulated = false;  // records of emulated devices are eligible too
  bool json = false;
};

void run_best(const BestOptions& o) {
  if (o.server.server.empty() && !o.device_key.empty())
    throw Error(ErrorKind::kInvalidArgument, "--device-key needs --server");
  // Over a server with a device key, "host" means the key's devices' target.
  const Workload w = deploy::resolve_workload(
      o.template_name, o.args, deploy::device_key_target(o.server, o.device_key, o.target));
  const schedule_space::Task& task = w.task;
  const codegen::Target& target = w.target;
  const auto top = o.server.server.empty()
                       ? deploy::best_records(o.db, w, o.top, o.emulated)
                       : deploy::best_records(o.server, w, o.device_key, o.top, o.emulated);
  const tuning_db::Record* best = top.empty() ? nullptr : &top.front();
  // Only emulated records: answered as "none", with a note that names them and the flag.
  std::string note;
  if (!best && !o.emulated)
    note = o.server.server.empty()
               ? deploy::emulated_only_note(o.db, w, "--emulated")
               : deploy::emulated_only_note(o.server, w, o.device_key, "--emulated");
  if (best && best->emulated) spdlog::warn("{}", deploy::emulated_warning(*best));
  if (best && !deploy::toolchain_warning(*best).empty())
    spdlog::warn("{}", deploy::toolchain_warning(*best));
  if (o.json) {
    nlohmann::json j{{"workload", task.workload_key()}, {"target", target.str()}};
    j["best"] = best ? tuning_db::to_report_json(*best) : nlohmann::json(nullptr);
    if (!note.empty()) j["note"] = note;
    if (o.top > 1) {
      j["top"] = nlohmann::json::array();
      for (const auto& r : top) j["top"].push_back(tuning_db::to_report_json(r));
    }
    j["fallback"] = task.fallback_config().to_json();
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "workload: " << task.workload_key() << "\n"
            << "target:   " << target.str() << "\n";
  if (!best) {
    std::cout << "best:     none\n";
    if (!note.empty()) std::cout << "note:     " << note << "\n";
    std::cout << "fallback: " << task.fallback_config().to_json_string() << "\n";
    return;
  }
  std::cout << "best:     " << std::fixed << std::setprecision(2) << best->gflops() << " GFLOP/s ("
            << ms_text(best->cost()) << " ms" << (best->retimed_costs.empty() ? "" : ", re-timed")
            << "), tuner " << best->tuner << ", LLVM " << best->target.llvm_version
            << (best->emulated ? ", EMULATED device" : "")
            << (best->noisy() ? ", NOISY timing" : "") << "\n"
            << "config:   " << best->config.dump() << "\n";
  if (o.top <= 1) return;
  std::cout << "top " << top.size() << " (rank, throughput, device key or -, config):\n";
  for (size_t i = 0; i < top.size(); ++i) {
    std::cout << "  " << std::setw(3) << i + 1 << "  " << std::setw(9) << std::setprecision(2)
              << top[i].gflops() << " GFLOP/s  " << std::setw(8)
              << (top[i].device_key.empty() ? "-" : top[i].device_key) << "  "
              << (top[i].emulated ? "emulated  " : "") << (top[i].noisy() ? "NOISY  " : "")
              << top[i].config.dump() << "\n";
  }
}

void add_best(CLI::App& app) {
  auto o = std::make_shared<BestOptions>();
  auto* cmd =
      app.add_subcommand("best", "Print the best logged config of a workload (or the fallback)");
  cmd->add_option("template", o->template_name, "Template name (see `ktune templates`)")
      ->required();
  cmd->add_option("args", o->args,
                  "Workload arguments key=value (omitted ones take their defaults)");
  cmd->add_option("--target", o->target, "Target: host or 'llvm -mtriple=... -mcpu=...'")
      ->capture_default_str();
  cmd->add_option("--db", o->db, "Tuning log (SQLite file or postgresql:// URL)")
      ->capture_default_str();
  add_client_flags(cmd, o->server, false)
      ->description("Ask this tuning server's log (HOST:PORT) instead of --db");
  cmd->add_option("--device-key", o->device_key,
                  "With --server: only records measured on devices of this key, for their target "
                  "(a --target of another architecture is refused)");
  cmd->add_option("--top", o->top, "Also list the K best records (1 to 1000)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag(
      "--emulated", o->emulated,
      "Also serve records timed on emulated devices (qemu); they compete with real ones by cost "
      "and are marked");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_best(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(best, add_best);

}  // namespace ktune::tools
