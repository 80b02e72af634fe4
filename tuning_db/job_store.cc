// JobStore: the tuning server's jobs table, and JobState's one word per state.
#include "tuning_db/job_store.h"

#include <array>
#include <ostream>
#include <utility>

#include "support/error.h"
#include "tuning_db/database_impl.h"

namespace ktune::tuning_db {
namespace {

// The words the jobs table stores, in the order of JobState.
constexpr std::array<std::pair<JobState, std::string_view>, 5> kStates = {{
    {JobState::kQueued, "queued"},
    {JobState::kRunning, "running"},
    {JobState::kDone, "done"},
    {JobState::kFailed, "failed"},
    {JobState::kCancelled, "cancelled"},
}};

// The kind of the holds of jobs ("ktjb"). A hold's key is the job id's low 32 bits: two jobs
// collide only 2^32 ids apart.
constexpr int32_t kJobHolds = 0x6b746a62;

constexpr std::string_view kJobColumns =
    "SELECT id, spec, device_key, priority, owner, state, run_id, target, message, summary, "
    "created_at, updated_at, finished_at, client FROM jobs ";

JobRow read_job(const sql::Statement& s) {
  JobRow j;
  j.id = s.column_int(0);
  j.spec = nlohmann::json::parse(s.column_text(1), nullptr, false);
  if (j.spec.is_discarded()) j.spec = nlohmann::json::object();
  j.device_key = s.column_text(2);
  j.priority = static_cast<int>(s.column_int(3));
  j.owner = s.column_text(4);
  j.state = job_state_from_string(s.column_text(5));
  j.run_id = s.is_null(6) ? 0 : s.column_int(6);
  j.target = s.column_text(7);
  j.message = s.column_text(8);
  j.summary = s.column_text(9);
  j.created_at = s.column_double(10);
  j.updated_at = s.column_double(11);
  if (!s.is_null(12)) j.finished_at = s.column_double(12);
  j.client = s.column_text(13);
  return j;
}

}  // namespace

std::string_view to_string(JobState state) {
  for (const auto& [s, word] : kStates)
    if (s == state) return word;
  throw Error(ErrorKind::kInternal, "unknown JobState " + std::to_string(static_cast<int>(state)));
}

JobState job_state_from_string(std::string_view word) {
  for (const auto& [s, w] : kStates)
    if (w == word) return s;
  throw Error(ErrorKind::kInvalidArgument, "unknown job state '" + std::string(word) + "'");
}

bool is_terminal(JobState state) {
  return state == JobState::kDone || state == JobState::kFailed || state == JobState::kCancelled;
}

std::ostream& operator<<(std::ostream& out, JobState state) { return out << to_string(state); }

JobStore::JobStore(Database& db) : impl_(*db.impl_) {}

int64_t JobStore::add(const JobRow& job, bool hold) {
  if (job.device_key.empty()) throw Error(ErrorKind::kInvalidArgument, "a job needs a device key");
  // A commit cut by a lost connection may have stored the job: it is not stored again.
  return sql::with_transaction(impl_.conn, sql::TransactionMode::kImmediate, [&](bool again) {
    if (again)
      throw Error(ErrorKind::kDatabase, "tuning log '" + impl_.conn.path() +
                                            "': the connection was lost while a job was stored; "
                                            "it may be in the log (ktune jobs --all)");
    auto s = impl_.use(
        "INSERT INTO jobs(spec, device_key, priority, owner, state, run_id, target, message, "
        "summary, created_at, updated_at, finished_at, client) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?12)");
    const double now = now_seconds();
    s->bind(1, job.spec.dump())
        .bind(2, job.device_key)
        .bind(3, int64_t{job.priority})
        .bind(4, job.owner);
    s->bind(5, to_string(job.state));
    if (job.run_id)
      s->bind(6, job.run_id);
    else
      s->bind_null(6);
    s->bind(7, job.target).bind(8, job.message).bind(9, job.summary).bind(10, now);
    if (is_terminal(job.state))
      s->bind(11, now);
    else
      s->bind_null(11);
    s->bind(12, job.client);
    s->run();
    const int64_t id = impl_.conn.last_insert_rowid();
    if (hold && !try_hold(id))
      throw Error(ErrorKind::kInternal, "job " + std::to_string(id) + " is held before it exists");
    return id;
  });
}

bool JobStore::try_hold(int64_t id) {
  return impl_.conn.driver().try_hold(kJobHolds, static_cast<int32_t>(id));
}

void JobStore::release(int64_t id) {
  impl_.conn.driver().release_hold(kJobHolds, static_cast<int32_t>(id));
}

std::vector<std::pair<int64_t, std::string>> JobStore::lost_holds() {
  std::vector<std::pair<int64_t, std::string>> out;
  for (sql::LostHold& lost : impl_.conn.driver().lost_holds())
    if (lost.space == kJobHolds)
      out.emplace_back(static_cast<int64_t>(static_cast<uint32_t>(lost.key)),
                       std::move(lost.holder));
  return out;
}

void JobStore::update(int64_t id, JobState state, std::string_view message, int64_t run_id) {
  auto s = impl_.use(
      "UPDATE jobs SET state = ?2, message = ?3, run_id = CASE WHEN ?4 = 0 THEN run_id ELSE ?4 "
      "END, "
      "updated_at = ?5, finished_at = CASE WHEN ?6 = 1 THEN ?5 ELSE NULL END WHERE id = ?1");
  s->bind(1, id).bind(2, to_string(state)).bind(3, message).bind(4, run_id).bind(5, now_seconds());
  s->bind(6, int64_t{is_terminal(state) ? 1 : 0});
  s->run();
  if (impl_.conn.changes() == 0) throw Error(ErrorKind::kNotFound, "no job " + std::to_string(id));
}

void JobStore::set_target(int64_t id, std::string_view target) {
  auto s = impl_.use("UPDATE jobs SET target = ?2, updated_at = ?3 WHERE id = ?1");
  s->bind(1, id).bind(2, target).bind(3, now_seconds());
  s->run();
  if (impl_.conn.changes() == 0) throw Error(ErrorKind::kNotFound, "no job " + std::to_string(id));
}

void JobStore::set_summary(int64_t id, std::string_view summary) {
  auto s = impl_.use("UPDATE jobs SET summary = ?2, updated_at = ?3 WHERE id = ?1");
  s->bind(1, id).bind(2, summary).bind(3, now_seconds());
  s->run();
  if (impl_.conn.changes() == 0) throw Error(ErrorKind::kNotFound, "no job " + std::to_string(id));
}

std::optional<JobRow> JobStore::get(int64_t id) {
  auto s = impl_.use(std::string(kJobColumns) + "WHERE id = ?1");
  s->bind(1, id);
  if (!s->step()) return std::nullopt;
  return read_job(*s);
}

std::vector<JobRow> JobStore::since(int64_t after) {
  auto s = impl_.use(std::string(kJobColumns) + "WHERE id > ?1 ORDER BY id");
  s->bind(1, after);
  std::vector<JobRow> out;
  while (s->step()) out.push_back(read_job(*s));
  return out;
}

std::vector<JobRow> JobStore::all(bool unfinished_only) {
  auto s = impl_.use(std::string(kJobColumns) + "WHERE ?1 = 0 OR state IN (?2, ?3) ORDER BY id");
  s->bind(1, int64_t{unfinished_only ? 1 : 0});
  s->bind(2, to_string(JobState::kQueued)).bind(3, to_string(JobState::kRunning));
  std::vector<JobRow> out;
  while (s->step()) out.push_back(read_job(*s));
  return out;
}

}  // namespace ktune::tuning_db
