// Defines DevicePool: a tuning server's attached device workers and the fair queue of candidates
// they measure.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "rpc_runner/protocol/job_types.h"
#include "rpc_runner/protocol/ktune.pb.h"

namespace ktune::rpc_runner {

class ServerMetrics;

// Called once per candidate with the worker that measured it and its result. Runs on a server
// thread without the pool's lock held; must not block.
using ResultCallback = std::function<void(const WorkerInfo& worker, rpc::CandidateResult result)>;

// The fleet of one server. Workers attach with a key; jobs open a queue on a key and submit
// candidates; a worker with a free slot gets the next candidate of the key's jobs chosen by
// stride scheduling (each job advances by 1/priority per candidate dispatched, the job that is
// furthest behind goes next), so no job starves and a job of priority 2 gets twice the share of
// one of priority 1. A worker that detaches (stream broken, heartbeat timeout) hands its
// in-flight candidates back to the front of their jobs' queues; a result that arrives from a
// worker for a candidate it no longer holds is dropped, so each candidate completes once.
// Candidates wait for a worker for as long as it takes: time in the queue is never a timeout.
// Once sent, a candidate has a deadline: its build and run timeouts, plus those of the candidates
// the worker holds ahead of it, plus a margin. A worker that lets one pass (it heartbeats but
// never answers) is detached like a silent one; the late candidate goes to another worker, and
// after kDeadlineAttempts deadlines missed it fails as kWorkerLost. A worker that answers a
// candidate kUnsupported (it cannot run its target or kernel) speaks for itself, not for the key:
// the candidate goes back to the front of its queue for the key's other workers, and its result
// is that answer only once every worker of the key attached then has given it. A worker whose
// results are refused is flagged (flag()), which workers() shows. A worker takes no job's
// candidate before its calibration (send_direct(), then calibrated()) sets the peak its results
// are bounded by (peer_checks.h).
// Thread-safe. Lock order: the pool's lock, then whatever a Sender or closer takes.
class DevicePool {
 public:
  // Writes a candidate to the worker's stream; must not block (queue it).
  using Sender = std::function<void(const rpc::Candidate&)>;
  // Ends the worker's stream with the reason: `refused` (its calibration) or taken for lost; must
  // not block.
  using Closer = std::function<void(const std::string& reason, bool refused)>;

  // Deadlines a candidate may miss (on as many workers) before it fails as kWorkerLost.
  static constexpr int kDeadlineAttempts = 3;

  // heartbeat_timeout_s: a worker silent for longer is detached by expire(). deadline_margin_s:
  // added to every candidate's deadline (TuningServerOptions::deadline_margin_s says why).
  // metrics (may be null; must outlive the pool) gets each dispatched candidate's time in the
  // queue.
  explicit DevicePool(double heartbeat_timeout_s = 15, double deadline_margin_s = 150,
                      ServerMetrics* metrics = nullptr);

  // Registers a worker (info.worker_id is assigned); returns its id. It takes job candidates once
  // calibrated().
  std::string attach(WorkerInfo info, Sender send, Closer close);
  // Sends a candidate of no job straight to the worker (its calibration), with a deadline as a
  // job's candidate has; `done` gets its result. Unknown ids are ignored. A worker that lets the
  // deadline pass or detaches first never answers: `done` is not called.
  void send_direct(const std::string& worker_id, rpc::Candidate candidate, ResultCallback done);
  // Sets the worker's calibration (GFLOP/s on one thread and on all, and what the server found
  // odd, "" = nothing); candidates waiting for the key are dispatched to it at once. Unknown ids
  // are ignored.
  void calibrated(const std::string& worker_id, double core_gflops, double all_gflops,
                  const std::string& note);
  // Detaches the worker and closes its stream with `reason` (a refused calibration).
  void refuse(const std::string& worker_id, const std::string& reason);
  // Removes the worker and requeues its in-flight candidates. Unknown ids are ignored.
  void detach(const std::string& worker_id, const std::string& reason);
  // Notes that the worker is alive (any message counts).
  void touch(const std::string& worker_id);
  // Delivers a worker's result. Returns false (and drops it) when that worker does not hold
  // the candidate (it was requeued after the worker was taken for lost, or the job ended). A
  // kUnsupported answer is requeued while another worker of the key has not given it (true).
  bool complete(const std::string& worker_id, rpc::CandidateResult result);
  // Detaches every worker silent for longer than the heartbeat timeout or holding a candidate
  // past its deadline (and closes its stream); fails the candidates out of attempts. Returns
  // the ids of the workers detached.
  std::vector<std::string> expire();
  // Notes that a result of the worker was refused, and why. Unknown ids are ignored.
  void flag(const std::string& worker_id, const std::string& reason);

  // Opens (or re-opens with a new priority) a job's queue on a key. priority >= 1.
  void open_job(uint64_t job_id, const std::string& key, int priority);
  // Drops the job's queued candidates; results of its in-flight ones are dropped on arrival.
  void close_job(uint64_t job_id);
  // Queues a candidate of an open job (its id is assigned here); `done` gets its result.
  // Throws Error(kInternal) for a job that is not open.
  void submit(uint64_t job_id, rpc::Candidate candidate, ResultCallback done);

  // Every attached worker with its in-flight count and results served, by worker id.
  std::vector<WorkerInfo> workers() const;
  // Workers attached with this key.
  int workers_of(const std::string& key) const;
  // Whether a worker of the key that cannot build is attached (its candidates need kernels).
  bool needs_kernels(const std::string& key) const;
  // Whether workers of the key are attached and every one of them is emulated (a job on them
  // resumes from and learns from emulated records only).
  bool all_emulated(const std::string& key) const;
  // Candidates waiting for a worker, by key: every key of an open job (0 when none wait).
  std::map<std::string, size_t> queued() const;
  // Candidates of the job on workers now.
  int measuring(uint64_t job_id) const;
  // Waits until a worker of the key is attached (returns it) or `stop` returns true (checked
  // every 100 ms; returns nullopt).
  std::optional<WorkerInfo> wait_for_worker(const std::string& key,
                                            const std::function<bool()>& stop) const;

 private:
  using Clock = std::chrono::steady_clock;
  // The job id of a candidate sent by send_direct (job ids start at 1).
  static constexpr uint64_t kNoJob = 0;
  struct Pending {
    uint64_t job_id = kNoJob;
    rpc::Candidate candidate;
    ResultCallback done;
    Clock::time_point queued_at;  // when it (last) joined a queue
    Clock::time_point deadline;   // set when sent to a worker
    std::string missed_on;        // workers that let its deadline pass, e.g. "w2, w5"
    int missed = 0;
    std::set<std::string> unsupported_on;  // workers that answered it kUnsupported
    WorkerInfo unsupported_by;             // the last of them, and its answer
    rpc::CandidateResult unsupported_answer;
  };
  // A result to deliver once the lock is released.
  struct Delivery {
    WorkerInfo worker;
    ResultCallback done;
    rpc::CandidateResult result;
  };
  struct Job {
    std::string key;
    int priority = 1;
    double pass = 0;  // stride scheduling: advanced by 1/priority per dispatched candidate
    std::deque<Pending> queue;
    int in_flight = 0;
  };
  struct Worker {
    WorkerInfo info;
    uint64_t seq = 0;  // attach order: the tie-break among equally loaded workers
    Sender send;
    Closer close;
    std::map<uint64_t, Pending> in_flight;  // by candidate id
    Clock::time_point last_seen;
    bool calibrated = false;  // only then does it take job candidates
    bool listed = false;      // in its key's free list, with load `listed_load`
    size_t listed_load = 0;
  };
  // A key's workers with a free slot, least loaded first: dispatching takes the front, so a batch
  // spreads over the fleet and a result costs a look-up, not a pass over every worker.
  using FreeList = std::set<std::tuple<size_t, uint64_t, Worker*>>;

  // Hands queued candidates of the key to free slots until none fits. Needs mu_.
  void dispatch(const std::string& key);
  // The job of `key` with queued work for worker `w` that is furthest behind, or nullptr, and
  // where in its queue that work is; `any` tells whether the key has queued work at all. Needs
  // mu_.
  Job* next_job(const Worker& w, uint64_t* job_id, size_t* at, bool* any);
  // Whether a worker of `key` is attached that has not answered `p` kUnsupported. Needs mu_.
  bool another_may_run(const std::string& key, const Pending& p) const;
  // Puts the worker in its key's free list at its load, or takes it out when its slots are full
  // or `gone`. Call after every change of its in-flight candidates. Needs mu_.
  void relist(Worker& w, bool gone = false);
  // Removes a worker and requeues its candidates; the queued candidates of its key that every
  // remaining worker has answered kUnsupported go to `stranded` with that answer. Needs mu_.
  void remove(std::map<std::string, Worker>::iterator it, const std::string& reason,
              std::vector<Delivery>* stranded);
  // Counts a missed deadline on each of the worker's late candidates, and moves those out of
  // attempts to `failed` (with the worker's info). Returns how many were late. Needs mu_.
  size_t take_overdue(Worker& w, Clock::time_point now,
                      std::vector<std::pair<WorkerInfo, Pending>>* failed);

  const double heartbeat_timeout_s_;
  const double deadline_margin_s_;
  ServerMetrics* const metrics_;
  mutable std::mutex mu_;
  mutable std::condition_variable attached_cv_;
  std::map<std::string, Worker> workers_;
  std::map<uint64_t, Job> jobs_;
  std::map<std::string, FreeList> free_;  // by key
  uint64_t next_worker_ = 1;
  uint64_t next_candidate_ = 1;
};

}  // namespace ktune::rpc_runner
