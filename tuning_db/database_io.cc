// Database: JSON-lines import/export, saved cost models, tuning runs, and the integrity check.
#include <istream>
#include <ostream>
#include <set>
#include <string>

#include "support/error.h"
#include "tuning_db/database.h"
#include "tuning_db/database_impl.h"
#include "tuning_db/schema.h"

namespace ktune::tuning_db {

using nlohmann::json;

int64_t Database::export_jsonl(std::ostream& out, std::string_view workload_key) {
  int64_t lines = 0;
  std::optional<int64_t> workload;
  if (!workload_key.empty()) {
    workload = impl_->workload_id(workload_key);
    if (!workload) return 0;
  }
  sql::Transaction snapshot(impl_->conn, sql::Transaction::Mode::kDeferred);
  {
    auto s = impl_->use(std::string(kRecordColumns) +
                        "AND (?1 = 0 OR r.workload_id = ?1) ORDER BY r.id");
    s->bind(1, workload.value_or(0));
    while (s->step()) {
      out << to_json_line(Impl::read_record(*s)) << '\n';
      if (!out) throw Error(ErrorKind::kIo, "writing the JSON-lines export failed");
      ++lines;
    }
  }
  snapshot.commit();
  out.flush();
  if (!out) throw Error(ErrorKind::kIo, "writing the JSON-lines export failed");
  return lines;
}

int64_t Database::export_best_jsonl(std::ostream& out, std::string_view workload_key) {
  int64_t lines = 0;
  std::set<std::pair<std::string, std::string>> done;  // (workload, target): any LLVM version
  for (const WorkloadSummary& s : summaries()) {
    if (!workload_key.empty() && s.workload_key != workload_key) continue;
    if (!done.insert({s.workload_key, s.target.target}).second) continue;
    const std::optional<Record> best = this->best(s.workload_key, TargetKey{s.target.target, ""}, RecordQuery{});
    if (!best) continue;
    out << to_json_line(*best) << '\n';
    if (!out) throw Error(ErrorKind::kIo, "writing the JSON-lines export failed");
    ++lines;
  }
  out.flush();
  if (!out) throw Error(ErrorKind::kIo, "writing the JSON-lines export failed");
  return lines;
}

ImportReport Database::import_jsonl(std::istream& in) {
  ImportReport report;
  double created_at = now_seconds();
  // One transaction for the whole file: a crash or SQLite error leaves no partial import.
  sql::Transaction txn(impl_->conn);
  impl_->begin_batch();
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      Record record = from_json_line(line);
      validate(record);
      if (std::string why = impl_->problem(record); !why.empty()) {
        ++report.rejected;
        report.errors.push_back({number, "record does not instantiate: " + why});
        continue;
      }
      if (impl_->holds(record)) {
        ++report.already_present;
        continue;
      }
      // insert() checks the workload's template before it writes anything for this record.
      impl_->insert(record, created_at);
      ++report.imported;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInvalidArgument) throw;
      report.errors.push_back({number, e.what()});
    } catch (const nlohmann::json::exception& e) {
      // A value the record's fields cannot hold (an integer beyond 64 bits, ...): that line only.
      report.errors.push_back({number, std::string("bad record: ") + e.what()});
    }
  }
  if (in.bad()) throw Error(ErrorKind::kIo, "reading the JSON-lines import failed");
  txn.commit();
  return report;
}

void Database::save_model(const ModelInfo& info, std::span<const uint8_t> blob) {
  if (info.name.empty() || info.scope.empty() || info.target.target.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "a saved model needs a name, a scope and a target");
  }
  sql::Transaction txn(impl_->conn);
  int64_t target = impl_->ensure_target(info.target);
  auto s = impl_->use(
      "INSERT INTO models(name, scope, target_id, blob, metadata, created_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(name, scope, target_id) DO UPDATE SET "
      "blob = excluded.blob, metadata = excluded.metadata, created_at = excluded.created_at");
  s->bind(1, info.name).bind(2, info.scope).bind(3, target).bind_blob(4, blob);
  s->bind(5, info.metadata.dump()).bind(6, now_seconds());
  s->run();
  txn.commit();
}

std::optional<SavedModel> Database::load_model(std::string_view name, std::string_view scope,
                                               const TargetKey& target) {
  auto s = impl_->use(
      "SELECT m.name, m.scope, t.target, t.llvm_version, m.blob, m.metadata, m.created_at "
      "FROM models m JOIN targets t ON t.id = m.target_id "
      "WHERE m.name = ?1 AND m.scope = ?2 AND t.target = ?3 AND (?4 = '' OR t.llvm_version = ?4) "
      "ORDER BY m.created_at DESC, m.id DESC LIMIT 1");
  s->bind(1, name).bind(2, scope).bind(3, target.target).bind(4, target.llvm_version);
  if (!s->step()) return std::nullopt;
  SavedModel model;
  model.info.name = s->column_text(0);
  model.info.scope = s->column_text(1);
  model.info.target = {s->column_text(2), s->column_text(3)};
  model.blob = s->column_blob(4);
  model.info.metadata = json::parse(s->column_text(5));
  model.info.created_at = s->column_double(6);
  return model;
}

int64_t Database::begin_run(const RunInfo& run) {
  auto s = impl_->use(
      "INSERT INTO runs(tuner, workload_key, target, options, started_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5)");
  s->bind(1, run.tuner).bind(2, run.workload_key).bind(3, run.target);
  s->bind(4, run.options.dump()).bind(5, now_seconds());
  s->run();
  return impl_->conn.last_insert_rowid();
}

void Database::finish_run(int64_t run_id) {
  auto s = impl_->use("UPDATE runs SET finished_at = ?2 WHERE id = ?1");
  s->bind(1, run_id).bind(2, now_seconds());
  s->run();
  if (impl_->conn.changes() == 0) {
    throw Error(ErrorKind::kNotFound, "no tuning run " + std::to_string(run_id));
  }
}

void Database::add_batch_quality(int64_t run_id, const BatchQuality& quality) {
  sql::Transaction txn(impl_->conn);
  {
    auto s = impl_->use("SELECT 1 FROM runs WHERE id = ?1");
    s->bind(1, run_id);
    if (!s->step()) throw Error(ErrorKind::kNotFound, "no tuning run " + std::to_string(run_id));
  }
  auto s = impl_->use(
      "INSERT OR REPLACE INTO run_batches(run_id, batch, n_records, rank_correlation, "
      "recorded_at) VALUES (?1, ?2, ?3, ?4, ?5)");
  s->bind(1, run_id).bind(2, quality.batch).bind(3, quality.records);
  if (quality.rank_correlation) {
    s->bind(4, *quality.rank_correlation);
  } else {
    s->bind_null(4);
  }
  s->bind(5, now_seconds());
  s->run();
  txn.commit();
}

std::vector<BatchQuality> Database::batch_quality(int64_t run_id) {
  std::vector<BatchQuality> out;
  auto s = impl_->use(
      "SELECT batch, n_records, rank_correlation FROM run_batches WHERE run_id = ?1 "
      "ORDER BY batch");
  s->bind(1, run_id);
  while (s->step()) {
    BatchQuality q;
    q.batch = s->column_int(0);
    q.records = s->column_int(1);
    if (!s->is_null(2)) q.rank_correlation = s->column_double(2);
    out.push_back(q);
  }
  return out;
}

std::vector<RunRow> Database::runs() {
  std::vector<RunRow> out;
  auto s = impl_->use("SELECT id, tuner, workload_key, target, options, started_at, finished_at FROM runs ORDER BY id");
  while (s->step()) {
    RunRow r;
    r.id = s->column_int(0);
    r.info.tuner = s->column_text(1);
    r.info.workload_key = s->column_text(2);
    r.info.target = s->column_text(3);
    r.info.options = json::parse(s->column_text(4), nullptr, false);
    if (r.info.options.is_discarded()) r.info.options = json::object();
    r.started_at = s->column_double(5);
    if (!s->is_null(6)) r.finished_at = s->column_double(6);
    out.push_back(std::move(r));
  }
  return out;
}

CheckReport Database::check() {
  CheckReport report;
  {
    sql::Statement s(impl_->conn, "PRAGMA integrity_check");
    while (s.step()) {
      std::string row = s.column_text(0);
      if (row != "ok") report.problems.push_back("integrity: " + row);
    }
  }
  {
    sql::Statement s(impl_->conn, "PRAGMA foreign_key_check");
    while (s.step()) {
      report.problems.push_back("foreign key: row " + std::to_string(s.column_int(1)) +
                                " of table " + s.column_text(0) + " references a missing " +
                                s.column_text(2));
    }
  }
  for (std::string& problem : check_schema(impl_->conn)) {
    report.problems.push_back("schema: " + problem);
  }
  constexpr size_t kExamples = 5;
  for (const auto& [r, why] : impl_->invalid_records()) {
    ++report.invalid_records;
    if (report.invalid_examples.size() < kExamples)
      report.invalid_examples.push_back("record " + std::to_string(r.id) + " (" + r.workload_key + ", config " +
                                        std::to_string(r.config_index) + "): " + why);
  }
  if (report.invalid_records > 0) {
    report.problems.push_back(std::to_string(report.invalid_records) +
                              " records do not instantiate with this ktune (never served as the best; "
                              "`ktune db remove-invalid` deletes them)");
    for (const auto& example : report.invalid_examples) report.problems.push_back("  " + example);
  }
  return report;
}

}  // namespace ktune::tuning_db
