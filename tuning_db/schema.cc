// The tuning log's schema: version 1 (the log itself), version 2 (tuning-run telemetry),
// version 3 (the tuning server's jobs), version 4 (claims of configs being measured),
// version 5 (records and claims of emulated devices told apart), version 6 (tenants: the
// client of every job and record, the worker of every record), version 7 (records
// re-timed, and the flag of a noisy timing), version 8 (per-step thread counts of built
// models) and version 9 (records another device disagreed with).
#include "tuning_db/schema.h"

#include <spdlog/spdlog.h>

#include <array>
#include <string_view>

#include "support/error.h"
#include "tuning_db/record.h"

namespace ktune::tuning_db {
namespace {

// Migration i brings a file from version i to version i + 1. Never edit a released step:
// add a new one and raise kSchemaVersion.
// records.error_kind is '' for a success, else to_string(ErrorKind) ("run_timeout", ...);
// mean_cost is NULL for a failure. records_best is partial (successes only) and ordered by
// cost, so best/top-k is one index descent; records_by_config serves has()/resume.
// Times are unix seconds (REAL); costs is a JSON array of seconds; config and args are JSON.
constexpr std::array<std::string_view, kSchemaVersion> kMigrations = {
    // 0 -> 1: workloads, targets, devices, records, cost models.
    R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta(key, value) VALUES ('format', 'ktune tuning log');
CREATE TABLE workloads(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  template TEXT NOT NULL,
  args TEXT NOT NULL,
  flop REAL NOT NULL DEFAULT 0);
CREATE INDEX workloads_by_template ON workloads(template);
CREATE TABLE targets(
  id INTEGER PRIMARY KEY,
  target TEXT NOT NULL,
  llvm_version TEXT NOT NULL,
  UNIQUE(target, llvm_version));
CREATE TABLE devices(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '');
CREATE TABLE records(
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  target_id INTEGER NOT NULL REFERENCES targets(id),
  device_id INTEGER NOT NULL REFERENCES devices(id),
  config_index INTEGER NOT NULL,
  config TEXT NOT NULL,
  costs TEXT NOT NULL,
  mean_cost REAL,
  gflops REAL NOT NULL DEFAULT 0,
  all_cost REAL NOT NULL DEFAULT 0,
  error_kind TEXT NOT NULL DEFAULT '',
  error_msg TEXT NOT NULL DEFAULT '',
  tuner TEXT NOT NULL DEFAULT '',
  batch INTEGER NOT NULL DEFAULT 0,
  measured_at REAL NOT NULL DEFAULT 0,
  created_at REAL NOT NULL,
  ktune_version TEXT NOT NULL DEFAULT '');
CREATE INDEX records_best ON records(workload_id, target_id, mean_cost) WHERE error_kind = '';
CREATE INDEX records_by_config ON records(workload_id, target_id, config_index);
CREATE TABLE models(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  scope TEXT NOT NULL,
  target_id INTEGER NOT NULL REFERENCES targets(id),
  blob BLOB NOT NULL,
  metadata TEXT NOT NULL,
  created_at REAL NOT NULL,
  UNIQUE(name, scope, target_id));
)sql",
    // 1 -> 2: tuning runs and per-batch model quality (rank correlation of predicted vs
    // measured), and the run a record belongs to.
    R"sql(
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  tuner TEXT NOT NULL,
  workload_key TEXT NOT NULL,
  target TEXT NOT NULL,
  options TEXT NOT NULL DEFAULT '{}',
  started_at REAL NOT NULL,
  finished_at REAL);
CREATE TABLE run_batches(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  batch INTEGER NOT NULL,
  n_records INTEGER NOT NULL,
  rank_correlation REAL,
  recorded_at REAL NOT NULL,
  PRIMARY KEY(run_id, batch));
ALTER TABLE records ADD COLUMN run_id INTEGER REFERENCES runs(id);
)sql",
    // 2 -> 3: the tuning server's jobs (spec as submitted, state, the run its records carry,
    // the resolved target and the final summary), and records by run (a job's progress).
    R"sql(
CREATE TABLE jobs(
  id INTEGER PRIMARY KEY,
  spec TEXT NOT NULL,
  device_key TEXT NOT NULL,
  priority INTEGER NOT NULL DEFAULT 1,
  owner TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL,
  run_id INTEGER REFERENCES runs(id),
  target TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '',
  summary TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL,
  finished_at REAL);
CREATE INDEX records_by_run ON records(run_id);
)sql",
    // 3 -> 4: claims of configs a tuning run is measuring, so that two runs of one workload on
    // one log never measure the same config (owner = one run of one process; host and pid tell
    // a dead owner's claims from live ones; expires_at bounds the rest). Keyed by text, since a
    // config is claimed before its workload may be in the log.
    R"sql(
CREATE TABLE claims(
  workload_key TEXT NOT NULL,
  target TEXT NOT NULL,
  config_index INTEGER NOT NULL,
  owner TEXT NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  expires_at REAL NOT NULL,
  PRIMARY KEY(workload_key, target, config_index));
CREATE INDEX claims_by_owner ON claims(owner);
)sql",
    // 4 -> 5: records measured on an emulated device (qemu) are marked, and every record logged
    // before is a real one. Claims are kept apart too (a run on a real device measures a config
    // that an emulated run holds); a primary key cannot be altered, so the table is rebuilt.
    R"sql(
ALTER TABLE records ADD COLUMN emulated INTEGER NOT NULL DEFAULT 0;
CREATE TABLE claims_v5(
  workload_key TEXT NOT NULL,
  target TEXT NOT NULL,
  emulated INTEGER NOT NULL DEFAULT 0,
  config_index INTEGER NOT NULL,
  owner TEXT NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  expires_at REAL NOT NULL,
  PRIMARY KEY(workload_key, target, emulated, config_index));
INSERT INTO claims_v5(workload_key, target, emulated, config_index, owner, host, pid, expires_at)
  SELECT workload_key, target, 0, config_index, owner, host, pid, expires_at FROM claims;
DROP TABLE claims;
ALTER TABLE claims_v5 RENAME TO claims;
CREATE INDEX claims_by_owner ON claims(owner);
)sql",
    // 5 -> 6, tenants: a job belongs to the client that submitted it (its name in the server's
    // token file), and a record keeps that client and the worker that measured it. What was
    // logged before names neither ('').
    R"sql(
ALTER TABLE jobs ADD COLUMN client TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN client TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN worker TEXT NOT NULL DEFAULT '';
)sql",
    // 6 -> 7 (kRetimedSchemaVersion): a record's re-timing (seconds per round, a JSON array; '[]'
    // = never re-timed), whose median is then its mean_cost (the figure best ranks by), and
    // whether the timings behind that figure spread more than kNoisySpread (Record::noisy(); the
    // records logged before are flagged by backfill_noisy).
    R"sql(
ALTER TABLE records ADD COLUMN retimed_costs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE records ADD COLUMN noisy INTEGER NOT NULL DEFAULT 0;
)sql",
    // 7 -> 8 (kStepThreadsSchemaVersion): the thread count of each step of a built model, chosen
    // by timing its steps in the model's order at `threads` and at one thread (a model is its
    // graph and input shapes, model_key; target is the target string). steps is a JSON array, one
    // object per step of the plan: layer, max_threads (0 = all), all_s and one_s (medians).
    R"sql(
CREATE TABLE step_threads(
  model_key TEXT NOT NULL,
  target TEXT NOT NULL,
  threads INTEGER NOT NULL,
  steps TEXT NOT NULL,
  uncapped_s REAL NOT NULL DEFAULT 0,
  capped_s REAL NOT NULL DEFAULT 0,
  measured_at REAL NOT NULL,
  PRIMARY KEY(model_key, target, threads));
)sql",
    // 8 -> 9 (kDisputedSchemaVersion): a record another device of its key disagreed with
    // (Record::disputed), which best/top_k pass over.
    R"sql(
ALTER TABLE records ADD COLUMN disputed INTEGER NOT NULL DEFAULT 0;
)sql",
};

constexpr std::array<std::string_view, 11> kTables = {
    "meta", "workloads",   "targets", "devices", "records",     "models",
    "runs", "run_batches", "jobs",    "claims",  "step_threads"};
constexpr std::array<std::string_view, 5> kIndexes = {"workloads_by_template", "records_best",
                                                      "records_by_config", "records_by_run",
                                                      "claims_by_owner"};

// Flags the noisy records of a log that predates the column: the flag is a function of the
// timings (Record::noisy()), which SQL cannot compute (a median), so it is done here.
void backfill_noisy(sql::Connection& conn) {
  std::vector<int64_t> noisy;
  {
    sql::Statement s(conn, "SELECT id, costs FROM records WHERE error_kind = ''");
    while (s.step()) {
      Record r;
      r.costs = nlohmann::json::parse(s.column_text(1)).get<std::vector<double>>();
      if (r.noisy()) noisy.push_back(s.column_int(0));
    }
  }
  sql::Statement u(conn, "UPDATE records SET noisy = 1 WHERE id = ?1");
  for (int64_t id : noisy) {
    u.reset();
    u.bind(1, id);
    u.run();
  }
}

}  // namespace

void apply_migrations(sql::Connection& conn, int from, int to) {
  for (int v = from; v < to; ++v) {
    conn.exec(conn.driver().ddl(kMigrations[static_cast<size_t>(v)]));
    if (v + 1 == kRetimedSchemaVersion) backfill_noisy(conn);
  }
  conn.driver().set_version(kApplicationId, to);
}

namespace {

void refuse(sql::Connection& conn, int64_t app_id, int64_t version) {
  int64_t objects = conn.driver().schema_objects();
  if (app_id != kApplicationId && (app_id != 0 || objects > 0)) {
    throw Error(ErrorKind::kDatabase,
                "'" + conn.path() + "' is " + std::string(conn.driver().kind()) +
                    " but not a ktune tuning log (" + std::to_string(objects) +
                    " schema objects, application_id " + std::to_string(app_id) + ")");
  }
  if (version > kSchemaVersion) {
    throw Error(ErrorKind::kDatabase, "tuning log '" + conn.path() + "' has schema version " +
                                          std::to_string(version) + ", newer than the version " +
                                          std::to_string(kSchemaVersion) +
                                          " this ktune supports; upgrade ktune");
  }
}

}  // namespace

void refuse_foreign(sql::Connection& conn) {
  // The first read is where SQLite notices a file that is not a database at all.
  int64_t app_id = conn.driver().application_id();
  refuse(conn, app_id, conn.driver().schema_version());
}

int prepare_schema(sql::Connection& conn, bool migrate) {
  int64_t app_id = conn.driver().application_id();
  int64_t version = conn.driver().schema_version();
  if (app_id == kApplicationId && version == kSchemaVersion) return kSchemaVersion;
  refuse(conn, app_id, version);

  // Re-read under the write lock: another process may have initialized or migrated the file
  // between our first look and now.
  sql::Transaction txn(conn, sql::Transaction::Mode::kImmediate);
  app_id = conn.driver().application_id();
  version = conn.driver().schema_version();
  refuse(conn, app_id, version);
  if (version < kSchemaVersion) {
    if (version > 0 && !migrate) {
      throw Error(ErrorKind::kDatabase, "tuning log '" + conn.path() + "' has schema version " +
                                            std::to_string(version) +
                                            " and migration was not allowed");
    }
    if (version > 0) {
      spdlog::info("migrating tuning log '{}' from schema version {} to {}", conn.path(), version,
                   kSchemaVersion);
    }
    apply_migrations(conn, static_cast<int>(version), kSchemaVersion);
  }
  txn.commit();
  return static_cast<int>(version);
}

std::vector<std::string> check_schema(sql::Connection& conn) {
  std::vector<std::string> problems;
  int64_t app_id = conn.driver().application_id();
  int64_t version = conn.driver().schema_version();
  if (app_id != kApplicationId) {
    problems.push_back("application_id is " + std::to_string(app_id) + ", not ktune's " +
                       std::to_string(kApplicationId));
  }
  if (version != kSchemaVersion) {
    problems.push_back("schema version is " + std::to_string(version) + ", expected " +
                       std::to_string(kSchemaVersion));
  }
  for (std::string_view table : kTables) {
    if (!conn.driver().has_object("table", table))
      problems.push_back("missing table " + std::string(table));
  }
  for (std::string_view index : kIndexes) {
    if (!conn.driver().has_object("index", index))
      problems.push_back("missing index " + std::string(index));
  }
  return problems;
}

}  // namespace ktune::tuning_db
