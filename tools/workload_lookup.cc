// The look-up shared by `ktune best` and `ktune build`.
#include "tools/workload_lookup.h"

#include <filesystem>
#include <memory>

#include "support/error.h"
#include "tuning_db/database.h"

namespace ktune::tools {

schedule_space::TargetTraits target_traits(const std::string& target_text) {
  const codegen::Target target = codegen::Target::parse(target_text);
  return schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(), target.cores());
}

namespace {

// Every log this program opens checks records against its templates and targets: best/top (also
// the server's QueryBest) pass over records that do not instantiate, import rejects them. Installed
// at start-up, like the subcommands (KTUNE_REGISTER_COMMAND).
const bool kRecordCheckInstalled = [] {
  tuning_db::set_default_record_check(std::make_shared<tuning_db::RecordCheck>(target_traits));
  return true;
}();

}  // namespace

Workload resolve_workload(const std::string& template_name, const std::vector<std::string>& args,
                          const std::string& target_text) {
  codegen::Target target = codegen::Target::parse(target_text);
  const auto traits =
      schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(), target.cores());
  auto task =
      schedule_space::Task::create(template_name, schedule_space::parse_workload_args(template_name, args), traits);
  return Workload{std::move(target), std::move(task)};
}

namespace {

tuning_db::Database open_log(const std::string& db_path) {
  if (!std::filesystem::exists(db_path)) throw Error(ErrorKind::kNotFound, "no tuning log at " + db_path);
  tuning_db::OpenOptions open;
  open.read_only = true;  // a build machine may only read the log
  return tuning_db::Database::open(db_path, open);
}

}  // namespace

std::vector<tuning_db::Record> best_records(const std::string& db_path, const Workload& workload, int64_t k,
                                            bool include_emulated) {
  auto db = open_log(db_path);
  tuning_db::RecordQuery query;
  query.include_emulated = include_emulated;
  // Records of this toolchain first: a config measured with another LLVM may run at another
  // speed now (the caller says so when it serves one: toolchain_warning).
  auto current = db.top_k(workload.task.workload_key(), tuning_db::TargetKey{workload.target.str(), codegen::llvm_version()},
                          k, query);
  if (!current.empty()) return current;
  return db.top_k(workload.task.workload_key(), tuning_db::TargetKey{workload.target.str(), ""}, k, query);
}

std::string toolchain_warning(const tuning_db::Record& record) {
  if (record.target.llvm_version == codegen::llvm_version()) return "";
  return "the record served was measured with LLVM " + record.target.llvm_version + " (ktune " + record.ktune_version +
         "); this ktune builds with LLVM " + codegen::llvm_version() +
         " and has no record of its own for this workload: `ktune db revalidate` re-measures";
}

std::optional<tuning_db::NearestTuned> nearest_record(const std::string& db_path, const Workload& workload,
                                                      bool include_emulated) {
  auto db = open_log(db_path);
  tuning_db::RecordQuery query;
  query.include_emulated = include_emulated;
  return tuning_db::nearest_tuned(db, workload.task, tuning_db::TargetKey{workload.target.str(), ""}, query);
}

std::string emulated_only_note(const std::string& db_path, const Workload& workload, const std::string& flag) {
  auto db = open_log(db_path);
  const int64_t n = db.count_emulated(workload.task.workload_key(), tuning_db::TargetKey{workload.target.str(), ""});
  if (n == 0) return "";
  return db_path + " holds " + std::to_string(n) + " successful record" + (n == 1 ? "" : "s") +
         " of this workload measured on an emulated device (qemu), not served as real timings; " + flag +
         " serves them";
}

std::string emulated_warning(const tuning_db::Record& record) {
  if (!record.emulated) return "";
  return "the record served was timed on an emulated device (device key '" + record.device_key +
         "'): its timing is the emulator's, not the device's";
}

std::vector<tuning_db::Record> best_records(const rpc_runner::ServiceClientOptions& server, const Workload& workload,
                                            const std::string& device_key, int64_t k, bool include_emulated) {
  rpc_runner::ServiceClient client(server);
  return client.best(workload.task.workload_key(), workload.target.str(), device_key, k, include_emulated);
}

std::optional<tuning_db::Record> best_record(const std::string& db_path, const Workload& workload,
                                             bool include_emulated) {
  auto top = best_records(db_path, workload, 1, include_emulated);
  if (top.empty()) return std::nullopt;
  return std::move(top.front());
}

std::optional<tuning_db::Record> best_record(const rpc_runner::ServiceClientOptions& server, const Workload& workload,
                                             const std::string& device_key, bool include_emulated) {
  auto top = best_records(server, workload, device_key, 1, include_emulated);
  if (top.empty()) return std::nullopt;
  return std::move(top.front());
}

}  // namespace ktune::tools
