// Database: JSON-lines import/export and the integrity check.
#include <istream>
#include <optional>
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
  // In chunks by id, from one snapshot: a driver that fetches a statement's rows at once
  // (PostgreSQL's) holds one chunk in memory, not the log.
  constexpr int64_t kChunk = 5000;
  for (int64_t after = 0, in_chunk = kChunk; in_chunk == kChunk;) {
    auto s = impl_->use(std::string(kRecordColumns) +
                        "AND (?1 = 0 OR r.workload_id = ?1) AND r.id > ?2 ORDER BY r.id LIMIT ?3");
    s->bind(1, workload.value_or(0)).bind(2, after).bind(3, kChunk);
    for (in_chunk = 0; s->step(); ++in_chunk) {
      const Record r = Impl::read_record(*s);
      after = r.id;
      out << to_json_line(r) << '\n';
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
    const std::optional<Record> best =
        this->best(s.workload_key, TargetKey{s.target.target, ""}, RecordQuery{});
    if (!best) continue;
    out << to_json_line(*best) << '\n';
    if (!out) throw Error(ErrorKind::kIo, "writing the JSON-lines export failed");
    ++lines;
  }
  out.flush();
  if (!out) throw Error(ErrorKind::kIo, "writing the JSON-lines export failed");
  return lines;
}

ImportReport Database::import_jsonl(std::istream& in, const ImportOptions& options) {
  if (options.batch_records < 1)
    throw Error(ErrorKind::kInvalidArgument, "an import batch needs at least one record");
  ImportReport report;
  const double created_at = now_seconds();
  std::optional<sql::Transaction> txn;
  int64_t in_batch = 0;  // records taken (added or not) in the open transaction
  // The last batch's counts are the returned report's: progress is for the batches before.
  auto commit = [&](bool last) {
    if (!txn) return;
    txn->commit();
    txn.reset();
    ++report.batches;
    in_batch = 0;
    if (!last && options.on_progress) options.on_progress(report);
  };
  std::string line;
  while (std::getline(in, line)) {
    const int64_t number = ++report.lines;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!txn) {
      txn.emplace(impl_->conn);
      impl_->begin_batch();
    }
    ++in_batch;
    try {
      Record record = from_json_line(line);
      validate(record);
      std::string why;
      switch (impl_->merge(record, created_at, /*check=*/true, &why)) {
        case Impl::Merged::kAdded:
          ++report.imported;
          break;
        case Impl::Merged::kRetimed:
          // The same measurement, whose re-timing came along (a pack from a server that
          // re-timed it).
          ++report.retimed;
          break;
        case Impl::Merged::kPresent:
          ++report.already_present;
          break;
        case Impl::Merged::kRejected:
          ++report.rejected;
          report.errors.push_back({number, "record does not instantiate: " + why});
          break;
      }
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInvalidArgument) throw;
      report.errors.push_back({number, e.what()});
    } catch (const nlohmann::json::exception& e) {
      // A value the record's fields cannot hold (an integer beyond 64 bits, ...): that line only.
      report.errors.push_back({number, std::string("bad record: ") + e.what()});
    }
    if (in_batch >= options.batch_records) commit(false);
  }
  if (in.bad()) throw Error(ErrorKind::kIo, "reading the JSON-lines import failed");
  commit(true);
  return report;
}

CheckReport Database::check() {
  CheckReport report;
  report.problems = impl_->conn.driver().integrity_problems();
  for (std::string& problem : check_schema(impl_->conn)) {
    report.problems.push_back("schema: " + problem);
  }
  constexpr size_t kExamples = 5;
  for (const auto& [r, why] : impl_->invalid_records()) {
    ++report.invalid_records;
    if (report.invalid_examples.size() < kExamples)
      report.invalid_examples.push_back("record " + std::to_string(r.id) + " (" + r.workload_key +
                                        ", config " + std::to_string(r.config_index) + "): " + why);
  }
  if (report.invalid_records > 0) {
    report.problems.push_back(
        std::to_string(report.invalid_records) +
        " records do not instantiate with this ktune (never served as the best; "
        "`ktune db remove-invalid` deletes them)");
    for (const auto& example : report.invalid_examples) report.problems.push_back("  " + example);
  }
  return report;
}

}  // namespace ktune::tuning_db
