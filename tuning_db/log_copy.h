// Defines copy_log, which copies one tuning log into another (SQLite or PostgreSQL, either way),
// and CopyReport, what it copied.
#pragma once

#include <cstdint>

#include "tuning_db/database.h"

namespace ktune::tuning_db {

// What copy_log copied (`added`) and found in the target already (`present`), per kind.
struct CopyReport {
  int64_t records = 0;
  int64_t records_present = 0;
  int64_t records_retimed = 0;  // of records_present: those that gained the source's re-timing
  int64_t runs = 0;
  int64_t runs_present = 0;
  int64_t run_batches = 0;
  int64_t models = 0;
  int64_t models_present = 0;
  int64_t jobs = 0;
  int64_t jobs_present = 0;
  int64_t step_threads = 0;
  int64_t step_threads_present = 0;
};

// Copies every record (with its re-timing), run (with its batches' model quality), saved model,
// job and step thread choice of `from` into `to`; records, jobs and batches keep their runs (ids
// are the target's), step thread choices the time they were measured.
// Claims are not copied: they belong to the runs measuring now. The target must hold none of
// these unless `append`; then what it holds already is kept and not copied again: a record of the
// same measurement (as import: it gains the source's re-timing when it has none), a run of the
// same tuner, workload, target and start, a model of the same name, scope and target (the
// target's stays), a job of the same spec and creation time, a step thread choice of the same
// model, target and thread count (the target's stays). Records are written in transactions of a
// few thousand; the rest in one each. `from` may be opened read-only.
// Throws Error(kInvalidArgument) for a non-empty target without `append` or both being one log,
// Error(kDatabase).
CopyReport copy_log(Database& from, Database& to, bool append);

}  // namespace ktune::tuning_db
