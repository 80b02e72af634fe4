// The server's jobs: rows of the log, threads that run TuningSessions over the fleet, listeners.
#include "rpc_runner/server/job_manager.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "rpc_runner/server/fleet_measurer.h"
#include "rpc_runner/server/managed_job.h"
#include "rpc_runner/server/model_job.h"
#include "rpc_runner/server/server_metrics.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "tuner/tuning_session.h"
#include "tuning_db/run_store.h"
#include "tuning_db/sql.h"

namespace ktune::rpc_runner {

namespace {

// Trials a model job has spent, from its latest model report ("done").
uint64_t model_done(const std::string& report_json) {
  const auto j = nlohmann::json::parse(report_json, nullptr, false);
  return j.is_object() && j.contains("done") && j["done"].is_number_unsigned()
             ? j["done"].get<uint64_t>()
             : 0;
}

// A job's figure read back from its row: the best the log serves after it (re-timed). A cancelled
// job was not re-timed and its summary's best may be another job's record: it shows that best
// only when its own trials found it, else none (while it runs, a job shows its own trials' best).
double best_of(const std::string& summary_json, tuning_db::JobState state) {
  if (summary_json.empty()) return 0;
  const auto j = nlohmann::json::parse(summary_json, nullptr, false);
  if (j.is_discarded() || !j.contains("best")) return 0;
  if (state == tuning_db::JobState::kCancelled && !j["best"].value("from_this_run", false))
    return 0;
  return j["best"].value("gflops", 0.0);
}

FleetMeasurerOptions fleet_options(const JobSpec& spec) {
  FleetMeasurerOptions fleet;
  fleet.measure = spec.measure;
  return fleet;
}
}  // namespace

Error unknown_job(uint64_t id) {
  return Error(ErrorKind::kNotFound, "no job " + std::to_string(id));
}

JobManager::JobManager(std::string db_path, DevicePool& pool, ServerMetrics* metrics,
                       double db_retry_s)
    : db_path_(std::move(db_path)),
      db_options_{.reconnect_for_s = db_retry_s,
                  .stop_waiting = [this] { return stopping_.load(); }},
      pool_(pool),
      metrics_(metrics),
      db_(tuning_db::Database::open(db_path_, db_options_)) {
  // Every job of the log, finished ones included, so `ktune jobs --all` shows the history.
  for (const tuning_db::JobRow& row : job_rows_.all()) {
    jobs_.emplace(static_cast<uint64_t>(row.id), job_of_row(row));
    last_seen_ = std::max(last_seen_, row.id);
  }
}

std::unique_ptr<JobManager::Job> JobManager::job_of_row(const tuning_db::JobRow& row) {
  auto job = std::make_unique<Job>();
  try {
    job->spec = JobSpec::from_json(row.spec);
  } catch (const Error& e) {
    spdlog::warn("job {} of the log has an unreadable spec ({}); it is left as it is", row.id,
                 e.what());
  }
  JobStatus& s = job->status;
  s.id = static_cast<uint64_t>(row.id);
  s.workload = job->spec.label();
  s.model = job->spec.is_model();
  s.device_key = row.device_key;
  s.trials = job->spec.session.trials;
  s.priority = row.priority;
  s.owner = row.owner;
  s.client = row.client;
  s.tuner = job->spec.session.tuner;
  s.created_at = row.created_at;
  take_row(*job, row, run_records(row));
  return job;
}

uint64_t JobManager::run_records(const tuning_db::JobRow& row) {
  return row.run_id ? static_cast<uint64_t>(tuning_db::RunStore(db_).count_records(row.run_id)) : 0;
}

void JobManager::take_row(Job& job, const tuning_db::JobRow& row, uint64_t records) {
  job.run_id = row.run_id;
  job.summary_json = row.summary;
  job.model_report.clear();
  // An unfinished model job's summary column holds its progress, not a summary.
  if (job.spec.is_model() && row.state != tuning_db::JobState::kDone)
    std::swap(job.summary_json, job.model_report);
  JobStatus& s = job.status;
  s.state = row.state;
  s.target = row.target.empty() ? job.spec.target : row.target;
  if (job.spec.is_model())
    s.done = model_done(job.model_report.empty() ? job.summary_json : job.model_report);
  else
    s.done = records;
  s.best_gflops = best_of(row.summary, row.state);
  s.message = row.message;
}

JobManager::~JobManager() { shutdown(); }

size_t JobManager::resume_unfinished() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (auto& [id, job] : jobs_) {
    if (job->status.finished() || job->thread.joinable()) continue;
    spdlog::info("job {} ({}, key {}): resuming, {} of {} trials done", id, job->status.workload,
                 job->status.device_key, job->status.done, job->status.trials);
    Job* j = job.get();
    job->thread = std::thread([this, j] { run(*j); });
    ++n;
  }
  if (tuning_db::sql::is_postgres_url(db_path_) && !watcher_.joinable())
    watcher_ = std::thread([this] { watch_log(); });
  return n;
}

JobStatus JobManager::submit(const JobSpec& spec, const std::string& client) {
  spec.validate();
  if (stopping_) throw Error(ErrorKind::kUnsupported, "the server is shutting down");
  std::lock_guard adopt(adopt_mu_);
  tuning_db::JobRow row;
  row.spec = spec.to_json();
  row.device_key = spec.session.device_key;
  row.priority = spec.priority;
  row.owner = spec.owner;
  row.client = client;
  row.state = tuning_db::JobState::kQueued;
  int64_t id;
  {
    std::lock_guard lock(db_mu_);
    id = job_rows_.add(row, /*hold=*/true);
  }
  auto job = std::make_unique<Job>();
  job->spec = spec;
  job->held = true;
  JobStatus& s = job->status;
  s.id = static_cast<uint64_t>(id);
  s.state = tuning_db::JobState::kQueued;
  s.workload = spec.label();
  s.model = spec.is_model();
  s.device_key = spec.session.device_key;
  s.target = spec.target;
  s.trials = spec.session.trials;
  s.priority = spec.priority;
  s.owner = spec.owner;
  s.client = client;
  s.tuner = spec.session.tuner;
  s.created_at = static_cast<double>(std::time(nullptr));
  spdlog::info("job {} submitted by {}{}: {} on key {}, {} trials ({})", id,
               spec.owner.empty() ? "?" : spec.owner,
               client.empty() ? "" : " (client " + client + ")", s.workload,
               spec.session.device_key, spec.session.trials, spec.session.tuner);
  std::lock_guard lock(mu_);
  Job* j = job.get();
  jobs_.emplace(s.id, std::move(job));
  j->thread = std::thread([this, j] { run(*j); });
  return live_status(*j);
}

std::optional<JobStatus> JobManager::status(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return live_status(*it->second);
}

std::vector<JobStatus> JobManager::list(bool all) {
  std::lock_guard lock(mu_);
  std::vector<JobStatus> out;
  for (const auto& [id, job] : jobs_)
    if (all || !job->status.finished()) out.push_back(live_status(*job));
  return out;
}

JobStatus JobManager::cancel(uint64_t id, const std::string& by) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) throw unknown_job(id);
  Job& job = *it->second;
  if (job.elsewhere)
    throw Error(ErrorKind::kUnsupported, "job " + std::to_string(id) +
                                             " is run by another server of this log: cancel it "
                                             "there");
  if (!job.status.finished()) {
    job.cancelled_by = by;
    job.cancel = true;
    spdlog::info("job {}: cancel requested by {}", id, by);
  }
  return live_status(job);
}

uint64_t JobManager::subscribe(uint64_t id, Listener listener) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) throw unknown_job(id);
  Job& job = *it->second;
  const uint64_t token = next_token_++;
  JobEvent now{live_status(job), std::nullopt, job.summary_json, job.model_report};
  listener(now);
  job.listeners.emplace(token, std::move(listener));
  return token;
}

void JobManager::unsubscribe(uint64_t id, uint64_t token) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it != jobs_.end()) it->second->listeners.erase(token);
}

void JobManager::shutdown() {
  stopping_ = true;
  if (watcher_.joinable()) watcher_.join();
  std::vector<std::thread*> threads;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, job] : jobs_)
      if (job->thread.joinable()) threads.push_back(&job->thread);
  }
  for (std::thread* t : threads) t->join();
}

JobStatus JobManager::live_status(const Job& job) const {
  JobStatus s = job.status;
  s.devices = pool_.workers_of(s.device_key);
  s.measuring = s.finished() ? 0 : pool_.measuring(s.id);
  return s;
}

void JobManager::publish(Job& job, const std::optional<tuner::ProgressSnapshot>& progress) {
  if (job.listeners.empty()) return;
  JobEvent event{live_status(job), progress, job.summary_json, job.model_report};
  for (auto& [token, listener] : job.listeners) listener(event);
}

std::string JobManager::cancelled_message(const Job& job) {
  std::lock_guard lock(mu_);
  return "cancelled by " + job.cancelled_by;
}

void JobManager::set_state(Job& job, tuning_db::JobState state, const std::string& message) {
  {
    std::lock_guard lock(db_mu_);
    job_rows_.update(static_cast<int64_t>(job.status.id), state, message, job.run_id);
  }
  std::lock_guard lock(mu_);
  job.status.state = state;
  job.status.message = message;
  publish(job, std::nullopt);
}

void JobManager::end(Job& job, tuning_db::JobState shown, tuning_db::JobState stored,
                     const std::string& message) {
  try {
    std::lock_guard lock(db_mu_);
    job_rows_.update(static_cast<int64_t>(job.status.id), stored, message, job.run_id);
  } catch (const std::exception& e) {
    spdlog::error("job {}: its end is kept in memory only, the log cannot take it: {}",
                  job.status.id, e.what());
  }
  std::lock_guard lock(mu_);
  job.status.state = shown;
  job.status.message = message;
  publish(job, std::nullopt);
}

void JobManager::run(Job& job) {
  const uint64_t id = job.status.id;
  bool row_ended = true;  // whether the job's row took a terminal state
  for (;;) {
    try {
      if (!hold(job)) return;
      run_session(job);
    } catch (const std::exception& e) {
      if (!stopping_ && !job.taken_away) row_ended = fail(job, e);
    }
    pool_.close_job(id);
    if (!job.taken_away) break;
    // Another server runs it now: this one writes nothing more for it, and waits to take it over
    // again should that one stop.
    job.taken_away = false;
    job.held = false;
  }
  // An unfinished job stays held until this server stops: another one takes it over then.
  if (stopping_ || !row_ended || !job.held) return;
  try {
    std::lock_guard lock(db_mu_);
    job_rows_.release(static_cast<int64_t>(id));
  } catch (const std::exception& e) {
    spdlog::warn("job {}: its hold goes when this server stops: {}", id, e.what());
  }
}

bool JobManager::fail(Job& job, const std::exception& e) {
  const uint64_t id = job.status.id;
  const auto* error = dynamic_cast<const Error*>(&e);
  if (job.cancel) {
    end(job, tuning_db::JobState::kCancelled, tuning_db::JobState::kCancelled,
        cancelled_message(job));
    return true;
  }
  if (error && error->kind() == ErrorKind::kDatabase) {
    // The log failed (a full disk, an I/O error): the server's fault, not the job's. Its clients
    // see it fail; its row keeps the state it had, so that a server restarted with a writable log
    // resumes it from the records the log holds.
    const std::string message = std::string(
                                    "the tuning log failed (the job resumes when the server "
                                    "restarts with a writable log): ") +
                                e.what();
    spdlog::error("job {} failed: {}", id, message);
    tuning_db::JobState stored;
    {
      std::lock_guard lock(mu_);
      stored = job.status.state;
    }
    end(job, tuning_db::JobState::kFailed, stored, message);
    return false;
  }
  spdlog::error("job {} failed: {}", id, e.what());
  end(job, tuning_db::JobState::kFailed, tuning_db::JobState::kFailed, e.what());
  return true;
}

void JobManager::run_session(Job& job) {
  const JobSpec& spec = job.spec;
  const uint64_t id = job.status.id;
  auto stop = [this, &job] {
    return stopping_.load() || job.cancel.load() || job.taken_away.load();
  };

  if (pool_.workers_of(spec.session.device_key) == 0)
    set_state(job, tuning_db::JobState::kQueued,
              "waiting for a device with key '" + spec.session.device_key + "'");
  const std::optional<WorkerInfo> device = pool_.wait_for_worker(spec.session.device_key, stop);
  if (!device) {
    if (!stopping_) set_state(job, tuning_db::JobState::kCancelled, cancelled_message(job));
    return;
  }
  // "host" is the devices' own target; every device of a key is taken to have the same one.
  const codegen::Target target =
      codegen::Target::parse(spec.target == "host" ? device->target : spec.target);
  if (target.str() != device->target)
    throw Error(ErrorKind::kUnsupported, "target '" + target.str() + "' differs from the target '" +
                                             device->target + "' of the devices with key '" +
                                             spec.session.device_key + "'");
  const auto traits = schedule_space::make_target_traits(
      target.str(), target.triple(), target.vector_bits(), std::max(device->cores, 1));
  // Its connection writes nothing after a reconnect that finds the job taken by another server.
  tuning_db::OpenOptions db_options = db_options_;
  db_options.after_reconnect = [this, &job] { confirm_held(job); };
  auto db = tuning_db::Database::open(db_path_, db_options);
  const tuning_db::TargetKey target_key{target.str(), codegen::llvm_version()};
  if (spec.is_model()) return run_model(job, traits, db, target_key, stop);
  const auto task = schedule_space::Task::create(spec.template_name, spec.args, traits);

  if (job.run_id == 0) {
    job.run_id = tuning_db::RunStore(db).begin(
        {spec.session.tuner, task.workload_key(), target.str(), spec.to_json()});
    std::lock_guard lock(db_mu_);
    job_rows_.set_target(static_cast<int64_t>(id), target.str());
  }
  const auto done_before = static_cast<uint64_t>(tuning_db::RunStore(db).count_records(job.run_id));
  {
    std::lock_guard lock(mu_);
    job.status.target = target.str();
    job.status.workload = task.workload_key();
    job.status.done = done_before;
  }
  if (!begin_measuring(job, done_before)) return;
  FleetMeasurer measurer(pool_, id, spec.session.device_key, fleet_options(spec), stop);
  tuner::SessionOptions options = session_options(job, stop);
  options.trials = spec.session.trials - done_before;
  options.run_id = job.run_id;
  tuner::TuningSession session(task, db, measurer, target_key, options);
  const tuner::SessionReport report = session.run([&](const tuner::ProgressSnapshot& p) {
    tuner::ProgressSnapshot shown = p;
    shown.done += done_before;
    shown.total = spec.session.trials;
    std::lock_guard lock(mu_);
    job.status.done = shown.done;
    // Its own trials' best while it runs: the resumed records may be other runs'.
    job.status.best_gflops = std::max(job.status.best_gflops, p.run_best_gflops);
    publish(job, shown);
  });
  // Stopping: the next server resumes it; taken away: the other server runs it.
  if (stopping_ || job.taken_away) return;
  const std::string summary = tuner::summary_json(task, target_key, report).dump();
  {
    std::lock_guard lock(db_mu_);
    job_rows_.set_summary(static_cast<int64_t>(id), summary);
  }
  {
    std::lock_guard lock(mu_);
    job.summary_json = summary;
    // The figure the log serves now (re-timed), not the highest first timing seen while tuning; a
    // cancelled job keeps its own trials' best.
    if (!report.cancelled) job.status.best_gflops = best_of(summary, tuning_db::JobState::kDone);
  }
  if (report.cancelled)
    set_state(job, tuning_db::JobState::kCancelled, cancelled_message(job));
  else
    set_state(job, tuning_db::JobState::kDone,
              report.result.best_config ? "" : "no config succeeded");
}

bool JobManager::begin_measuring(Job& job, uint64_t done_before) {
  set_state(job, tuning_db::JobState::kRunning, "");
  if (done_before >= job.spec.session.trials) {
    set_state(job, tuning_db::JobState::kDone, "every trial was measured before the restart");
    return false;
  }
  pool_.open_job(job.status.id, job.spec.session.device_key, job.spec.priority);
  return true;
}

tuner::SessionOptions JobManager::session_options(const Job& job,
                                                  const std::function<bool()>& stop) const {
  const JobSpec& spec = job.spec;
  tuner::SessionOptions options = spec.session;
  options.client = job.status.client;  // set at submit, never changed: read without mu_
  // Emulated devices (qemu) resume from, learn from and write emulated records only; a result
  // of an emulated worker is marked emulated in any case (FleetMeasurer).
  options.emulated = pool_.all_emulated(spec.session.device_key);
  options.should_stop = stop;
  if (metrics_)
    options.on_logged = [metrics = metrics_, key = spec.session.device_key](
                            const std::vector<tuner::MeasureResult>& logged, double write_s) {
      metrics->logged(key, logged, write_s);
    };
  return options;
}

// A model job: ModelTuning over the fleet (rpc_runner/model_job.h). Its trials are counted in its
// model reports, kept in the job row's summary column after every allocation (the records of
// its allocations belong to one run per task, as in a local run). After a restart it spends the
// budget left, resuming every task from the log; an allocation cut by the restart is not in
// the count, so such a job may measure up to one batch more than its budget.
void JobManager::run_model(Job& job, const schedule_space::TargetTraits& traits,
                           tuning_db::Database& db, const tuning_db::TargetKey& target,
                           const std::function<bool()>& stop) {
  const JobSpec& spec = job.spec;
  const uint64_t id = job.status.id;
  uint64_t done_before = 0;
  {
    std::lock_guard lock(mu_);
    done_before = model_done(job.model_report);
    job.status.target = target.target;
    job.status.done = done_before;
  }
  {
    std::lock_guard lock(db_mu_);
    job_rows_.set_target(static_cast<int64_t>(id), target.target);
  }
  if (!begin_measuring(job, done_before)) return;
  FleetMeasurer measurer(pool_, id, spec.session.device_key, fleet_options(spec), stop);
  const ModelJobResult result =
      run_model_job(spec, traits, db, measurer, target, session_options(job, stop), done_before,
                    [&](const nlohmann::json& r) {
                      const std::string text = r.dump();
                      {
                        std::lock_guard lock(db_mu_);
                        job_rows_.set_summary(static_cast<int64_t>(id), text);
                      }
                      std::lock_guard lock(mu_);
                      job.model_report = text;
                      job.status.done = r.value("done", done_before);
                      publish(job, std::nullopt);
                    });
  // Stopping: the next server resumes it; taken away: the other server runs it.
  if (stopping_ || job.taken_away) return;
  const std::string summary = result.summary.dump();
  {
    std::lock_guard lock(db_mu_);
    job_rows_.set_summary(static_cast<int64_t>(id), summary);
  }
  {
    std::lock_guard lock(mu_);
    job.model_report = summary;
    if (!result.cancelled) job.summary_json = summary;
  }
  if (result.cancelled)
    set_state(job, tuning_db::JobState::kCancelled, cancelled_message(job));
  else
    set_state(job, tuning_db::JobState::kDone,
              result.summary["tuned_s"].is_number() ? "" : "no config succeeded for some task");
}

}  // namespace ktune::rpc_runner
