// `ktune report --db PATH | --server HOST:PORT -o report.html`: one self-contained HTML page of a
// tuning log (tuning_db::build_report rendered by render_report_html).
#include <stdlib.h>

#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/spdlog.h>

#include "deploy/output_files.h"
#include "rpc_runner/client/service_client.h"
#include "support/error.h"
#include "tools/commands.h"
#include "tools/report_html.h"
#include "tools/service_flags.h"
#include "tuning_db/database.h"
#include "tuning_db/report.h"

namespace ktune::tools {
namespace {

struct ReportOptions {
  std::string db;
  rpc_runner::ServiceClientOptions server;
  std::string out = "report.html";
  int64_t top = 5;
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// The server's log streamed (as JSON lines: records only, no runs or models) into a local log.
tuning_db::Report server_report(const ReportOptions& o, const tuning_db::ReportOptions& options) {
  std::stringstream lines;
  rpc_runner::ServiceClient(o.server).export_log(lines);
  std::string dir = (std::filesystem::temp_directory_path() / "ktune-report-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr)
    throw Error(ErrorKind::kIo, "cannot make a temporary directory for the server's log");
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  auto db = tuning_db::Database::open(dir + "/server.db");
  const tuning_db::ImportReport imported = db.import_jsonl(lines);
  if (!imported.errors.empty())
    spdlog::warn("{} records of the server's log were skipped (first: line {}: {})",
                 imported.errors.size(), imported.errors.front().line,
                 imported.errors.front().message);
  tuning_db::Report report = tuning_db::build_report(db, options);
  report.log = "server " + o.server.server;
  report.records_only = true;
  return report;
}

void run_report(const ReportOptions& o) {
  if (o.db.empty() == o.server.server.empty())
    throw Error(ErrorKind::kInvalidArgument, "report needs exactly one of --db and --server");
  tuning_db::ReportOptions options;
  options.top_k = o.top;
  tuning_db::Report report;
  if (o.server.server.empty()) {
    tuning_db::OpenOptions open;
    open.read_only =
        true;  // a report never writes the log (and works on one the user may only read)
    auto db = tuning_db::Database::open(o.db, open);
    report = tuning_db::build_report(db, options);
  } else {
    report = server_report(o, options);
  }
  deploy::write_files_atomically({{o.out, render_report_html(report, utc_now())}});
  // A best whose timings spread is worth a look before it ships: named here too, not only in the
  // page.
  for (const auto& w : report.workloads)
    if (w.best_noisy)
      std::cout << "noisy best: " << w.workload_key << " on " << w.target.target
                << (w.emulated ? " (emulated)" : "") << ": its timings spread more than "
                << static_cast<int>(100 * tuning_db::kNoisySpread) << "%"
                << (w.best_retimed ? " (re-timed)" : "") << "\n";
  spdlog::info(
      "wrote {} ({} workloads, {} xgb runs with their cost model's rank correlation, {} "
      "model runs)",
      o.out, report.workloads.size(), report.runs.size(), report.model_runs.size());
}

void add_report(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand("report",
                                 "Write one self-contained HTML page of a tuning log (curves, "
                                 "errors, top configs, model runs)");
  cmd->add_option("--db", o->db, "Tuning log (SQLite file or postgresql:// URL), read only");
  add_client_flags(cmd, o->server, false)
      ->description("Report on this tuning server's log (HOST:PORT) instead of --db");
  cmd->add_option("-o,--out", o->out,
                  "The HTML file to write (replaced whole, or left as it was on failure)")
      ->capture_default_str();
  cmd->add_option("--top", o->top, "Top configs per workload (0 to 100)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  cmd->callback([o] { run_report(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(report, add_report);

}  // namespace ktune::tools
