// copy_log: a tuning log into another, table by table, run ids mapped to the target's.
#include "tuning_db/log_copy.h"

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "support/error.h"
#include "tuning_db/database_impl.h"

namespace ktune::tuning_db {
namespace {

// Records per write transaction of the target (and per read of the source).
constexpr int64_t kChunk = 2000;

bool same_log(const std::string& a, const std::string& b) {
  if (sql::is_postgres_url(a) || sql::is_postgres_url(b)) return a == b;
  std::error_code ec;
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
}

// What the target holds of what copy_log writes, for the refusal of a non-empty target.
std::string contents(sql::Connection& conn) {
  std::string out;
  for (const char* table : {"records", "runs", "models", "jobs", "step_threads"}) {
    const int64_t n = conn.query_int(std::string("SELECT count(*) FROM ") + table);
    if (n > 0) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + table;
  }
  return out;
}

std::optional<double> optional_double(const sql::Statement& s, int column) {
  if (s.is_null(column)) return std::nullopt;
  return s.column_double(column);
}

void bind_optional(sql::Statement& s, int index, std::optional<double> value) {
  if (value)
    s.bind(index, *value);
  else
    s.bind_null(index);
}

}  // namespace

CopyReport copy_log(Database& from, Database& to, bool append) {
  Database::Impl& src = *from.impl_;
  Database::Impl& dst = *to.impl_;
  if (same_log(from.path(), to.path()))
    throw Error(ErrorKind::kInvalidArgument,
                "cannot copy tuning log '" + from.path() + "' into itself");
  if (!append) {
    if (const std::string held = contents(dst.conn); !held.empty())
      throw Error(ErrorKind::kInvalidArgument, "tuning log '" + to.path() + "' is not empty (" +
                                                   held +
                                                   "): give --append to add to what it holds");
  }
  CopyReport report;
  // One snapshot of the source throughout.
  sql::Transaction snapshot(src.conn, sql::Transaction::Mode::kDeferred);
  const double now = now_seconds();

  // Runs first: records, batches and jobs name them by the target's ids.
  std::map<int64_t, int64_t> runs;  // source id -> target id
  {
    sql::Transaction txn(dst.conn);
    for (auto s = src.use(
             "SELECT id, tuner, workload_key, target, options, started_at, finished_at FROM runs "
             "ORDER BY id");
         s->step();) {
      const std::string tuner = s->column_text(1), workload = s->column_text(2),
                        target = s->column_text(3);
      const double started_at = s->column_double(5);
      if (append) {
        auto held = dst.use(
            "SELECT id FROM runs WHERE tuner = ?1 AND workload_key = ?2 AND target = ?3 AND "
            "started_at = ?4 ORDER BY id LIMIT 1");
        held->bind(1, tuner).bind(2, workload).bind(3, target).bind(4, started_at);
        if (held->step()) {
          runs[s->column_int(0)] = held->column_int(0);
          ++report.runs_present;
          continue;
        }
      }
      auto add = dst.use(
          "INSERT INTO runs(tuner, workload_key, target, options, started_at, finished_at) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
      add->bind(1, tuner).bind(2, workload).bind(3, target).bind(4, s->column_text(4));
      add->bind(5, started_at);
      bind_optional(*add, 6, optional_double(*s, 6));
      add->run();
      runs[s->column_int(0)] = dst.conn.last_insert_rowid();
      ++report.runs;
    }
    auto b = src.use(
        "SELECT run_id, batch, n_records, rank_correlation, recorded_at FROM run_batches "
        "ORDER BY run_id, batch");
    while (b->step()) {
      const auto run = runs.find(b->column_int(0));
      if (run == runs.end()) continue;
      auto add = dst.use(
          "INSERT INTO run_batches(run_id, batch, n_records, rank_correlation, recorded_at) "
          "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(run_id, batch) DO NOTHING");
      add->bind(1, run->second).bind(2, b->column_int(1)).bind(3, b->column_int(2));
      bind_optional(*add, 4, optional_double(*b, 3));
      add->bind(5, b->column_double(4));
      add->run();
      report.run_batches += dst.conn.changes();
    }
    txn.commit();
  }
  auto run_of = [&runs](int64_t id) {
    const auto it = runs.find(id);
    return it == runs.end() ? int64_t{0} : it->second;
  };

  // Records, in chunks by id: neither side holds the whole log at once.
  for (int64_t after = 0;;) {
    std::vector<Record> chunk;
    {
      auto s = src.use(std::string(kRecordColumns) + "AND r.id > ?1 ORDER BY r.id LIMIT ?2");
      s->bind(1, after).bind(2, kChunk);
      while (s->step()) chunk.push_back(Database::Impl::read_record(*s));
    }
    if (chunk.empty()) break;
    after = chunk.back().id;
    sql::Transaction txn(dst.conn);
    dst.begin_batch();
    for (Record& r : chunk) {
      r.run_id = run_of(r.run_id);
      switch (dst.merge(r, now, /*check=*/false)) {
        case Database::Impl::Merged::kAdded:
          ++report.records;
          break;
        case Database::Impl::Merged::kRetimed:
          ++report.records_retimed;
          [[fallthrough]];
        default:
          ++report.records_present;
      }
    }
    txn.commit();
  }

  // Saved models; the target's stays where it has one of the same name, scope and target.
  {
    sql::Transaction txn(dst.conn);
    dst.begin_batch();
    auto s = src.use(
        "SELECT m.name, m.scope, t.target, t.llvm_version, m.blob, m.metadata, m.created_at "
        "FROM models m JOIN targets t ON t.id = m.target_id ORDER BY m.id");
    while (s->step()) {
      const int64_t target = dst.ensure_target({s->column_text(2), s->column_text(3)});
      const std::vector<uint8_t> blob = s->column_blob(4);
      auto add = dst.use(
          "INSERT INTO models(name, scope, target_id, blob, metadata, created_at) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(name, scope, target_id) DO NOTHING");
      add->bind(1, s->column_text(0)).bind(2, s->column_text(1)).bind(3, target);
      add->bind_blob(4, blob).bind(5, s->column_text(5)).bind(6, s->column_double(6));
      add->run();
      (dst.conn.changes() > 0 ? report.models : report.models_present) += 1;
    }
    txn.commit();
  }

  // Jobs, as they stand: a server on the target resumes the unfinished ones.
  if (src.conn.driver().has_object("table", "jobs")) {
    sql::Transaction txn(dst.conn);
    auto s = src.use(
        std::string("SELECT spec, device_key, priority, owner, state, run_id, target, message, "
                    "summary, created_at, updated_at, finished_at, ") +
        (src.has_tenants ? "client" : "''") + " FROM jobs ORDER BY id");
    while (s->step()) {
      const std::string spec = s->column_text(0);
      const double created_at = s->column_double(9);
      if (append) {
        auto held = dst.use("SELECT 1 FROM jobs WHERE spec = ?1 AND created_at = ?2 LIMIT 1");
        held->bind(1, spec).bind(2, created_at);
        if (held->step()) {
          ++report.jobs_present;
          continue;
        }
      }
      auto add = dst.use(
          "INSERT INTO jobs(spec, device_key, priority, owner, state, run_id, target, message, "
          "summary, created_at, updated_at, finished_at, client) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
      add->bind(1, spec).bind(2, s->column_text(1)).bind(3, s->column_int(2));
      add->bind(4, s->column_text(3)).bind(5, s->column_text(4));
      if (const int64_t run = s->is_null(5) ? 0 : run_of(s->column_int(5)); run != 0)
        add->bind(6, run);
      else
        add->bind_null(6);
      add->bind(7, s->column_text(6)).bind(8, s->column_text(7)).bind(9, s->column_text(8));
      add->bind(10, created_at).bind(11, s->column_double(10));
      bind_optional(*add, 12, optional_double(*s, 11));
      add->bind(13, s->column_text(12));
      add->run();
      ++report.jobs;
    }
    txn.commit();
  }

  // Step thread choices, with the time they were measured; the target's stays where it has one of
  // the same model, target and thread count. A source of a schema before the table has none.
  if (src.conn.driver().has_object("table", "step_threads")) {
    sql::Transaction txn(dst.conn);
    auto s = src.use(
        "SELECT model_key, target, threads, steps, uncapped_s, capped_s, measured_at "
        "FROM step_threads ORDER BY model_key, target, threads");
    while (s->step()) {
      auto add = dst.use(
          "INSERT INTO step_threads(model_key, target, threads, steps, uncapped_s, capped_s, "
          "measured_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
          "ON CONFLICT(model_key, target, threads) DO NOTHING");
      add->bind(1, s->column_text(0)).bind(2, s->column_text(1)).bind(3, s->column_int(2));
      add->bind(4, s->column_text(3)).bind(5, s->column_double(4)).bind(6, s->column_double(5));
      add->bind(7, s->column_double(6));
      add->run();
      (dst.conn.changes() > 0 ? report.step_threads : report.step_threads_present) += 1;
    }
    txn.commit();
  }
  snapshot.commit();
  return report;
}

}  // namespace ktune::tuning_db
