// The fleet of a tuning server: worker registry, stride-scheduled candidate queues, requeue on
// loss.
#include "rpc_runner/server/device_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <spdlog/spdlog.h>

#include "rpc_runner/server/server_metrics.h"
#include "support/error.h"

namespace ktune::rpc_runner {

namespace {

// What a candidate may take on a device by itself: its build and run timeouts (bounded, so that
// a deadline stays a representable time point).
double budget_s(const rpc::Candidate& c) {
  constexpr double kLongest = 1e6;
  const double s = c.measure().build_timeout_s() + c.measure().run_timeout_s();
  return std::isfinite(s) && s > 0 ? std::min(s, kLongest) : 0;
}

// The answer kUnsupported of the last worker of a key that could have run a candidate, saying
// when others gave it too.
rpc::CandidateResult no_worker_can(rpc::CandidateResult answer, const std::string& key,
                                   const std::set<std::string>& workers) {
  if (workers.size() > 1) {
    std::string all;
    for (const std::string& id : workers) all += (all.empty() ? "" : ", ") + id;
    answer.set_error_message(answer.error_message() + " (no worker of key " + key + " can: " + all +
                             " answered so)");
  }
  return answer;
}

}  // namespace

DevicePool::DevicePool(double heartbeat_timeout_s, double deadline_margin_s, ServerMetrics* metrics)
    : heartbeat_timeout_s_(heartbeat_timeout_s),
      deadline_margin_s_(deadline_margin_s),
      metrics_(metrics) {}

std::string DevicePool::attach(WorkerInfo info, Sender send, Closer close) {
  std::lock_guard lock(mu_);
  info.worker_id = "w" + std::to_string(next_worker_++);
  info.slots = std::max(info.slots, 1);
  const std::string id = info.worker_id;
  Worker& w = workers_[id];
  w.info = std::move(info);
  w.seq = next_worker_;
  w.send = std::move(send);
  w.close = std::move(close);
  w.last_seen = Clock::now();
  relist(w);
  attached_cv_.notify_all();
  dispatch(w.info.key);
  return id;
}

void DevicePool::send_direct(const std::string& worker_id, rpc::Candidate candidate,
                             ResultCallback done) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  candidate.set_id(next_candidate_++);
  Pending p;
  p.candidate = std::move(candidate);
  p.done = std::move(done);
  p.queued_at = Clock::now();
  double budget = deadline_margin_s_ + budget_s(p.candidate);
  for (const auto& [held, q] : w.in_flight) budget += budget_s(q.candidate);
  p.deadline = p.queued_at +
               std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget));
  w.send(p.candidate);
  const uint64_t id = p.candidate.id();
  w.in_flight.emplace(id, std::move(p));
  relist(w);
}

void DevicePool::calibrated(const std::string& worker_id, double core_gflops, double all_gflops,
                            const std::string& note) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  w.info.core_gflops = core_gflops;
  w.info.all_gflops = all_gflops;
  w.info.calibration_note = note;
  w.calibrated = true;
  relist(w);
  dispatch(w.info.key);
}

void DevicePool::refuse(const std::string& worker_id, const std::string& reason) {
  Closer close;
  std::vector<Delivery> stranded;
  {
    std::lock_guard lock(mu_);
    auto it = workers_.find(worker_id);
    if (it == workers_.end()) return;
    close = it->second.close;
    remove(it, reason, &stranded);
  }
  if (close) close(reason, /*refused=*/true);
  for (Delivery& d : stranded) d.done(d.worker, std::move(d.result));
}

void DevicePool::detach(const std::string& worker_id, const std::string& reason) {
  std::vector<Delivery> stranded;
  {
    std::lock_guard lock(mu_);
    auto it = workers_.find(worker_id);
    if (it != workers_.end()) remove(it, reason, &stranded);
  }
  // Outside the lock, as complete() does: the job's callback takes its own lock.
  for (Delivery& d : stranded) d.done(d.worker, std::move(d.result));
}

void DevicePool::relist(Worker& w, bool gone) {
  FreeList& free = free_[w.info.key];
  const size_t load = w.in_flight.size();
  const bool fits = !gone && w.calibrated && static_cast<int>(load) < w.info.slots;
  if (w.listed && (!fits || w.listed_load != load)) {
    free.erase({w.listed_load, w.seq, &w});
    w.listed = false;
  }
  if (fits && !w.listed) {
    free.insert({load, w.seq, &w});
    w.listed = true;
    w.listed_load = load;
  }
}

void DevicePool::remove(std::map<std::string, Worker>::iterator it, const std::string& reason,
                        std::vector<Delivery>* stranded) {
  Worker& w = it->second;
  relist(w, /*gone=*/true);
  size_t requeued = 0;
  // Back to the front of their queues, oldest candidate first, so order is kept.
  for (auto c = w.in_flight.rbegin(); c != w.in_flight.rend(); ++c) {
    auto job = jobs_.find(c->second.job_id);
    if (job == jobs_.end()) continue;
    --job->second.in_flight;
    c->second.queued_at = Clock::now();
    job->second.queue.push_front(std::move(c->second));
    ++requeued;
  }
  spdlog::info(
      "worker {} (key {}, {}) detached: {}{}", w.info.worker_id, w.info.key, w.info.peer, reason,
      requeued ? "; " + std::to_string(requeued) + " candidate(s) go back to the queue" : "");
  const std::string key = w.info.key;
  if (metrics_ && requeued > 0) metrics_->requeued(key, requeued);
  workers_.erase(it);
  for (auto& [id, job] : jobs_) {
    if (job.key != key) continue;
    for (auto p = job.queue.begin(); p != job.queue.end();) {
      if (p->unsupported_on.empty() || another_may_run(key, *p)) {
        ++p;
        continue;
      }
      stranded->push_back(
          {p->unsupported_by, std::move(p->done),
           no_worker_can(std::move(p->unsupported_answer), key, p->unsupported_on)});
      p = job.queue.erase(p);
    }
  }
  dispatch(key);
}

void DevicePool::touch(const std::string& worker_id) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.last_seen = Clock::now();
}

bool DevicePool::complete(const std::string& worker_id, rpc::CandidateResult result) {
  Pending done;
  WorkerInfo info;
  {
    std::lock_guard lock(mu_);
    auto it = workers_.find(worker_id);
    if (it == workers_.end()) return false;
    Worker& w = it->second;
    w.last_seen = Clock::now();
    auto c = w.in_flight.find(result.id());
    if (c == w.in_flight.end()) return false;
    done = std::move(c->second);
    w.in_flight.erase(c);
    relist(w);
    if (done.job_id != kNoJob) ++w.info.served;  // a job's result, not its calibration
    info = w.info;
    if (done.job_id == kNoJob) {
      dispatch(w.info.key);
    } else if (auto job = jobs_.find(done.job_id); job == jobs_.end()) {
      dispatch(w.info.key);
      return false;  // the job ended meanwhile
    } else {
      --job->second.in_flight;
      if (result.error_kind() == to_string(ErrorKind::kUnsupported)) {
        done.unsupported_on.insert(worker_id);
        if (another_may_run(w.info.key, done)) {
          spdlog::info(
              "worker {} (key {}) cannot run candidate {} of job {}; it goes to another "
              "worker of the key",
              worker_id, w.info.key, done.candidate.id(), done.job_id);
          done.unsupported_by = info;
          done.unsupported_answer = std::move(result);
          done.queued_at = Clock::now();
          job->second.queue.push_front(std::move(done));
          dispatch(w.info.key);
          return true;
        }
        result = no_worker_can(std::move(result), w.info.key, done.unsupported_on);
      }
      dispatch(w.info.key);
    }
  }
  // Outside the lock: the job's callback takes its own lock and may submit more.
  done.done(info, std::move(result));
  return true;
}

std::vector<std::string> DevicePool::expire() {
  std::vector<std::string> gone;
  std::vector<std::pair<WorkerInfo, Pending>> failed;
  std::vector<Delivery> stranded;
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    const auto limit = now - std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(heartbeat_timeout_s_));
    for (auto it = workers_.begin(); it != workers_.end();) {
      auto next = std::next(it);
      std::string reason;
      if (it->second.last_seen < limit)
        reason =
            "no heartbeat for " + std::to_string(static_cast<int>(heartbeat_timeout_s_)) + " s";
      else if (const size_t late = take_overdue(it->second, now, &failed))
        reason = std::to_string(late) + " candidate(s) past their deadline";
      if (!reason.empty()) {
        gone.push_back(it->first);
        Closer close = it->second.close;
        remove(it, reason, &stranded);
        if (close) close(reason, /*refused=*/false);
      }
      it = next;
    }
  }
  // Outside the lock, as complete() does: the job's callback takes its own lock.
  for (auto& [info, p] : failed) {
    rpc::CandidateResult lost;
    lost.set_id(p.candidate.id());
    lost.set_error_kind(std::string(to_string(ErrorKind::kWorkerLost)));
    lost.set_error_message("no answer within the candidate's deadline on " +
                           std::to_string(p.missed) + " workers (" + p.missed_on + ")");
    p.done(info, std::move(lost));
  }
  for (Delivery& d : stranded) d.done(d.worker, std::move(d.result));
  return gone;
}

size_t DevicePool::take_overdue(Worker& w, Clock::time_point now,
                                std::vector<std::pair<WorkerInfo, Pending>>* failed) {
  size_t late = 0;
  for (auto c = w.in_flight.begin(); c != w.in_flight.end();) {
    Pending& p = c->second;
    if (p.deadline >= now) {
      ++c;
      continue;
    }
    ++late;
    ++p.missed;
    p.missed_on += (p.missed_on.empty() ? "" : ", ") + w.info.worker_id;
    auto job = jobs_.find(p.job_id);
    if (p.missed < kDeadlineAttempts || job == jobs_.end()) {
      ++c;  // requeued by remove() (or dropped there when its job ended)
      continue;
    }
    spdlog::warn("candidate {} of job {} failed: no answer within its deadline on {}",
                 p.candidate.id(), p.job_id, p.missed_on);
    --job->second.in_flight;
    failed->emplace_back(w.info, std::move(p));
    c = w.in_flight.erase(c);
  }
  relist(w);
  return late;
}

void DevicePool::flag(const std::string& worker_id, const std::string& reason) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  ++it->second.info.refused;
  it->second.info.flagged = reason;
}

void DevicePool::open_job(uint64_t job_id, const std::string& key, int priority) {
  std::lock_guard lock(mu_);
  Job& job = jobs_[job_id];
  job.key = key;
  job.priority = std::max(priority, 1);
  // A job that joins starts level with the busiest of its key, so it neither waits behind the
  // others' history nor bursts ahead of them.
  double floor = std::numeric_limits<double>::max();
  for (const auto& [id, other] : jobs_)
    if (id != job_id && other.key == key) floor = std::min(floor, other.pass);
  if (floor != std::numeric_limits<double>::max()) job.pass = std::max(job.pass, floor);
}

void DevicePool::close_job(uint64_t job_id) {
  std::lock_guard lock(mu_);
  jobs_.erase(job_id);
}

void DevicePool::submit(uint64_t job_id, rpc::Candidate candidate, ResultCallback done) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end())
    throw Error(ErrorKind::kInternal,
                "candidate for job " + std::to_string(job_id) + " that is not open");
  candidate.set_id(next_candidate_++);
  Pending p;
  p.job_id = job_id;
  p.candidate = std::move(candidate);
  p.done = std::move(done);
  p.queued_at = Clock::now();
  it->second.queue.push_back(std::move(p));
  dispatch(it->second.key);
}

DevicePool::Job* DevicePool::next_job(const Worker& w, uint64_t* job_id, size_t* at, bool* any) {
  Job* best = nullptr;
  *any = false;
  for (auto& [id, job] : jobs_) {
    if (job.key != w.info.key || job.queue.empty()) continue;
    *any = true;
    if (best != nullptr && job.pass >= best->pass) continue;
    // A device that cannot build only takes candidates that come with their kernel; none takes
    // one it answered kUnsupported (those wait at the front for the key's other workers).
    size_t i = 0;
    while (i < job.queue.size() && job.queue[i].unsupported_on.count(w.info.worker_id)) ++i;
    if (i == job.queue.size() || (!w.info.can_build && job.queue[i].candidate.artifact().empty()))
      continue;
    best = &job;
    *job_id = id;
    *at = i;
  }
  return best;
}

bool DevicePool::another_may_run(const std::string& key, const Pending& p) const {
  for (const auto& [id, w] : workers_)
    if (w.info.key == key && !p.unsupported_on.count(id)) return true;
  return false;
}

void DevicePool::dispatch(const std::string& key) {
  FreeList& free = free_[key];
  // The least loaded worker that a queued candidate fits goes first. A worker that cannot build
  // skips candidates without a kernel, and every worker those it answered kUnsupported; when
  // nothing is queued for the key, the pass ends.
  for (auto it = free.begin(); it != free.end();) {
    Worker* w = std::get<2>(*it);
    uint64_t job_id = 0;
    size_t at = 0;
    bool any = false;
    Job* job = next_job(*w, &job_id, &at, &any);
    if (job == nullptr) {
      if (!any) return;  // nothing queued for the key at all
      ++it;
      continue;
    }
    Pending p = std::move(job->queue[at]);
    job->queue.erase(job->queue.begin() + static_cast<std::ptrdiff_t>(at));
    job->pass += 1.0 / job->priority;
    ++job->in_flight;
    if (metrics_)
      metrics_->queue_wait(key, std::chrono::duration<double>(Clock::now() - p.queued_at).count());
    const uint64_t id = p.candidate.id();
    // The worker measures what it holds before (or beside) this one: their budgets count too.
    double budget = deadline_margin_s_ + budget_s(p.candidate);
    for (const auto& [held, q] : w->in_flight) budget += budget_s(q.candidate);
    p.deadline = Clock::now() +
                 std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget));
    w->send(p.candidate);
    w->in_flight.emplace(id, std::move(p));
    relist(*w);
    it = free.begin();  // relist moved (or removed) this worker
  }
}

std::vector<WorkerInfo> DevicePool::workers() const {
  std::lock_guard lock(mu_);
  std::vector<WorkerInfo> out;
  for (const auto& [id, w] : workers_) {
    WorkerInfo info = w.info;
    info.in_flight = static_cast<int>(w.in_flight.size());
    out.push_back(std::move(info));
  }
  return out;
}

int DevicePool::workers_of(const std::string& key) const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& [id, w] : workers_) n += w.info.key == key;
  return n;
}

bool DevicePool::needs_kernels(const std::string& key) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, w] : workers_)
    if (w.info.key == key && !w.info.can_build) return true;
  return false;
}

bool DevicePool::all_emulated(const std::string& key) const {
  std::lock_guard lock(mu_);
  bool any = false;
  for (const auto& [id, w] : workers_) {
    if (w.info.key != key) continue;
    if (!w.info.emulated) return false;
    any = true;
  }
  return any;
}

std::map<std::string, size_t> DevicePool::queued() const {
  std::lock_guard lock(mu_);
  std::map<std::string, size_t> out;
  for (const auto& [id, job] : jobs_) out[job.key] += job.queue.size();
  return out;
}

int DevicePool::measuring(uint64_t job_id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? 0 : it->second.in_flight;
}

std::optional<WorkerInfo> DevicePool::wait_for_worker(const std::string& key,
                                                      const std::function<bool()>& stop) const {
  std::unique_lock lock(mu_);
  for (;;) {
    for (const auto& [id, w] : workers_)
      if (w.info.key == key) return w.info;
    if (stop && stop()) return std::nullopt;
    attached_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

}  // namespace ktune::rpc_runner
