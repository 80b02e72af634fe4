// `ktune db revalidate`: after a toolchain change, re-measure on this machine the fastest configs
// the log holds from other LLVM versions, and log the new numbers beside the old.
#include "tools/db_revalidate.h"

#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "codegen/target.h"
#include "rpc_runner/runner/local_runner.h"
#include "schedule_space/workload.h"
#include "support/error.h"
#include "support/version.h"
#include "tuner/revalidate.h"
#include "tuning_db/database.h"

namespace ktune::tools {
namespace {

struct RevalidateArgs {
  std::string path;
  int64_t top = 5;
  bool json = false;
};

void run_revalidate(const RevalidateArgs& args) {
  tuning_db::OpenOptions open;
  open.create = false;  // a typo in --db must not create an empty log
  auto db = tuning_db::Database::open(args.path, open);
  const codegen::Target host = codegen::Target::host();
  const auto traits = schedule_space::make_target_traits(host.str(), host.triple(),
                                                         host.vector_bits(), host.cores());
  rpc_runner::LocalRunner runner(rpc_runner::LocalRunnerOptions{});
  tuner::RevalidateOptions options;
  options.top_k = args.top;
  options.llvm_version = codegen::llvm_version();
  options.ktune_version = kVersion;
  const auto done = tuner::revalidate(db, runner, traits, options);
  if (args.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& w : done)
      j.push_back({{"workload", w.workload_key},
                   {"remeasured", w.remeasured},
                   {"failed", w.failed},
                   {"old_best_s", w.old_best_s},
                   {"old_llvm_version", w.old_llvm_version},
                   {"new_best_s", w.new_best_s},
                   {"llvm_version", options.llvm_version}});
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "target " << host.str() << ", LLVM " << options.llvm_version << ": " << done.size()
            << " workload(s) had records of other toolchains only\n";
  for (const auto& w : done)
    std::cout << std::left << std::setw(52) << w.workload_key << " " << w.remeasured
              << " configs, best " << std::fixed << std::setprecision(4) << w.old_best_s * 1e3
              << " ms (LLVM " << w.old_llvm_version << ") -> "
              << (w.new_best_s > 0 ? std::to_string(w.new_best_s * 1e3) + " ms"
                                   : std::string("all failed"))
              << (w.failed ? " (" + std::to_string(w.failed) + " failed)" : "") << "\n";
}

}  // namespace

void add_db_revalidate(CLI::App* db) {
  auto args = std::make_shared<RevalidateArgs>();
  CLI::App* cmd = db->add_subcommand("revalidate",
                                     "Re-measure here the fastest configs measured with other LLVM "
                                     "versions; log them beside the old");
  cmd->add_option("--db", args->path, "Tuning log file")->required();
  cmd->add_option("--top", args->top, "Configs per workload")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args] { run_revalidate(*args); });
}

}  // namespace ktune::tools
