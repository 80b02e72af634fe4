// The look-ups behind apply_history_best, `ktune best` and `ktune build`.
#include "deploy/history_lookup.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include "support/error.h"
#include "tuning_db/database.h"
#include "tuning_db/toolchain_preference.h"

namespace ktune::deploy {

schedule_space::TargetTraits target_traits(const std::string& target_text) {
  const codegen::Target target = codegen::Target::parse(target_text);
  return schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(),
                                            target.cores());
}

namespace {

// Every log a program using these look-ups opens checks records against its templates and
// targets: best/top (also the server's QueryBest) pass over records that do not instantiate,
// import rejects them. Installed at start-up, like the subcommands (KTUNE_REGISTER_COMMAND); this
// file is linked into every program that looks records up (ktune, apply_history_best's users).
const bool kRecordCheckInstalled = [] {
  tuning_db::set_default_record_check(std::make_shared<tuning_db::RecordCheck>(target_traits));
  return true;
}();

}  // namespace

Workload resolve_workload(const std::string& template_name, const std::vector<std::string>& args,
                          const std::string& target_text) {
  codegen::Target target = codegen::Target::parse(target_text);
  const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                         target.vector_bits(), target.cores());
  auto task = schedule_space::Task::create(
      template_name, schedule_space::parse_workload_args(template_name, args), traits);
  return Workload{std::move(target), std::move(task)};
}

std::string default_kernel_symbol(const std::string& template_name) {
  std::string s = "ktune_" + template_name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  return s;
}

namespace {

tuning_db::Database open_log(const std::string& db_path) {
  if (!tuning_db::log_exists(db_path))
    throw Error(ErrorKind::kNotFound,
                "no tuning log at " + db_path + " (`ktune tune` and `ktune tune-model` write one)");
  tuning_db::OpenOptions open;
  open.read_only = true;  // a build machine may only read the log
  return tuning_db::Database::open(db_path, open);
}

tuning_db::RecordQuery record_query(const std::string& device_key, bool include_emulated) {
  tuning_db::RecordQuery query;
  query.device_key = device_key;
  query.include_emulated = include_emulated;
  return query;
}

// A log file of this process's own that is deleted when it goes out of scope.
class TemporaryLog {
 public:
  TemporaryLog() {
    static std::atomic<int> counter{0};
    path_ =
        (std::filesystem::temp_directory_path() /
         ("ktune-nearest-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".db"))
            .string();
  }
  ~TemporaryLog() {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      std::filesystem::remove(path_ + suffix, ec);
  }
  TemporaryLog(const TemporaryLog&) = delete;
  TemporaryLog& operator=(const TemporaryLog&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

std::vector<tuning_db::Record> best_records(const std::string& db_path, const Workload& workload,
                                            int64_t k, bool include_emulated) {
  auto db = open_log(db_path);
  return tuning_db::top_k_preferring_toolchain(db, workload.task.workload_key(),
                                               workload.target.str(), codegen::llvm_version(), k,
                                               record_query("", include_emulated));
}

std::vector<tuning_db::Record> best_records(const rpc_runner::ServiceClientOptions& server,
                                            const Workload& workload, const std::string& device_key,
                                            int64_t k, bool include_emulated) {
  rpc_runner::ServiceClient client(server);
  return client.best(workload.task.workload_key(), workload.target.str(), device_key, k,
                     include_emulated);
}

std::optional<tuning_db::Record> best_record(const std::string& db_path, const Workload& workload,
                                             bool include_emulated) {
  auto top = best_records(db_path, workload, 1, include_emulated);
  if (top.empty()) return std::nullopt;
  return std::move(top.front());
}

std::optional<tuning_db::Record> best_record(const rpc_runner::ServiceClientOptions& server,
                                             const Workload& workload,
                                             const std::string& device_key, bool include_emulated) {
  auto top = best_records(server, workload, device_key, 1, include_emulated);
  if (top.empty()) return std::nullopt;
  return std::move(top.front());
}

std::string emulated_only_note(const std::string& db_path, const Workload& workload,
                               const std::string& flag) {
  auto db = open_log(db_path);
  const int64_t n = db.count_emulated(workload.task.workload_key(),
                                      tuning_db::TargetKey{workload.target.str(), ""});
  if (n == 0) return "";
  return db_path + " holds " + std::to_string(n) + " successful record" + (n == 1 ? "" : "s") +
         " of this workload measured on an emulated device (qemu), not served as real timings; " +
         flag + " serves them";
}

std::string emulated_only_note(const rpc_runner::ServiceClientOptions& server,
                               const Workload& workload, const std::string& device_key,
                               const std::string& flag) {
  // The server answers at most 1000 records a query: enough to say "some" and roughly how many.
  constexpr int64_t kMost = 1000;
  const auto records = best_records(server, workload, device_key, kMost, true);
  const auto n = std::count_if(records.begin(), records.end(),
                               [](const tuning_db::Record& r) { return r.emulated; });
  if (n == 0) return "";
  return "the log of " + server.server + " holds " + (n == kMost ? "at least " : "") +
         std::to_string(n) + " successful record" + (n == 1 ? "" : "s") +
         " of this workload measured on an emulated device (qemu), not served as real timings; " +
         flag + " serves them";
}

std::string device_key_target(const rpc_runner::ServiceClientOptions& server,
                              const std::string& device_key, const std::string& target_text) {
  if (server.server.empty() || device_key.empty()) return target_text;
  rpc_runner::ServiceClient client(server);
  std::set<std::string> attached;
  std::string recorded;
  try {
    const rpc_runner::ServerStatus status = client.status(device_key);
    for (const auto& d : status.devices)
      if (d.key == device_key) attached.insert(d.target);
    recorded = status.recorded_target;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kUnsupported) throw;
    // An older server: its devices still tell, its log cannot.
    for (const auto& d : client.devices())
      if (d.key == device_key) attached.insert(d.target);
  }
  if (attached.size() > 1) {
    std::string list;
    for (const auto& t : attached) list += (list.empty() ? "" : "; ") + t;
    throw Error(ErrorKind::kInvalidArgument, "the devices of key '" + device_key + "' on " +
                                                 server.server + " report different targets (" +
                                                 list + "): give --target");
  }
  if (attached.empty() && recorded.empty())
    throw Error(ErrorKind::kNotFound, "device key '" + device_key + "' has no device attached to " +
                                          server.server + " and no record in its log");
  const codegen::Target key =
      codegen::Target::parse(attached.empty() ? recorded : *attached.begin());
  if (target_text == "host") return key.str();
  const codegen::Target asked = codegen::Target::parse(target_text);
  auto arch = [](const codegen::Target& t) { return t.triple().substr(0, t.triple().find('-')); };
  if (arch(asked) != arch(key))
    throw Error(ErrorKind::kInvalidArgument, "--target " + asked.str() + " is " + arch(asked) +
                                                 ", but the devices of key '" + device_key +
                                                 "' are " + arch(key) + " (" + key.str() + ")");
  return target_text;
}

std::optional<tuning_db::NearestTuned> nearest_record(const std::string& db_path,
                                                      const Workload& workload,
                                                      bool include_emulated) {
  auto db = open_log(db_path);
  return tuning_db::nearest_tuned(db, workload.task,
                                  tuning_db::TargetKey{workload.target.str(), ""},
                                  record_query("", include_emulated));
}

std::optional<tuning_db::NearestTuned> nearest_record(
    const rpc_runner::ServiceClientOptions& server, const Workload& workload,
    const std::string& device_key, bool include_emulated) {
  std::stringstream lines;
  rpc_runner::ServiceClient(server).export_log(lines);
  // Only the successful records of the template on the target can be the nearest.
  std::vector<tuning_db::Record> candidates;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    tuning_db::Record r = tuning_db::from_json_line(line);
    if (r.ok() && r.template_name == workload.task.template_name() &&
        r.target.target == workload.target.str())
      candidates.push_back(std::move(r));
  }
  if (candidates.empty()) return std::nullopt;
  TemporaryLog log;
  auto db = tuning_db::Database::open(log.path());
  db.add(candidates);
  auto nearest =
      tuning_db::nearest_tuned(db, workload.task, tuning_db::TargetKey{workload.target.str(), ""},
                               record_query(device_key, include_emulated));
  if (nearest) nearest->record.id = 0;  // an id of the temporary log, not of the server's
  return nearest;
}

std::string toolchain_warning(const tuning_db::Record& record) {
  if (record.target.llvm_version == codegen::llvm_version()) return "";
  return "the record served was measured with LLVM " + record.target.llvm_version + " (ktune " +
         record.ktune_version + "); this ktune builds with LLVM " + codegen::llvm_version() +
         " and has no record of its own for this workload: `ktune db revalidate` re-measures";
}

std::string emulated_warning(const tuning_db::Record& record) {
  if (!record.emulated) return "";
  return "the record served was timed on an emulated device (device key '" + record.device_key +
         "'): its timing is the emulator's, not the device's";
}

}  // namespace ktune::deploy
