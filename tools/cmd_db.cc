// `ktune db stats|best|top|export|import|check|migrate|remove-failed|remove-invalid|revalidate
// --db LOG`: the tuning log (a SQLite path or a postgresql:// URL) from the command line,
// human-readable by default and JSON with --json.
#include <spdlog/spdlog.h>
#include <algorithm>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "support/error.h"
#include "tools/commands.h"
#include "tools/db_revalidate.h"
#include "tools/service_flags.h"
#include "tuning_db/database.h"
#include "tuning_db/log_copy.h"

namespace ktune::tools {
namespace {

using nlohmann::json;
using tuning_db::Database;
using tuning_db::Record;
using tuning_db::TargetKey;

struct DbArgs {
  std::string path;
  bool json = false;
  std::string workload;
  bool best_only = false;  // export: one record per workload and target (a pack)
  std::string target;
  std::string llvm;
  std::string device;
  int64_t k = 10;
  int64_t batch = 10000;  // import: records per committed transaction
  bool emulated = false;  // best/top: records of emulated devices are eligible too
  std::string file;
  std::string to;       // migrate: the target log (--from is `path`)
  bool append = false;  // migrate: add to a target that holds records, runs, models or jobs
  rpc_runner::ServiceClientOptions server;  // export: from this server's log instead of --db
};

Database open_existing(const DbArgs& args) {
  tuning_db::OpenOptions options;
  options.create = false;  // a typo in --db must not create an empty log
  return Database::open(args.path, options);
}

// For the commands that only read: works on a log the user may not write.
Database open_to_read(const DbArgs& args) {
  tuning_db::OpenOptions options;
  options.read_only = true;
  return Database::open(args.path, options);
}

std::string format_time(double unix_seconds) {
  if (unix_seconds <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, "%Y-%m-%d %H:%M:%S UTC");
  return out.str();
}

std::string format_cost(double seconds) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(4);
  if (seconds >= 1) {
    out << seconds << " s";
  } else if (seconds >= 1e-3) {
    out << seconds * 1e3 << " ms";
  } else {
    out << seconds * 1e6 << " us";
  }
  return out.str();
}

// The target to query: --target (+ --llvm), or the only target the workload was measured on.
TargetKey resolve_target(Database& db, const DbArgs& args) {
  if (!args.target.empty()) return {args.target, args.llvm};
  std::set<std::string> targets;
  for (const auto& s : db.summaries()) {
    if (s.workload_key == args.workload) targets.insert(s.target.target);
  }
  if (targets.empty()) {
    // The log's keys of the same template: a key typed by hand often lacks an argument the
    // template writes (matmul's layout=nn).
    const std::string tmpl = args.workload.substr(0, args.workload.find('('));
    std::set<std::string> same_template;
    for (const auto& s : db.summaries())
      if (s.workload_key.rfind(tmpl + "(", 0) == 0) same_template.insert(s.workload_key);
    // On the error's one line: the first few keys, then how many more.
    std::string hint;
    size_t listed = 0;
    for (const std::string& key : same_template) {
      if (hint.size() > 400) break;
      hint += (listed++ ? ", " : " ") + key;
    }
    if (listed < same_template.size())
      hint += " and " + std::to_string(same_template.size() - listed) + " more";
    throw Error(ErrorKind::kNotFound,
                "no records of workload '" + args.workload + "' in " + args.path +
                    (same_template.empty() ? std::string(" (`ktune db stats` lists its workloads)")
                                           : "; its workloads of template '" + tmpl +
                                                 "' (a key names every argument):" + hint));
  }
  if (targets.size() > 1) {
    std::string list;
    for (const auto& t : targets) list += "\n  " + t;
    throw Error(ErrorKind::kInvalidArgument, "workload '" + args.workload +
                                                 "' was measured on several targets; pick one " +
                                                 "with --target:" + list);
  }
  return {*targets.begin(), args.llvm};
}

// Records of emulated devices only for this look-up: a sentence naming them and the flag, or "".
std::string emulated_note(Database& db, const DbArgs& args, const TargetKey& target) {
  if (args.emulated) return "";
  const int64_t n = db.count_emulated(args.workload, target, args.device);
  if (n == 0) return "";
  return std::to_string(n) + " successful record" + (n == 1 ? "" : "s") +
         " measured on an emulated device (qemu) are not served as real timings; --emulated serves "
         "them";
}

tuning_db::RecordQuery query_of(const DbArgs& args) {
  tuning_db::RecordQuery query;
  query.device_key = args.device;
  query.include_emulated = args.emulated;
  return query;
}

void print_record(const Record& r) {
  std::cout << "workload   " << r.workload_key << "\n"
            << "target     " << r.target.target << "  (LLVM "
            << (r.target.llvm_version.empty() ? "?" : r.target.llvm_version) << ")\n"
            << "device     " << (r.device_key.empty() ? "-" : r.device_key) << "\n"
            << "config     #" << r.config_index << "  " << r.config.dump() << "\n"
            << "mean cost  " << format_cost(r.mean_cost()) << " over " << r.costs.size() << " runs";
  if (r.retimed_costs.empty() && r.gflops() > 0)
    std::cout << "  (" << std::fixed << std::setprecision(2) << r.gflops() << " GFLOP/s)";
  if (!r.retimed_costs.empty()) {
    std::cout << "\nre-timed   " << format_cost(r.cost()) << ", the median of "
              << r.retimed_costs.size() << " interleaved rounds";
    if (r.gflops() > 0)
      std::cout << "  (" << std::fixed << std::setprecision(2) << r.gflops() << " GFLOP/s)";
  }
  if (r.noisy())
    std::cout << "\nnoisy      yes: its timings spread "
              << static_cast<int>(
                     100 * tuning_db::spread(r.retimed_costs.empty() ? r.costs : r.retimed_costs))
              << "% (more than " << static_cast<int>(100 * tuning_db::kNoisySpread) << "%)";
  std::cout << "\nmeasured   " << format_time(r.timestamp) << " by tuner '" << r.tuner
            << "', batch " << r.batch << ", record id " << r.id << "\n";
  if (r.emulated)
    std::cout << "emulated   yes: timed on an emulated device, not the device's own timing\n";
}

void run_stats(const DbArgs& args) {
  Database db = open_to_read(args);
  tuning_db::Stats st = db.stats();
  auto summaries = db.summaries();
  if (args.json) {
    json j = {{"schema_version", st.schema_version},
              {"workloads", st.workloads},
              {"targets", st.targets},
              {"devices", st.devices},
              {"records", st.records},
              {"ok_records", st.ok_records},
              {"failed_records", st.failed_records},
              {"failures_by_kind", st.failures_by_kind},
              {"models", st.models},
              {"runs", st.runs},
              {"claims", st.claims},
              {"emulated_records", st.emulated_records},
              {"emulated_ok_records", st.emulated_ok_records},
              {"retimed_records", st.retimed_records},
              {"noisy_records", st.noisy_records},
              {"disputed_records", st.disputed_records}};
    j["per_workload"] = json::array();
    for (const auto& s : summaries) {
      j["per_workload"].push_back({{"workload", s.workload_key},
                                   {"template", s.template_name},
                                   {"target", s.target.target},
                                   {"llvm", s.target.llvm_version},
                                   {"records", s.records},
                                   {"ok_records", s.ok_records},
                                   {"best_cost", s.best_cost},
                                   {"best_gflops", s.best_gflops},
                                   {"emulated_records", s.emulated_records},
                                   {"emulated_ok_records", s.emulated_ok_records},
                                   {"emulated_best_cost", s.emulated_best_cost},
                                   {"emulated_best_gflops", s.emulated_best_gflops}});
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "tuning log " << args.path << " (schema version " << st.schema_version << ")\n"
            << "  records    " << st.records << " (" << st.ok_records << " ok, "
            << st.failed_records << " failed)\n";
  if (st.emulated_records > 0)
    std::cout << "  emulated   " << st.emulated_records << " of them (" << st.emulated_ok_records
              << " ok), timed on emulated devices: not served by best/build without --emulated\n";
  if (st.retimed_records > 0)
    std::cout << "  re-timed   " << st.retimed_records
              << " of the ok records (the figure is the median of interleaved rounds)\n";
  if (st.noisy_records > 0)
    std::cout << "  noisy      " << st.noisy_records
              << " of the ok records (timings spread more than "
              << static_cast<int>(100 * tuning_db::kNoisySpread) << "%)\n";
  if (st.disputed_records > 0)
    std::cout << "  disputed   " << st.disputed_records
              << " of the ok records (another device of the key timed them more than "
              << tuning_db::kDisputeFactor << "x away: not served by best/build)\n";
  for (const auto& [kind, n] : st.failures_by_kind) {
    std::cout << "    " << std::left << std::setw(16) << kind << n << "\n";
  }
  std::cout << "  workloads  " << st.workloads << "\n  targets    " << st.targets
            << "\n  devices    " << st.devices << "\n  cost models " << st.models
            << " (saved rankers of the xgb tuner)\n  runs       " << st.runs
            << " (one per workload a tune or tune-model tuned, and one per tune-model)\n";
  if (st.claims > 0)
    std::cout << "  claims     " << st.claims << " (configs being measured by running tunes)\n";
  if (summaries.empty()) return;
  size_t key_width = 10;  // the workload column fits the longest key, plus two spaces
  for (const auto& s : summaries) key_width = std::max(key_width, s.workload_key.size() + 2);
  const int kw = static_cast<int>(key_width);
  std::cout << "\n"
            << std::left << std::setw(kw) << "workload" << std::setw(10) << "records"
            << std::setw(8) << "ok" << std::setw(10) << "emulated" << std::setw(14) << "best"
            << "GFLOP/s   target\n";
  // records, ok: all records; emulated: how many of them were timed on emulated devices; best and
  // GFLOP/s: real records only, with the emulated best on a line of its own.
  auto gflops_text = [](double g) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(2) << g;
    return out.str();
  };
  for (const auto& s : summaries) {
    const bool real_ok = s.ok_records > s.emulated_ok_records;
    std::cout << std::left << std::setw(kw) << s.workload_key << std::setw(10) << s.records
              << std::setw(8) << s.ok_records << std::setw(10) << s.emulated_records
              << std::setw(14) << (real_ok ? format_cost(s.best_cost) : "-") << std::setw(10)
              << (real_ok ? gflops_text(s.best_gflops) : "-") << s.target.target << "\n";
    if (s.emulated_ok_records > 0)
      std::cout << std::setw(kw) << ""
                << "emulated best " << format_cost(s.emulated_best_cost) << ", "
                << gflops_text(s.emulated_best_gflops)
                << " GFLOP/s (served only with --emulated)\n";
  }
}

void run_best(const DbArgs& args) {
  Database db = open_to_read(args);
  TargetKey target = resolve_target(db, args);
  auto best = db.best(args.workload, target, query_of(args));
  if (!best) {
    const std::string note = emulated_note(db, args, target);
    throw Error(ErrorKind::kNotFound, "no successful record of '" + args.workload + "' on '" +
                                          target.target + "'" +
                                          (note.empty() ? "" : " (" + note + ")"));
  }
  if (best->emulated)
    spdlog::warn("record {} was timed on an emulated device, not the device itself", best->id);
  if (args.json) {
    std::cout << tuning_db::to_report_json(*best).dump(2) << "\n";
  } else {
    print_record(*best);
  }
}

void run_top(const DbArgs& args) {
  Database db = open_to_read(args);
  TargetKey target = resolve_target(db, args);
  auto top = db.top_k(args.workload, target, args.k, query_of(args));
  if (top.empty()) {
    if (const std::string note = emulated_note(db, args, target); !note.empty())
      spdlog::warn("{}", note);
  }
  if (args.json) {
    json j = json::array();
    for (const auto& r : top) j.push_back(tuning_db::to_report_json(r));
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << args.workload << " on " << target.target << ": " << top.size() << " best records\n"
            << std::left << std::setw(6) << "rank" << std::setw(14) << "config" << std::setw(14)
            << "mean cost" << std::setw(10) << "GFLOP/s"
            << "device\n";
  int rank = 1;
  for (const auto& r : top) {
    std::ostringstream gflops;
    gflops << std::fixed << std::setprecision(2) << r.gflops();
    std::cout << std::left << std::setw(6) << rank++ << std::setw(14) << r.config_index
              << std::setw(14) << format_cost(r.cost()) << std::setw(10) << gflops.str()
              << (r.device_key.empty() ? "-" : r.device_key) << (r.emulated ? "  (emulated)" : "")
              << (r.retimed_costs.empty() ? "" : "  (re-timed)") << (r.noisy() ? "  (noisy)" : "")
              << "\n";
  }
}

void run_export(const DbArgs& args) {
  if (args.server.server.empty() == args.path.empty())
    throw Error(ErrorKind::kInvalidArgument, "db export needs exactly one of --db and --server");
  if (args.best_only && !args.server.server.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "--best-only works with --db (export the server's log, then take its pack)");
  auto write = [&](std::ostream& out) {
    if (!args.server.server.empty())
      return rpc_runner::ServiceClient(args.server).export_log(out, args.workload);
    Database db = open_to_read(args);
    return args.best_only ? db.export_best_jsonl(out, args.workload)
                          : db.export_jsonl(out, args.workload);
  };
  int64_t n = 0;
  if (args.file.empty() || args.file == "-") {
    n = write(std::cout);
  } else {
    std::ofstream out(args.file);
    if (!out) throw Error(ErrorKind::kIo, "cannot write '" + args.file + "'");
    n = write(out);
  }
  spdlog::info("exported {} records", n);
}

void run_import(const DbArgs& args) {
  Database db = Database::open(args.path);
  tuning_db::ImportOptions options;
  options.batch_records = args.batch;
  // One line on stderr per committed batch but the last (whose counts the summary gives): a long
  // import shows it is moving and what it found.
  const auto start = std::chrono::steady_clock::now();
  options.on_progress = [&](const tuning_db::ImportReport& r) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << "import: " << r.lines << " lines, " << r.imported << " imported, "
              << r.already_present << " already in the log, " << r.errors.size() << " skipped ("
              << static_cast<int64_t>(s > 0 ? static_cast<double>(r.lines) / s : 0) << " lines/s)"
              << std::endl;
  };
  tuning_db::ImportReport report;
  if (args.file == "-") {
    report = db.import_jsonl(std::cin, options);
  } else {
    std::ifstream in(args.file);
    if (!in) throw Error(ErrorKind::kIo, "cannot read '" + args.file + "'");
    report = db.import_jsonl(in, options);
  }
  if (args.json) {
    json errors = json::array();
    for (const auto& e : report.errors) errors.push_back({{"line", e.line}, {"error", e.message}});
    std::cout << json{{"imported", report.imported},
                      {"already_present", report.already_present},
                      {"retimed", report.retimed},
                      {"rejected", report.rejected},
                      {"errors", errors}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "imported " << report.imported << " records from " << args.file;
    if (report.already_present > 0)
      std::cout << " (" << report.already_present << " already in the log)";
    if (report.retimed > 0)
      std::cout << "; " << report.retimed << " held already gained their re-timing";
    std::cout << "\n";
    for (const auto& e : report.errors) {
      std::cerr << args.file << ":" << e.line << ": " << e.message << "\n";
    }
  }
  if (!report.errors.empty()) {
    const int64_t malformed = static_cast<int64_t>(report.errors.size()) - report.rejected;
    throw Error(ErrorKind::kInvalidArgument, std::to_string(malformed) + " malformed lines and " +
                                                 std::to_string(report.rejected) +
                                                 " records that do not instantiate skipped (the " +
                                                 std::to_string(report.imported) +
                                                 " good ones were imported)");
  }
}

void run_check(const DbArgs& args) {
  Database db = open_to_read(args);
  tuning_db::CheckReport report = db.check();
  if (args.json) {
    std::cout << json{{"ok", report.ok()},
                      {"problems", report.problems},
                      {"invalid_records", report.invalid_records},
                      {"invalid_examples", report.invalid_examples}}
                     .dump(2)
              << "\n";
  } else if (report.ok()) {
    std::cout << args.path << ": ok (integrity, foreign keys, schema version "
              << db.stats().schema_version << ")\n";
  } else {
    for (const auto& p : report.problems) std::cout << args.path << ": " << p << "\n";
  }
  if (!report.ok()) {
    throw Error(ErrorKind::kDatabase, "check found " + std::to_string(report.problems.size()) +
                                          " problems in " + args.path);
  }
}

// db migrate: one log into another (SQLite <-> PostgreSQL), with counts of what was copied.
void run_migrate(const DbArgs& args) {
  Database from = open_to_read(args);
  Database to = Database::open(args.to);
  const tuning_db::CopyReport r = tuning_db::copy_log(from, to, args.append);
  if (args.json) {
    std::cout << json{{"records", r.records},
                      {"records_present", r.records_present},
                      {"records_retimed", r.records_retimed},
                      {"runs", r.runs},
                      {"runs_present", r.runs_present},
                      {"run_batches", r.run_batches},
                      {"models", r.models},
                      {"models_present", r.models_present},
                      {"jobs", r.jobs},
                      {"jobs_present", r.jobs_present},
                      {"step_threads", r.step_threads},
                      {"step_threads_present", r.step_threads_present}}
                     .dump(2)
              << "\n";
    return;
  }
  auto line = [](const char* what, int64_t added, int64_t present) {
    std::cout << "  " << std::left << std::setw(14) << what << added;
    if (present > 0) std::cout << " (" << present << " held already, not copied again)";
    std::cout << "\n";
  };
  std::cout << "copied " << from.path() << " into " << to.path() << "\n";
  line("records", r.records, r.records_present);
  if (r.records_retimed > 0)
    std::cout << "                " << r.records_retimed
              << " of those held gained the source's re-timing\n";
  line("runs", r.runs, r.runs_present);
  line("models", r.models, r.models_present);
  line("jobs", r.jobs, r.jobs_present);
  line("step threads", r.step_threads, r.step_threads_present);
}

// db remove-failed / remove-invalid: `what` names the removed records in the human output.
void run_remove(const DbArgs& args, int64_t (Database::*remove)(), const char* what) {
  Database db = open_existing(args);
  int64_t n = (db.*remove)();
  if (args.json) {
    std::cout << json{{"removed", n}}.dump() << "\n";
  } else {
    std::cout << "removed " << n << " " << what << "\n";
  }
}

void add_db_command(CLI::App& app) {
  auto args = std::make_shared<DbArgs>();
  CLI::App* db =
      app.add_subcommand("db", "Inspect and maintain a tuning log (SQLite or PostgreSQL)");
  db->require_subcommand(1);

  auto common = [&](CLI::App* sub) {
    sub->add_option("--db", args->path, "Tuning log: a file, or a postgresql:// URL")->required();
    sub->add_flag("--json", args->json, "Machine-readable output");
  };
  auto lookup = [&](CLI::App* sub) {
    sub->add_option("workload", args->workload,
                    "Workload key, e.g. 'matmul(M=1024,N=1024,K=1024,dtype=float32)'")
        ->required();
    sub->add_option("--target", args->target,
                    "Target string (default: the only one the workload was measured on)");
    sub->add_option("--llvm", args->llvm, "LLVM version of the records (default: any)");
    sub->add_option("--device", args->device, "Device key (default: any)");
    sub->add_flag(
        "--emulated", args->emulated,
        "Also serve records timed on emulated devices (qemu); they compete with real ones by cost");
  };

  add_db_revalidate(db);

  CLI::App* stats = db->add_subcommand("stats", "Counts, failures by kind, best per workload");
  common(stats);
  stats->callback([args] { run_stats(*args); });

  CLI::App* best = db->add_subcommand("best", "The best successful record of a workload");
  common(best);
  lookup(best);
  best->callback([args] { run_best(*args); });

  CLI::App* top = db->add_subcommand("top", "The k best successful records of a workload");
  common(top);
  lookup(top);
  top->add_option("-k,--k", args->k, "How many")->check(CLI::PositiveNumber);
  top->callback([args] { run_top(*args); });

  CLI::App* exp = db->add_subcommand("export", "Write records as JSON lines (AutoTVM-like)");
  exp->add_option("--db", args->path, "Tuning log file");
  exp->add_flag("--json", args->json, "Machine-readable output");
  add_client_flags(exp, args->server, false)
      ->description("Stream the log of this tuning server (HOST:PORT) instead");
  exp->add_option("--out", args->file, "Output file (default: stdout)");
  exp->add_option("--workload", args->workload, "Only this workload");
  exp->add_flag("--best-only", args->best_only,
                "A pack: only the best record of each workload and target (`db import` merges it "
                "without duplicates)");
  exp->callback([args] { run_export(*args); });

  CLI::App* imp = db->add_subcommand(
      "import",
      "Add records from JSON lines; malformed lines and records that do not instantiate are "
      "reported and skipped");
  common(imp);
  imp->add_option("file", args->file, "JSON-lines file, or - for stdin")->required();
  imp->add_option("--batch", args->batch,
                  "Records per committed transaction; a progress line follows each")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}));
  imp->callback([args] { run_import(*args); });

  CLI::App* check = db->add_subcommand(
      "check", "Integrity, foreign-key and schema checks, and records that do not instantiate");
  common(check);
  check->callback([args] { run_check(*args); });

  CLI::App* migrate = db->add_subcommand(
      "migrate",
      "Copy a log into another (a SQLite path or a postgresql:// URL, either way): records with "
      "their re-timings, runs, models, jobs");
  migrate->add_option("--from", args->path, "The log to copy (only read)")->required();
  migrate->add_option("--to", args->to, "The log to copy into (a SQLite file is created)")
      ->required();
  migrate->add_flag("--append", args->append,
                    "Add to a target that is not empty; what it holds already (the same "
                    "measurement, run, model or job) is kept and not copied again");
  migrate->add_flag("--json", args->json, "Machine-readable output");
  migrate->callback([args] { run_migrate(*args); });

  CLI::App* rm = db->add_subcommand("remove-failed", "Delete every failed record");
  common(rm);
  rm->callback([args] { run_remove(*args, &Database::remove_failed, "failed records"); });

  CLI::App* rm_invalid = db->add_subcommand(
      "remove-invalid",
      "Delete every record this ktune cannot instantiate (unknown template, bad config, ...)");
  common(rm_invalid);
  rm_invalid->callback(
      [args] { run_remove(*args, &Database::remove_invalid, "records that do not instantiate"); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(db, add_db_command);

}  // namespace ktune::tools
