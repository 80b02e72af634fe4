// The tuning server: worker registry, device leases and frame forwarding, on gRPC's callback API
// (no thread per stream: every stream is a reactor driven by gRPC's own threads).
#include "rpc_runner/tuning_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "rpc_runner/proto/ktune.grpc.pb.h"
#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

using Clock = std::chrono::steady_clock;

// How often lease timeouts are checked.
constexpr auto kLeaseTick = std::chrono::milliseconds(50);
constexpr double kMaxLeaseTimeoutS = 24 * 3600;

void to_proto(const DeviceInfo& d, rpc::Device* out) {
  out->set_worker_id(d.worker_id);
  out->set_key(d.key);
  out->set_target(d.target);
  out->set_cores(d.cores);
  out->set_description(d.description);
  out->set_leased(d.leased);
  out->set_peer(d.peer);
}

DeviceInfo from_proto(const rpc::Device& d) {
  DeviceInfo out;
  out.worker_id = d.worker_id();
  out.key = d.key();
  out.target = d.target();
  out.cores = d.cores();
  out.description = d.description();
  out.leased = d.leased();
  out.peer = d.peer();
  return out;
}

// A bidirectional stream's outgoing side: at most one write in flight (gRPC's rule), the rest
// queued; finish() sends the status after the queued messages. Reactions never block.
template <class Request>
class OutboxReactor : public grpc::ServerBidiReactor<Request, rpc::ServerMessage> {
 public:
  void send(rpc::ServerMessage message) {
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

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(out_mu_);
    queue_.pop_front();
    if (!ok) queue_.clear();  // the stream is broken; its read side reports it
    if (!queue_.empty()) {
      this->StartWrite(&queue_.front());
      return;
    }
    writing_ = false;
    if (final_) this->Finish(std::move(*final_));
  }

 private:
  std::mutex out_mu_;
  std::deque<rpc::ServerMessage> queue_;
  bool writing_ = false;
  bool finishing_ = false;
  std::optional<grpc::Status> final_;
};

class SessionReactor;
class AttachReactor;

// The registry. Lock order: Registry::mu, then a reactor's outbox lock. Reactor pointers stay
// valid while they are in the registry: a reactor removes itself (under mu) in OnDone.
struct Registry {
  std::mutex mu;
  std::map<std::string, AttachReactor*> workers;  // attached, by worker id
  std::list<SessionReactor*> waiting;             // sessions waiting for a lease, oldest first
  uint64_t next_worker = 1;
  uint64_t next_frame = 1;
  bool shutting_down = false;

  // Leases free workers to waiting sessions, oldest session first. Needs mu.
  void dispatch();
};

class AttachReactor final : public OutboxReactor<rpc::WorkerMessage> {
 public:
  AttachReactor(Registry& registry, std::string peer) : registry_(registry) {
    info.peer = std::move(peer);
    StartRead(&in_);
  }

  // Guarded by Registry::mu once registered.
  DeviceInfo info;
  SessionReactor* leased_by = nullptr;
  uint64_t expected_frame = 0;  // the frame whose reply the session awaits (0 = none)

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  // The worker is gone: leave the registry and end its session. Needs Registry::mu.
  void drop();

  Registry& registry_;
  rpc::WorkerMessage in_;
  bool registered_ = false;  // guarded by Registry::mu
};

class SessionReactor final : public OutboxReactor<rpc::ClientMessage> {
 public:
  SessionReactor(Registry& registry, std::string peer) : registry_(registry), peer_(std::move(peer)) {
    StartRead(&in_);
  }

  // Guarded by Registry::mu.
  std::string key;
  Clock::time_point lease_deadline;
  double lease_timeout_s = 0;
  AttachReactor* worker = nullptr;

  // Binds the session to a free worker and tells the client. Needs Registry::mu.
  void bind(AttachReactor* w) {
    worker = w;
    w->leased_by = this;
    w->expected_frame = 0;
    rpc::ServerMessage opened;
    to_proto(w->info, opened.mutable_session_opened());
    opened.mutable_session_opened()->set_leased(true);
    send(std::move(opened));
    spdlog::info("session from {} leased worker {} (key {})", peer_, w->info.worker_id, key);
  }

  // The leased worker went away. Needs Registry::mu.
  void worker_lost() {
    const bool mid_frame = worker && worker->expected_frame != 0;
    const std::string message = "device lost: worker " + worker->info.worker_id + " (key " + worker->info.key +
                                ") went away" + (mid_frame ? " mid-frame" : "");
    worker = nullptr;
    spdlog::info("session from {} ended: {}", peer_, message);
    finish({grpc::StatusCode::ABORTED, message});
  }

  // Forwards the worker's reply to the client. Needs Registry::mu.
  void deliver(rpc::FrameReply reply) {
    rpc::ServerMessage out;
    *out.mutable_reply() = std::move(reply);
    send(std::move(out));
  }

  void OnReadDone(bool ok) override {
    std::lock_guard lock(registry_.mu);
    if (!ok) {  // the client ended the session (or it was cancelled)
      release();
      finish(grpc::Status::OK);
      return;
    }
    if (!opened_) {
      opened_ = true;
      if (!in_.has_open()) {
        finish({grpc::StatusCode::INVALID_ARGUMENT, "a session's first message must name a device key"});
        return;
      }
      if (registry_.shutting_down) {
        finish({grpc::StatusCode::UNAVAILABLE, "server shutting down"});
        return;
      }
      key = in_.open().device_key();
      lease_timeout_s = std::clamp(in_.open().lease_timeout_s(), 0.0, kMaxLeaseTimeoutS);
      lease_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(lease_timeout_s));
      registry_.waiting.push_back(this);
      registry_.dispatch();
      StartRead(&in_);  // a read stays pending to see the client leave
      return;
    }
    if (!in_.has_frame()) {
      release();
      finish({grpc::StatusCode::INVALID_ARGUMENT, "expected a frame"});
      return;
    }
    if (worker == nullptr) {
      // No lease yet (a client must wait for session_opened) or lost (already finished).
      release();
      finish({grpc::StatusCode::FAILED_PRECONDITION, "no device leased"});
      return;
    }
    if (worker->expected_frame != 0) {
      release();
      finish({grpc::StatusCode::INVALID_ARGUMENT, "one frame at a time"});
      return;
    }
    rpc::ServerMessage out;
    *out.mutable_frame() = std::move(*in_.mutable_frame());
    worker->expected_frame = registry_.next_frame++;
    out.mutable_frame()->set_id(worker->expected_frame);
    worker->send(std::move(out));
    StartRead(&in_);
  }

  void OnDone() override {
    {
      std::lock_guard lock(registry_.mu);
      release();
    }
    delete this;
  }

  // The lease could not be granted in time. Needs Registry::mu.
  void lease_expired(size_t with_key) {
    std::string detail = with_key == 0 ? "none attached" : std::to_string(with_key) + " attached, all leased";
    finish({grpc::StatusCode::RESOURCE_EXHAUSTED, "no free device with key '" + key + "' within " +
                                                      fmt::format("{:g}", lease_timeout_s) + " s (" + detail + ")"});
  }

 private:
  // Leaves the waiting list and frees the worker. Needs Registry::mu.
  void release() {
    registry_.waiting.remove(this);
    if (worker == nullptr) return;
    spdlog::info("session on worker {} ended", worker->info.worker_id);
    worker->leased_by = nullptr;
    worker->expected_frame = 0;  // a late reply to this session's frame is dropped
    worker = nullptr;
    registry_.dispatch();
  }

  Registry& registry_;
  std::string peer_;
  rpc::ClientMessage in_;
  bool opened_ = false;
};

void Registry::dispatch() {
  for (auto it = waiting.begin(); it != waiting.end();) {
    SessionReactor* session = *it;
    AttachReactor* free = nullptr;
    for (auto& [id, w] : workers) {
      if (w->info.key == session->key && w->leased_by == nullptr) {
        free = w;
        break;
      }
    }
    if (free == nullptr) {
      ++it;
      continue;
    }
    it = waiting.erase(it);
    session->bind(free);
  }
}

void AttachReactor::OnReadDone(bool ok) {
  std::lock_guard lock(registry_.mu);
  if (!ok) {
    drop();
    finish(grpc::Status::OK);
    return;
  }
  if (!registered_) {
    if (!in_.has_hello() || in_.hello().key().empty() || in_.hello().target().empty()) {
      finish({grpc::StatusCode::INVALID_ARGUMENT, "a worker's first message must be its hello (key, target)"});
      return;
    }
    if (registry_.shutting_down) {
      finish({grpc::StatusCode::UNAVAILABLE, "server shutting down"});
      return;
    }
    const rpc::WorkerHello& hello = in_.hello();
    info.worker_id = "w" + std::to_string(registry_.next_worker++);
    info.key = hello.key();
    info.target = hello.target();
    info.cores = hello.cores();
    info.description = hello.description();
    rpc::ServerMessage ack;
    to_proto(info, ack.mutable_attached());
    send(std::move(ack));
    registered_ = true;
    registry_.workers[info.worker_id] = this;
    spdlog::info("worker {} attached: key {}, target '{}', {} cores, from {}", info.worker_id, info.key,
                 info.target, info.cores, info.peer);
    registry_.dispatch();
  } else if (in_.has_reply()) {
    if (leased_by != nullptr && in_.reply().id() == expected_frame) {
      expected_frame = 0;
      leased_by->deliver(std::move(*in_.mutable_reply()));
    } else {
      // The reply to a frame of a session that has ended meanwhile.
      spdlog::debug("worker {}: dropped the reply to frame {}", info.worker_id, in_.reply().id());
    }
  }
  StartRead(&in_);
}

void AttachReactor::drop() {
  if (!registered_) return;
  registered_ = false;
  registry_.workers.erase(info.worker_id);
  spdlog::info("worker {} (key {}) detached", info.worker_id, info.key);
  if (leased_by != nullptr) {
    leased_by->worker_lost();
    leased_by = nullptr;
  }
}

void AttachReactor::OnDone() {
  {
    std::lock_guard lock(registry_.mu);
    drop();
  }
  delete this;
}

class TuningService final : public rpc::Tuning::CallbackService {
 public:
  TuningService() : ticker_([this] { tick(); }) {}
  ~TuningService() override { begin_shutdown(); }

  // Fails every waiting session, refuses new ones and stops the lease clock.
  void begin_shutdown() {
    {
      std::lock_guard lock(registry_.mu);
      if (!registry_.shutting_down) {
        registry_.shutting_down = true;
        for (SessionReactor* s : registry_.waiting) s->finish({grpc::StatusCode::UNAVAILABLE, "server shutting down"});
        registry_.waiting.clear();
      }
    }
    tick_cv_.notify_all();
    if (ticker_.joinable()) ticker_.join();
  }

  std::vector<DeviceInfo> devices() {
    std::lock_guard lock(registry_.mu);
    std::vector<DeviceInfo> out;
    for (const auto& [id, w] : registry_.workers) {
      DeviceInfo d = w->info;
      d.leased = w->leased_by != nullptr;
      out.push_back(std::move(d));
    }
    return out;
  }

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context, const rpc::PingRequest* request,
                                 rpc::PingReply* reply) override {
    reply->set_payload(request->payload());
    reply->set_server_version("ktune");
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context, const rpc::ListDevicesRequest*,
                                        rpc::ListDevicesReply* reply) override {
    for (const DeviceInfo& d : devices()) to_proto(d, reply->add_devices());
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerBidiReactor<rpc::WorkerMessage, rpc::ServerMessage>* Attach(
      grpc::CallbackServerContext* context) override {
    return new AttachReactor(registry_, context->peer());
  }

  grpc::ServerBidiReactor<rpc::ClientMessage, rpc::ServerMessage>* Session(
      grpc::CallbackServerContext* context) override {
    return new SessionReactor(registry_, context->peer());
  }

 private:
  // Fails the sessions whose lease timeout has passed (reactions cannot wait; this thread can).
  void tick() {
    std::unique_lock lock(registry_.mu);
    while (!registry_.shutting_down) {
      const auto now = Clock::now();
      for (auto it = registry_.waiting.begin(); it != registry_.waiting.end();) {
        SessionReactor* s = *it;
        if (now < s->lease_deadline) {
          ++it;
          continue;
        }
        it = registry_.waiting.erase(it);
        size_t with_key = 0;
        for (const auto& [id, w] : registry_.workers) with_key += w->info.key == s->key;
        s->lease_expired(with_key);
      }
      tick_cv_.wait_for(lock, kLeaseTick);
    }
  }

  Registry registry_;
  std::condition_variable_any tick_cv_;
  std::thread ticker_;
};

}  // namespace

struct TuningServer::Impl {
  TuningService service;
  std::unique_ptr<grpc::Server> server;
  std::string host;
  int port = 0;
  std::mutex shutdown_mu;
  bool shut_down = false;
};

TuningServer::TuningServer(const TuningServerOptions& options) : impl_(std::make_unique<Impl>()) {
  if (options.port < 0 || options.port > 65535)
    throw Error(ErrorKind::kInvalidArgument, "port out of range: " + std::to_string(options.port));
  impl_->host = options.host;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.host + ":" + std::to_string(options.port),
                           grpc::InsecureServerCredentials(), &impl_->port);
  // Pings find a worker whose machine vanished without closing its connection.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Workers ping every 10 s for the same reason; accept that rate.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  builder.RegisterService(&impl_->service);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0)
    throw Error(ErrorKind::kIo, "cannot listen on " + options.host + ":" + std::to_string(options.port));
}

TuningServer::~TuningServer() { shutdown(); }

int TuningServer::port() const { return impl_->port; }

std::string TuningServer::address() const { return impl_->host + ":" + std::to_string(impl_->port); }

std::vector<DeviceInfo> TuningServer::devices() const { return impl_->service.devices(); }

void TuningServer::shutdown() {
  std::lock_guard lock(impl_->shutdown_mu);
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->service.begin_shutdown();
  // Open streams (workers, sessions) are cancelled after this grace period.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  impl_->server->Wait();
}

std::vector<DeviceInfo> list_devices(const std::string& address, double timeout_s) {
  auto stub = rpc::Tuning::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3)));
  rpc::ListDevicesRequest request;
  rpc::ListDevicesReply reply;
  grpc::Status status = stub->ListDevices(&context, request, &reply);
  if (!status.ok())
    throw Error(ErrorKind::kIo, "cannot reach the tuning server at " + address + ": " + status.error_message());
  std::vector<DeviceInfo> out;
  for (const auto& d : reply.devices()) out.push_back(from_proto(d));
  return out;
}

}  // namespace ktune::rpc_runner
