// The tuning service on gRPC's callback API: worker streams feed the DevicePool, clients reach the
// JobManager and the log. Every call is authorized by its role's token first; a client's job
// calls see its own jobs only.
#include "rpc_runner/server/tuning_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <type_traits>

#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "rpc_runner/protocol/credentials.h"
#include "rpc_runner/protocol/grpc_log.h"
#include "rpc_runner/protocol/ktune.grpc.pb.h"
#include "rpc_runner/protocol/peer_checks.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/server/device_calibration.h"
#include "rpc_runner/server/device_pool.h"
#include "rpc_runner/server/job_manager.h"
#include "rpc_runner/server/rate_limiter.h"
#include "rpc_runner/server/server_metrics.h"
#include "support/error.h"
#include "support/version.h"
#include "tuning_db/database.h"
#include "tuning_db/log_lock.h"
#include "tuning_db/sql.h"
#include "tuning_db/toolchain_preference.h"

namespace ktune::rpc_runner {
namespace {

// Records per ExportLog message, and the bytes a message holds at the most: a log may hold
// records of any size (older servers kept error text uncut), and a message must stay far under
// the message limit.
constexpr size_t kExportChunk = 500;
constexpr size_t kExportChunkBytes = size_t{4} << 20;
// What a line costs in a RecordLines message besides its bytes: its tag and length.
constexpr size_t kLineOverheadBytes = 16;

// `line` as an export sends it: a record over the chunk bound (its error text is the only part
// that grows) has its error text cut as a worker's is. Throws Error(kUnsupported) when it is
// still over.
std::string export_line(std::string line) {
  if (line.size() + kLineOverheadBytes <= kExportChunkBytes) return line;
  tuning_db::Record record = tuning_db::from_json_line(line);
  record.error_message = clean_text(record.error_message, kMaxErrorTextBytes);
  line = tuning_db::to_json_line(record);
  if (line.size() + kLineOverheadBytes > kExportChunkBytes)
    throw Error(ErrorKind::kUnsupported, "a record of " + std::to_string(line.size()) +
                                             " bytes is over the export's chunk of " +
                                             std::to_string(kExportChunkBytes) + " bytes");
  return line;
}

// A call refused with a status that no ktune::Error kind maps to (a rate limit).
class Refused : public std::exception {
 public:
  explicit Refused(grpc::Status status)
      : status_(std::move(status)), message_(status_.error_message()) {}
  // grpc::Status::error_message() returns a copy: what() points into one that lives as long.
  const char* what() const noexcept override { return message_.c_str(); }
  const grpc::Status& status() const { return status_; }

 private:
  grpc::Status status_;
  std::string message_;
};

grpc::Status to_status(const std::exception& e) {
  if (const auto* refused = dynamic_cast<const Refused*>(&e)) return refused->status();
  if (const auto* err = dynamic_cast<const Error*>(&e)) {
    switch (err->kind()) {
      case ErrorKind::kInvalidArgument:
        return {grpc::StatusCode::INVALID_ARGUMENT, err->what()};
      case ErrorKind::kNotFound:
        return {grpc::StatusCode::NOT_FOUND, err->what()};
      case ErrorKind::kUnsupported:
        return {grpc::StatusCode::FAILED_PRECONDITION, err->what()};
      default:
        break;
    }
  }
  return {grpc::StatusCode::INTERNAL, e.what()};
}

// The outgoing side of a stream: at most one write in flight (gRPC's rule), the rest queued;
// finish() sends the status after the queued messages. Never blocks.
template <class Base, class Message>
class Outbox : public Base {
 public:
  void send(Message message) {
    std::lock_guard lock(out_mu_);
    if (finishing_) return;
    queue_.push_back(std::move(message));
    if (!writing_) {
      writing_ = true;
      this->StartWrite(&queue_.front());  // deque references survive push_back
    }
  }

  void finish(grpc::Status status) {
    std::lock_guard lock(out_mu_);
    if (finishing_) return;
    finishing_ = true;
    if (writing_) {
      final_ = std::move(status);
      return;
    }
    this->Finish(std::move(status));
  }

  // A call cancelled by its peer or by the server's shutdown must still finish, or the server
  // waits for it forever.
  void OnCancel() override { finish(grpc::Status::CANCELLED); }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(out_mu_);
    queue_.pop_front();
    if (!ok) queue_.clear();  // the stream is broken
    if (!queue_.empty()) {
      this->StartWrite(&queue_.front());
      return;
    }
    writing_ = false;
    if (final_) {
      this->Finish(std::move(*final_));
    } else if (!ok && finishing_ == false) {
      finishing_ = true;
      this->Finish(grpc::Status::CANCELLED);
    }
  }

 private:
  std::mutex out_mu_;
  std::deque<Message> queue_;
  bool writing_ = false;
  bool finishing_ = false;
  std::optional<grpc::Status> final_;
};

using WorkerStream =
    Outbox<grpc::ServerBidiReactor<rpc::WorkerMessage, rpc::ServerToWorker>, rpc::ServerToWorker>;

// One device worker's stream: hello -> registered in the pool; results and heartbeats after.
class AttachReactor final : public WorkerStream {
 public:
  AttachReactor(DevicePool& pool, DeviceCalibration& calibration, std::string peer,
                double heartbeat_s, std::optional<grpc::Status> refused)
      : pool_(pool), calibration_(calibration), peer_(std::move(peer)), heartbeat_s_(heartbeat_s) {
    if (refused) {
      finish(*refused);
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the worker went away (or was cancelled)
      leave("stream ended");
      finish(grpc::Status::OK);
      return;
    }
    if (worker_id_.empty()) {
      if (!hello()) return;
    } else if (in_.has_result()) {
      if (!pool_.complete(worker_id_, std::move(*in_.mutable_result())))
        spdlog::debug("worker {}: dropped a result for a candidate it no longer holds", worker_id_);
    } else {
      pool_.touch(worker_id_);
    }
    StartRead(&in_);
  }

  void OnDone() override {
    leave("stream done");
    delete this;
  }

 private:
  // Registers the worker from its hello. Returns false (stream finished) when refused.
  bool hello() {
    if (!in_.has_hello()) {
      finish({grpc::StatusCode::INVALID_ARGUMENT,
              "a worker's first message must be its hello (key, target)"});
      return false;
    }
    const rpc::WorkerHello& h = in_.hello();
    if (h.protocol_version() != kProtocolVersion) {
      const std::string message = "protocol version mismatch: the worker speaks version " +
                                  std::to_string(h.protocol_version()) + ", this server version " +
                                  std::to_string(kProtocolVersion);
      spdlog::warn("refused worker from {}: {}", peer_, message);
      finish({grpc::StatusCode::FAILED_PRECONDITION, message});
      return false;
    }
    if (const std::string bad = check_hello(h); !bad.empty()) {
      spdlog::warn("refused worker from {}: {}", peer_, bad);
      finish({grpc::StatusCode::INVALID_ARGUMENT, "refused hello: " + bad});
      return false;
    }
    // The device names itself as it can (a board without LLVM cannot know LLVM's canonical
    // form); this server's compiler canonicalizes, and the answer tells the device its name.
    std::optional<codegen::Target> target;
    try {
      target = codegen::Target::parse(h.target());
    } catch (const std::exception& e) {
      const std::string message =
          "this server cannot build for the worker's target '" + h.target() + "': " + e.what();
      spdlog::warn("refused worker from {}: {}", peer_, message);
      finish({grpc::StatusCode::INVALID_ARGUMENT, message});
      return false;
    }
    WorkerInfo info;
    info.key = h.key();
    info.target = target->str();
    info.cores = std::max(h.cores(), 1);
    info.vector_bits = h.vector_bits() > 0 ? h.vector_bits() : target->vector_bits();
    info.emulated = h.emulated();
    info.slots = std::max(h.slots(), 1);
    info.can_build = h.can_build();
    info.peak_gflops = h.peak_gflops();
    info.description = clean_text(h.description(), kMaxDescriptionBytes);
    info.peer = peer_;
    std::lock_guard lock(id_mu_);
    worker_id_ = pool_.attach(
        info,
        [this](const rpc::Candidate& c) {
          rpc::ServerToWorker m;
          *m.mutable_candidate() = c;
          send(std::move(m));
        },
        [this](const std::string& reason, bool refused) {
          if (refused)
            finish({grpc::StatusCode::INVALID_ARGUMENT, reason});
          else
            finish({grpc::StatusCode::UNAVAILABLE, "taken for lost: " + reason});
        });
    rpc::ServerToWorker ack;
    ack.mutable_attached()->set_worker_id(worker_id_);
    ack.mutable_attached()->set_heartbeat_s(heartbeat_s_);
    ack.mutable_attached()->set_target(info.target);
    send(std::move(ack));
    spdlog::info("worker {} attached: key {}, target '{}', {} cores, {} slots{}, from {}",
                 worker_id_, info.key, info.target, info.cores, info.slots,
                 info.emulated ? ", emulated" : "", peer_);
    // No job's candidate before its calibration sets the ceiling of its results.
    info.worker_id = worker_id_;
    calibration_.start(info);
    return true;
  }

  void leave(const std::string& reason) {
    std::lock_guard lock(id_mu_);
    if (worker_id_.empty() || left_) return;
    left_ = true;
    pool_.detach(worker_id_, reason);
  }

  DevicePool& pool_;
  DeviceCalibration& calibration_;
  std::string peer_;
  double heartbeat_s_;
  rpc::WorkerMessage in_;
  std::mutex id_mu_;
  std::string worker_id_;  // set once, by the read side
  bool left_ = false;
};

// A client's view of one job: its events until it ends.
class WatchReactor final : public Outbox<grpc::ServerWriteReactor<rpc::JobEvent>, rpc::JobEvent> {
 public:
  WatchReactor(JobManager& jobs, uint64_t id, std::optional<grpc::Status> refused)
      : jobs_(jobs), id_(id) {
    if (refused) {
      finish(*refused);
      return;
    }
    try {
      token_ = jobs_.subscribe(id_, [this](const JobEvent& e) {
        rpc::JobEvent m;
        to_proto(e, &m);
        send(std::move(m));
        if (e.job.finished()) finish(grpc::Status::OK);
      });
    } catch (const std::exception& e) {
      finish(to_status(e));
    }
  }

  void OnDone() override {
    if (token_) jobs_.unsubscribe(id_, *token_);
    delete this;
  }

 private:
  JobManager& jobs_;
  uint64_t id_;
  std::optional<uint64_t> token_;
};

// The log, exported in chunks of JSON lines from one snapshot.
class ExportReactor final
    : public Outbox<grpc::ServerWriteReactor<rpc::RecordLines>, rpc::RecordLines> {
 public:
  ExportReactor(const std::string& db_path, const std::string& workload,
                std::optional<grpc::Status> refused) {
    if (refused) {
      finish(*refused);
      return;
    }
    try {
      auto db = tuning_db::Database::open(db_path, {.read_only = true});
      std::stringstream lines;
      db.export_jsonl(lines, workload);
      rpc::RecordLines chunk;
      size_t bytes = 0;
      for (std::string line; std::getline(lines, line);) {
        line = export_line(std::move(line));
        if (chunk.lines_size() > 0 &&
            (static_cast<size_t>(chunk.lines_size()) == kExportChunk ||
             bytes + line.size() + kLineOverheadBytes > kExportChunkBytes)) {
          send(std::move(chunk));
          chunk.Clear();
          bytes = 0;
        }
        bytes += line.size() + kLineOverheadBytes;
        chunk.add_lines(std::move(line));
      }
      if (chunk.lines_size() > 0) send(std::move(chunk));
      finish(grpc::Status::OK);
    } catch (const std::exception& e) {
      finish(to_status(e));
    }
  }

  void OnDone() override { delete this; }
};

class TuningService final : public rpc::Tuning::CallbackService {
 public:
  TuningService(const TuningServerOptions& options, ServerSecurity security)
      : options_(options),
        security_(std::move(security)),
        submissions_(options.max_jobs_per_minute),
        metrics_([this] { return snapshot(); }),
        pool_(options.worker_timeout_s, options.deadline_margin_s, &metrics_),
        calibration_(pool_, options.calibration_proof_s),
        jobs_(options.db_path, pool_, &metrics_, options.db_retry_s),
        queries_(tuning_db::Database::open(options.db_path,
                                           {.reconnect_for_s = options.db_retry_s,
                                            .stop_waiting = [this] { return closing_.load(); }})),
        reaper_([this] { reap(); }) {}

  ~TuningService() override { stop(); }

  // Stops the metrics endpoint, the jobs and the heartbeat clock. Idempotent.
  void stop() {
    closing_ = true;
    metrics_.stop_serving();
    {
      std::lock_guard lock(reap_mu_);
      stopping_ = true;
    }
    reap_cv_.notify_all();
    if (reaper_.joinable()) reaper_.join();
    jobs_.shutdown();
  }

  DevicePool& pool() { return pool_; }
  JobManager& jobs() { return jobs_; }
  ServerMetrics& metrics() { return metrics_; }
  // Whether jobs can run now: the log takes writes (a fresh connection, so that a probe never
  // waits behind a query; at most 2 s behind a writer) and a worker is attached.
  Readiness readiness() {
    Readiness r;
    r.workers = pool_.workers().size();
    try {
      tuning_db::Database log =
          tuning_db::Database::open(options_.db_path, {.create = false, .busy_timeout_ms = 2000});
      log.check_writable();
    } catch (const std::exception& e) {
      r.log_problem = e.what();
    }
    return r;
  }

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context,
                                 const rpc::PingRequest* request, rpc::PingReply* reply) override {
    return unary(context, "Ping", [&] {
      reply->set_payload(request->payload());
      reply->set_server_version(std::string("ktune ") + kVersion);
      reply->set_protocol_version(kProtocolVersion);
    });
  }

  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const rpc::ListDevicesRequest*,
                                        rpc::ListDevicesReply* reply) override {
    return unary(context, "ListDevices", [&] {
      for (const WorkerInfo& w : pool_.workers()) to_proto(w, reply->add_devices());
    });
  }

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const rpc::JobSpec* request, rpc::JobInfo* reply) override {
    return unary(context, "SubmitJob", [&](const Caller& caller) {
      limit_submissions(caller);
      if (request->protocol_version() != kProtocolVersion)
        throw Error(ErrorKind::kUnsupported,
                    "protocol version mismatch: the client speaks version " +
                        std::to_string(request->protocol_version()) + ", this server version " +
                        std::to_string(kProtocolVersion));
      JobSpec spec = from_proto(*request);
      if (spec.owner.empty()) spec.owner = context->peer();
      to_proto(jobs_.submit(spec, caller.name), reply);
    });
  }

  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const rpc::ListJobsRequest* request,
                                     rpc::ListJobsReply* reply) override {
    return unary(context, "ListJobs", [&](const Caller& caller) {
      // A page in id order: a log of many jobs never makes a reply past gRPC's message size.
      const int limit = static_cast<int>(
          request->limit() == 0 ? kMaxJobsPage : std::min<size_t>(request->limit(), kMaxJobsPage));
      for (const JobStatus& s : jobs_.list(request->all())) {
        if (s.id <= request->after_id() || !(caller.admin || s.client == caller.name)) continue;
        if (reply->jobs_size() == limit) {
          reply->set_more(true);
          break;
        }
        to_proto(s, reply->add_jobs());
      }
    });
  }

  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const rpc::JobRef* request, rpc::JobInfo* reply) override {
    return unary(context, "CancelJob", [&](const Caller& caller) {
      const JobStatus job = visible_job(caller, request->id(), "CancelJob");
      // The admin's hand on another client's job: the log and the job's message say who did it.
      const bool admins = caller.admin && job.client != caller.name;
      if (admins && !caller.name.empty())
        spdlog::info("{} cancels job {} of {}", caller.label(), job.id,
                     job.client.empty() ? "no named client" : "client " + job.client);
      to_proto(jobs_.cancel(request->id(), admins ? "the admin" : "its client"), reply);
    });
  }

  grpc::ServerUnaryReactor* QueryBest(grpc::CallbackServerContext* context,
                                      const rpc::BestRequest* request,
                                      rpc::RecordLines* reply) override {
    return unary(context, "QueryBest", [&] {
      if (request->target().empty())
        throw Error(ErrorKind::kInvalidArgument, "QueryBest needs a target");
      const int64_t k = std::clamp<int64_t>(request->k(), 1, 1000);
      std::lock_guard lock(queries_mu_);
      // This server's toolchain first, as a local look-up; else any (a config stays valid across
      // LLVM versions; the record says which one, and the client warns when it is not its own).
      tuning_db::RecordQuery query;
      query.device_key = request->device_key();
      query.include_emulated = request->include_emulated();
      for (const auto& r : tuning_db::top_k_preferring_toolchain(queries_, request->workload_key(),
                                                                 request->target(),
                                                                 codegen::llvm_version(), k, query))
        reply->add_lines(tuning_db::to_json_line(r));
    });
  }

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const rpc::StatusRequest* request,
                                   rpc::StatusReply* reply) override {
    return unary(context, "Status", [&] {
      reply->set_server_version(std::string("ktune ") + kVersion);
      reply->set_protocol_version(kProtocolVersion);
      reply->set_uptime_s(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
      reply->set_metrics(metrics_.text());
      for (const WorkerInfo& w : pool_.workers()) to_proto(w, reply->add_devices());
      if (!request->device_key().empty()) {
        std::lock_guard lock(queries_mu_);
        reply->set_recorded_target(queries_.device_target(request->device_key()).value_or(""));
      }
    });
  }

  grpc::ServerWriteReactor<rpc::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                    const rpc::JobRef* request) override {
    Caller caller;
    std::optional<grpc::Status> refused = refusal(*context, Role::kClient, "WatchJob", &caller);
    if (!refused) {
      try {
        visible_job(caller, request->id(), "WatchJob");
      } catch (const std::exception& e) {
        refused = to_status(e);
      }
    }
    return new WatchReactor(jobs_, request->id(), std::move(refused));
  }

  grpc::ServerWriteReactor<rpc::RecordLines>* ExportLog(
      grpc::CallbackServerContext* context, const rpc::ExportRequest* request) override {
    return new ExportReactor(options_.db_path, request->workload_key(),
                             refusal(*context, Role::kClient, "ExportLog"));
  }

  grpc::ServerBidiReactor<rpc::WorkerMessage, rpc::ServerToWorker>* Attach(
      grpc::CallbackServerContext* context) override {
    return new AttachReactor(pool_, calibration_, context->peer(), options_.heartbeat_s,
                             refusal(*context, Role::kWorker, "Attach"));
  }

 private:
  std::optional<grpc::Status> refusal(const grpc::CallbackServerContext& context, Role role,
                                      std::string_view rpc, Caller* caller = nullptr) {
    grpc::Status status = authorize(context, role, security_, rpc, caller);
    if (status.ok()) return std::nullopt;
    return status;
  }

  // Returns the job when the caller may see it (its own, or any for the admin). Throws
  // unknown_job for an unknown id and, after a log line naming the caller, for another client's
  // job, alike: an id tells a client nothing of others' jobs.
  JobStatus visible_job(const Caller& caller, uint64_t id, std::string_view rpc) {
    std::optional<JobStatus> job = jobs_.status(id);
    if (job && (caller.admin || job->client == caller.name)) return *job;
    if (job)
      spdlog::warn("refused {} of job {} from {}: the job is {}'s", rpc, id, caller.label(),
                   job->client.empty() ? "no named client" : "client " + job->client);
    throw unknown_job(id);
  }

  // Throws Refused (RESOURCE_EXHAUSTED) when the caller is over its submissions a minute, after
  // a log line naming it. Callers without a name are told apart by their address.
  void limit_submissions(const Caller& caller) {
    const std::string key =
        caller.name.empty() ? caller.peer.substr(0, caller.peer.rfind(':')) : caller.name;
    const double wait_s = submissions_.take(key);
    if (wait_s <= 0) return;
    const std::string message = "too many job submissions: at most " +
                                std::to_string(submissions_.per_minute()) +
                                " a minute per client; the next one in " +
                                std::to_string(static_cast<int>(wait_s) + 1) + " s";
    spdlog::warn("refused SubmitJob from {}: {}", caller.label(), message);
    throw Refused({grpc::StatusCode::RESOURCE_EXHAUSTED, message});
  }

  // Authorizes a client call, runs body (with the caller when it takes one), turns its exception
  // into a status.
  template <class Body>
  grpc::ServerUnaryReactor* unary(grpc::CallbackServerContext* context, std::string_view rpc,
                                  Body&& body) {
    auto* reactor = context->DefaultReactor();
    Caller caller;
    if (auto refused = refusal(*context, Role::kClient, rpc, &caller)) {
      reactor->Finish(*refused);
      return reactor;
    }
    try {
      if constexpr (std::is_invocable_v<Body, const Caller&>)
        body(caller);
      else
        body();
      reactor->Finish(grpc::Status::OK);
    } catch (const std::exception& e) {
      reactor->Finish(to_status(e));
    }
    return reactor;
  }

  // What the metrics' gauges show now.
  FleetSnapshot snapshot() { return {pool_.workers(), pool_.queued(), jobs_.list(true)}; }

  // Detaches silent workers (their candidates go back to the queue) every twentieth of the worker
  // timeout (at most once a second): a lost worker's candidates are requeued at most 5% after
  // the timeout, not a whole tick later.
  void reap() {
    const auto tick =
        std::chrono::duration<double>(std::clamp(options_.worker_timeout_s / 20, 0.01, 1.0));
    std::unique_lock lock(reap_mu_);
    while (!stopping_) {
      reap_cv_.wait_for(lock, tick);
      if (stopping_) break;
      lock.unlock();
      pool_.expire();
      lock.lock();
    }
  }

  TuningServerOptions options_;
  ServerSecurity security_;
  RateLimiter submissions_;  // SubmitJob, per client
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  ServerMetrics metrics_;  // before pool_ and jobs_, which feed it
  DevicePool pool_;
  DeviceCalibration calibration_;  // after pool_, which it sends to
  JobManager jobs_;
  // Set by stop(): a query waiting for a PostgreSQL log that went away stops waiting.
  std::atomic<bool> closing_{false};
  std::mutex queries_mu_;
  tuning_db::Database queries_;  // guarded by queries_mu_
  std::mutex reap_mu_;
  std::condition_variable reap_cv_;
  bool stopping_ = false;  // guarded by reap_mu_
  std::thread reaper_;
};

bool every_interface(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host == "[::]" || host.empty();
}

}  // namespace

struct TuningServer::Impl {
  // First, so it is released last: held while anything of this server may touch the log.
  std::optional<tuning_db::LogLock> log_lock;
  std::unique_ptr<TuningService> service;
  std::unique_ptr<grpc::Server> server;
  std::string host;
  int port = 0;
  std::mutex shutdown_mu;
  bool shut_down = false;
};

TuningServer::TuningServer(const TuningServerOptions& options) : impl_(std::make_unique<Impl>()) {
  route_grpc_log();
  if (options.port < 0 || options.port > 65535)
    throw Error(ErrorKind::kInvalidArgument, "port out of range: " + std::to_string(options.port));
  if (!(options.heartbeat_s > 0) || !(options.worker_timeout_s > options.heartbeat_s))
    throw Error(ErrorKind::kInvalidArgument,
                "the worker timeout must exceed the heartbeat interval");
  if (!(options.deadline_margin_s >= 0) || !(options.deadline_margin_s <= 86400))
    throw Error(ErrorKind::kInvalidArgument, "the deadline margin must be 0 to 86400 s");
  if (!(options.calibration_proof_s >= 0) || !(options.calibration_proof_s <= 60))
    throw Error(ErrorKind::kInvalidArgument, "the calibration proof must be 0 to 60 s");
  if (options.max_jobs_per_minute < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "the job submissions a minute must be 0 (no limit) or more");
  ServerSecurity security =
      load_server_security(options.token_file, options.tls_cert_file, options.tls_key_file,
                           options.allow_readable_token);
  if (every_interface(options.host) && !security.authenticates())
    spdlog::warn(
        "listening on every interface without a token: anyone who reaches port {} can attach a "
        "device "
        "or submit jobs (use --token-file)",
        options.port);
  impl_->host = options.host;
  // A log this start creates goes again if the start fails below (a metrics port or the port in
  // use): the user's next try is not handed an empty log and its lock.
  const bool new_log = !tuning_db::log_exists(options.db_path);
  // One server per log: a second one would run the same unfinished jobs again.
  impl_->log_lock.emplace(options.db_path);
  const bool with_tokens = security.authenticates();
  const std::string nameless_client_line = security.nameless_client_line;
  auto credentials = server_credentials(security);
  impl_->service = std::make_unique<TuningService>(options, std::move(security));
  // Before the gRPC port: a metrics port in use stops the start with nothing else listening.
  const auto abandon = [&] {
    impl_->server.reset();
    impl_->service.reset();
    impl_->log_lock.reset();
    if (new_log) {
      std::error_code ignored;
      for (const char* suffix : {"", "-wal", "-shm"})
        std::filesystem::remove(options.db_path + suffix, ignored);
      std::filesystem::remove(tuning_db::LogLock::path_of(options.db_path), ignored);
    }
  };
  try {
    if (options.metrics_port >= 0)
      impl_->service->metrics().serve(
          every_interface(options.host) ? "0.0.0.0" : options.host, options.metrics_port,
          [service = impl_->service.get()] { return service->readiness(); });
  } catch (const Error&) {
    abandon();
    throw;
  }
  // Both register themselves with every server built after these calls.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.host + ":" + std::to_string(options.port), credentials,
                           &impl_->port);
  // gRPC binds with SO_REUSEPORT by default: a second server on a port in use would start and
  // the kernel would split the connections between two logs. Refused instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Pings find a worker whose machine vanished without closing its connection.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Workers and clients ping every 10 s for the same reason; accept that rate.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  // Deliberate limits: a candidate or a chunk of records is far smaller; anything larger is
  // refused by gRPC before it reaches ktune.
  builder.SetMaxReceiveMessageSize(options.max_message_mib << 20);
  builder.SetMaxSendMessageSize(options.max_message_mib << 20);
  builder.RegisterService(impl_->service.get());
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0) {
    abandon();
    throw Error(ErrorKind::kIo, "cannot listen on " + options.host + ":" +
                                    std::to_string(options.port) +
                                    " (in use by another process, or not an address here)");
  }
  const size_t resumed = impl_->service->jobs().resume_unfinished();
  spdlog::info("tuning server on {}:{} (log {}, {}, {}); {} unfinished job(s) resumed",
               options.host, impl_->port, tuning_db::sql::shown_location(options.db_path),
               with_tokens ? "tokens required" : "no tokens",
               options.tls_cert_file.empty() ? "plaintext" : "TLS", resumed);
  // Once started: a start that fails says one thing, its error.
  if (!nameless_client_line.empty())
    spdlog::warn(
        "{}: a 'client:' line without a name holds the admin's token: whoever has it sees and "
        "cancels every job; give each client 'client NAME: TOKEN' and the admin 'admin: TOKEN'",
        nameless_client_line);
}

TuningServer::~TuningServer() { shutdown(); }

int TuningServer::port() const { return impl_->port; }

std::string TuningServer::address() const {
  return impl_->host + ":" + std::to_string(impl_->port);
}

int TuningServer::metrics_port() const { return impl_->service->metrics().port(); }

std::vector<DeviceInfo> TuningServer::devices() const {
  std::vector<DeviceInfo> out;
  for (const WorkerInfo& w : impl_->service->pool().workers()) {
    rpc::Device d;
    to_proto(w, &d);
    out.push_back(from_proto(d));
  }
  return out;
}

void TuningServer::shutdown() {
  std::lock_guard lock(impl_->shutdown_mu);
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  // Health checkers see the server go before its streams end.
  if (auto* health = impl_->server->GetHealthCheckService()) health->Shutdown();
  impl_->service->stop();
  // Open streams (workers, watchers) are cancelled after this grace period.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  impl_->server->Wait();
}

}  // namespace ktune::rpc_runner
