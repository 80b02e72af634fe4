// RunStore: tuning runs and the model quality of each of their batches.
#include "tuning_db/run_store.h"

#include "support/error.h"
#include "tuning_db/database_impl.h"

namespace ktune::tuning_db {

using nlohmann::json;

RunStore::RunStore(Database& db) : impl_(*db.impl_) {}

int64_t RunStore::begin(const RunInfo& run) {
  // One transaction, so that the id read is the row's even when a lost connection runs it again.
  // A commit cut by the loss may have stored the run: the run again finds it by what it wrote
  // (the start time is read once, outside) instead of storing a second one.
  const std::string options = run.options.dump();
  const double started_at = now_seconds();
  return sql::with_transaction(impl_.conn, sql::TransactionMode::kImmediate, [&](bool again) {
    if (again) {
      auto s = impl_.use(
          "SELECT id FROM runs WHERE tuner = ?1 AND workload_key = ?2 AND target = ?3 AND "
          "options = ?4 AND started_at = ?5 ORDER BY id DESC LIMIT 1");
      s->bind(1, run.tuner).bind(2, run.workload_key).bind(3, run.target);
      s->bind(4, options).bind(5, started_at);
      if (s->step()) return s->column_int(0);
    }
    auto s = impl_.use(
        "INSERT INTO runs(tuner, workload_key, target, options, started_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5)");
    s->bind(1, run.tuner).bind(2, run.workload_key).bind(3, run.target);
    s->bind(4, options).bind(5, started_at);
    s->run();
    return impl_.conn.last_insert_rowid();
  });
}

void RunStore::finish(int64_t run_id) {
  auto s = impl_.use("UPDATE runs SET finished_at = ?2 WHERE id = ?1");
  s->bind(1, run_id).bind(2, now_seconds());
  s->run();
  if (impl_.conn.changes() == 0) {
    throw Error(ErrorKind::kNotFound, "no tuning run " + std::to_string(run_id));
  }
}

void RunStore::add_batch_quality(int64_t run_id, const BatchQuality& quality) {
  sql::with_transaction(impl_.conn, sql::TransactionMode::kImmediate, [&](bool) {
    {
      auto s = impl_.use("SELECT 1 FROM runs WHERE id = ?1");
      s->bind(1, run_id);
      if (!s->step()) throw Error(ErrorKind::kNotFound, "no tuning run " + std::to_string(run_id));
    }
    auto s = impl_.use(
        "INSERT INTO run_batches(run_id, batch, n_records, rank_correlation, recorded_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(run_id, batch) DO UPDATE SET "
        "n_records = excluded.n_records, rank_correlation = excluded.rank_correlation, "
        "recorded_at = excluded.recorded_at");
    s->bind(1, run_id).bind(2, quality.batch).bind(3, quality.records);
    if (quality.rank_correlation) {
      s->bind(4, *quality.rank_correlation);
    } else {
      s->bind_null(4);
    }
    s->bind(5, now_seconds());
    s->run();
  });
}

std::vector<BatchQuality> RunStore::batch_quality(int64_t run_id) {
  std::vector<BatchQuality> out;
  auto s = impl_.use(
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

std::vector<RunRow> RunStore::all() {
  std::vector<RunRow> out;
  auto s = impl_.use(
      "SELECT id, tuner, workload_key, target, options, started_at, finished_at FROM runs ORDER BY "
      "id");
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

int64_t RunStore::count_records(int64_t run_id) {
  auto s = impl_.use("SELECT count(*) FROM records WHERE run_id = ?1");
  s->bind(1, run_id);
  s->step();
  return s->column_int(0);
}

}  // namespace ktune::tuning_db
