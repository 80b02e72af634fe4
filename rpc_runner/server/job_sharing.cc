// JobManager among servers that share a PostgreSQL log: which server runs a job (its hold), jobs
// that others stored or run, as the log shows them, and a hold lost to another server.
#include "rpc_runner/server/job_manager.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "rpc_runner/server/managed_job.h"
#include "support/error.h"

namespace ktune::rpc_runner {

void JobManager::watch_log() {
  bool warned = false;
  while (!stopping_) {
    for (int i = 0; i < 20 && !stopping_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (stopping_) return;
    try {
      std::lock_guard adopt(adopt_mu_);
      std::vector<std::unique_ptr<Job>> found;
      {
        std::lock_guard db_lock(db_mu_);
        refresh_elsewhere();
        const std::vector<tuning_db::JobRow> rows = job_rows_.since(last_seen_);
        note_lost_holds();
        std::lock_guard lock(mu_);
        for (const tuning_db::JobRow& row : rows) {
          last_seen_ = std::max(last_seen_, row.id);
          if (!jobs_.count(static_cast<uint64_t>(row.id))) found.push_back(job_of_row(row));
        }
      }
      // Finished ones too, so that `ktune jobs --all` shows them here as well.
      std::lock_guard lock(mu_);
      for (auto& job : found) {
        Job* j = job.get();
        jobs_.emplace(j->status.id, std::move(job));
        if (j->status.finished()) continue;
        spdlog::info("job {} ({}, key {}): submitted to another server of this log", j->status.id,
                     j->status.workload, j->status.device_key);
        j->thread = std::thread([this, j] { run(*j); });
      }
      warned = false;
    } catch (const std::exception& e) {
      if (stopping_) return;  // a wait for the log that the stop ended
      if (!warned) spdlog::warn("cannot look for other servers' jobs in the log: {}", e.what());
      warned = true;
    }
  }
}

void JobManager::refresh_elsewhere() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, job] : jobs_)
      if (job->elsewhere) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    // Read before mu_ is taken: a log that is slow to answer does not hold up status calls.
    const std::optional<tuning_db::JobRow> row = job_rows_.get(static_cast<int64_t>(id));
    if (!row) continue;
    const uint64_t records = run_records(*row);
    std::lock_guard lock(mu_);
    Job& job = *jobs_.at(id);
    // Taken over meanwhile: its own thread has the row.
    if (!job.elsewhere) continue;
    const JobStatus before = job.status;
    take_row(job, *row, records);
    // While it runs there, its message says where it runs; its end is told as the log has it.
    if (!job.status.finished()) job.status.message = kRunElsewhere;
    if (job.status.state != before.state || job.status.done != before.done ||
        job.status.message != before.message || job.status.best_gflops != before.best_gflops)
      publish(job, std::nullopt);
  }
}

void JobManager::note_lost_holds() {
  for (const auto& [id, holder] : job_rows_.lost_holds()) {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(static_cast<uint64_t>(id));
    if (it == jobs_.end()) continue;
    it->second->taken_away = true;
    spdlog::warn(
        "job {}: another server of this log took it over while this server's connection to the "
        "log was lost{}; this server stops running it",
        id, holder.empty() ? "" : " (it is held by " + holder + ")");
  }
}

void JobManager::confirm_held(Job& job) {
  {
    std::lock_guard lock(db_mu_);
    // Any statement: on a connection that broke too, it reconnects, taking the holds again.
    job_rows_.get(static_cast<int64_t>(job.status.id));
    note_lost_holds();
  }
  if (job.taken_away)
    throw Error(ErrorKind::kDatabase, "job " + std::to_string(job.status.id) +
                                          " was taken over by another server of this log");
}

bool JobManager::hold(Job& job) {
  const auto id = static_cast<int64_t>(job.status.id);
  bool waited = false;
  for (;;) {
    {
      std::lock_guard lock(db_mu_);
      if (job.held || job_rows_.try_hold(id)) break;
    }
    if (!waited) {
      spdlog::info("job {}: run by another server of this log; taken over if that one stops", id);
      std::lock_guard lock(mu_);
      job.elsewhere = true;
      job.status.message = kRunElsewhere;
      publish(job, std::nullopt);
      waited = true;
    }
    for (int i = 0; i < 20 && !stopping_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (stopping_) return false;
  }
  job.held = true;
  if (!waited) return true;
  // Where the other server left it.
  std::lock_guard db_lock(db_mu_);
  const std::optional<tuning_db::JobRow> row = job_rows_.get(id);
  const uint64_t records = row ? run_records(*row) : 0;
  std::lock_guard lock(mu_);
  job.elsewhere = false;
  if (!row) return false;
  take_row(job, *row, records);
  publish(job, std::nullopt);
  if (job.status.finished()) return false;
  spdlog::info("job {}: taken over from the server that ran it, {} of {} trials done", id,
               job.status.done, job.status.trials);
  return true;
}

}  // namespace ktune::rpc_runner
