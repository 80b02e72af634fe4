// Declares the look-ups behind apply_history_best, `ktune best` and `ktune build`: a workload, its
// best record.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "rpc_runner/client/service_client.h"
#include "schedule_space/task.h"
#include "tuning_db/nearest.h"
#include "tuning_db/record.h"

namespace ktune::deploy {

// A workload as named on the command line, resolved on a target.
struct Workload {
  codegen::Target target;
  schedule_space::Task task;
};

// The traits of the target text ("host" or a TVM-style string) for creating a task: key (canonical
// form), vector width, cores, arch. Throws as codegen::Target::parse.
schedule_space::TargetTraits target_traits(const std::string& target_text);

// Parses the target text ("host" or a TVM-style string) and creates the task of `template_name`
// with its key=value `args` on it. Returns both.
// Throws Error(kInvalidArgument) for a bad target string, unknown template or argument, and
// Error(kUnsupported) for a triple this LLVM build has no backend for.
Workload resolve_workload(const std::string& template_name, const std::vector<std::string>& args,
                          const std::string& target_text);

// The target text to build for over a tuning server with a device key: the target of the key's
// devices attached to the server (they must agree), else the target of the key's newest record in
// the server's log. `target_text` "host" (the default) stands for that target; another target is
// kept when its architecture is the key's, and refused otherwise (a kernel for another
// architecture would never run on those devices). Returns target_text unchanged without a server
// or a device key. Throws Error(kInvalidArgument) for a target of another architecture or devices
// of the key that report different targets, Error(kNotFound) when the key has neither a device
// attached nor a record in the server's log, and what ServiceClient throws.
std::string device_key_target(const rpc_runner::ServiceClientOptions& server,
                              const std::string& device_key, const std::string& target_text);

// "ktune_" + the template name, with anything that cannot be in a C identifier made '_': the
// kernel symbol `ktune build` and apply_history_best give a workload's kernel by default.
std::string default_kernel_symbol(const std::string& template_name);

// Returns the k fastest successful records of the workload (fastest first; fewer when the log
// has fewer) in the tuning log at db_path (those of this ktune's LLVM version when it has any,
// else those of any version: tuning_db::top_k_preferring_toolchain), or asked of a tuning server
// (QueryBest, which answers the same way with the server's LLVM version), optionally of one
// device key. Records that do not instantiate are never among them, nor records measured on
// an emulated device unless include_emulated (then they compete with the real ones by cost and
// carry Record::emulated). Throws as best_record.
std::vector<tuning_db::Record> best_records(const std::string& db_path, const Workload& workload,
                                            int64_t k, bool include_emulated = false);
std::vector<tuning_db::Record> best_records(const rpc_runner::ServiceClientOptions& server,
                                            const Workload& workload, const std::string& device_key,
                                            int64_t k, bool include_emulated = false);

// Returns the fastest successful record of the workload in the tuning log at db_path (this
// LLVM's first, as best_records), or nullopt. The log is opened without creating it.
// Throws Error(kNotFound) when db_path does not exist and Error(kDatabase) for a file that is
// not a readable ktune log.
std::optional<tuning_db::Record> best_record(const std::string& db_path, const Workload& workload,
                                             bool include_emulated = false);

// The same, asked of a tuning server's log (QueryBest), optionally of one device key. Throws
// what ServiceClient throws (unreachable server, wrong token: one clear line).
std::optional<tuning_db::Record> best_record(const rpc_runner::ServiceClientOptions& server,
                                             const Workload& workload,
                                             const std::string& device_key,
                                             bool include_emulated = false);

// For a look-up without include_emulated that found nothing: "" when the log at db_path holds
// no successful emulated record of the workload either, else one sentence saying how many it
// holds and that `flag` serves them. Throws as best_record.
std::string emulated_only_note(const std::string& db_path, const Workload& workload,
                               const std::string& flag);
// The same over a tuning server's log (records of devices of device_key; "" = any). Throws as
// best_record.
std::string emulated_only_note(const rpc_runner::ServiceClientOptions& server,
                               const Workload& workload, const std::string& device_key,
                               const std::string& flag);

// For a workload without a record in the log at db_path: the best config of the nearest tuned
// workload of its template and target that is valid for it (tuning_db::nearest_tuned), or
// nullopt. Throws as best_record.
std::optional<tuning_db::NearestTuned> nearest_record(const std::string& db_path,
                                                      const Workload& workload,
                                                      bool include_emulated = false);

// The same over a tuning server's log. There is no RPC for it (one would bump the protocol), so
// this streams the server's records (ExportLog, the whole log: its cost grows with the log),
// keeps those of the workload's template in a temporary log file and runs nearest_tuned there.
// Throws what ServiceClient throws, and Error(kIo) when the temporary file cannot be written.
std::optional<tuning_db::NearestTuned> nearest_record(
    const rpc_runner::ServiceClientOptions& server, const Workload& workload,
    const std::string& device_key, bool include_emulated = false);

// One line for stderr when a served record was measured with another LLVM version than this
// ktune's ("" when it was not).
std::string toolchain_warning(const tuning_db::Record& record);

// One line for stderr when a served record was timed on an emulated device ("" when it was not).
std::string emulated_warning(const tuning_db::Record& record);

}  // namespace ktune::deploy
