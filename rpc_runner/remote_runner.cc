// The client side of a tuning-server session: one leased device behind a gRPC stream.
#include "rpc_runner/remote_runner.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "rpc_runner/proto/ktune.grpc.pb.h"
#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

// A reader thread turns the stream's blocking Read into a queue that call() awaits with a
// deadline; the caller's thread does every Write and the final Finish.
struct RemoteSession::Impl {
  RemoteSessionOptions options;
  DeviceInfo device;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<rpc::Tuning::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<rpc::ClientMessage, rpc::ServerMessage>> stream;
  std::thread reader;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<rpc::ServerMessage> inbox;  // guarded by mu
  bool ended = false;                    // guarded by mu: the server ended the stream

  bool finished = false;  // Finish() has been called
  grpc::Status status;    // its result
  bool lost = false;
  std::string lost_message;

  ~Impl() { close(); }

  void read_loop() {
    rpc::ServerMessage message;
    while (stream->Read(&message)) {
      std::lock_guard lock(mu);
      inbox.push_back(std::move(message));
      cv.notify_all();
    }
    std::lock_guard lock(mu);
    ended = true;
    cv.notify_all();
  }

  // Waits until a message arrives (returned) or the stream ends or the deadline passes (nullopt;
  // `ended` tells which).
  std::optional<rpc::ServerMessage> next(Clock::time_point deadline) {
    std::unique_lock lock(mu);
    cv.wait_until(lock, deadline, [&] { return !inbox.empty() || ended; });
    if (inbox.empty()) return std::nullopt;
    rpc::ServerMessage m = std::move(inbox.front());
    inbox.pop_front();
    return m;
  }

  bool has_ended() {
    std::lock_guard lock(mu);
    return ended;
  }

  // Ends the stream (cancelling it when the server does not end it soon) and returns its status.
  const grpc::Status& finish(bool cancel) {
    if (finished) return status;
    if (!reader.joinable()) {
      finished = true;
      return status;
    }
    if (cancel) {
      context.TryCancel();
    } else if (!has_ended()) {
      stream->WritesDone();
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(2), [&] { return ended; })) context.TryCancel();
    }
    reader.join();
    status = stream->Finish();
    finished = true;
    return status;
  }

  void close() { finish(false); }

  [[noreturn]] void fail_lost(const std::string& why) {
    lost = true;
    lost_message = why.rfind("device lost", 0) == 0 ? why
                                                    : "device lost: session with " + options.server +
                                                          " (key " + options.device_key + ") ended: " + why;
    throw Error(ErrorKind::kIo, lost_message);
  }
};

RemoteSession::RemoteSession(const RemoteSessionOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = options;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  s.channel = grpc::CreateCustomChannel(options.server, grpc::InsecureChannelCredentials(), args);
  s.stub = rpc::Tuning::NewStub(s.channel);
  s.stream = s.stub->Session(&s.context);
  s.reader = std::thread([&s] { s.read_loop(); });

  rpc::ClientMessage open;
  open.mutable_open()->set_device_key(options.device_key);
  open.mutable_open()->set_lease_timeout_s(options.lease_timeout_s);
  s.stream->Write(open);  // a failure shows as the end of the stream below
  auto first = s.next(after(options.connect_timeout_s + options.lease_timeout_s));
  if (!first) {
    const bool ended = s.has_ended();
    const grpc::Status& status = s.finish(!ended);
    if (!ended)
      throw Error(ErrorKind::kIo, "the tuning server at " + options.server + " did not answer within " +
                                      std::to_string(options.connect_timeout_s + options.lease_timeout_s) + " s");
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
      throw Error(ErrorKind::kNotFound, "tuning server " + options.server + ": " + status.error_message());
    throw Error(ErrorKind::kIo, "cannot reach the tuning server at " + options.server + ": " +
                                    (status.ok() ? "session refused" : status.error_message()));
  }
  if (!first->has_session_opened()) {
    s.finish(true);
    throw Error(ErrorKind::kIo, "the tuning server at " + options.server + " broke the session protocol");
  }
  const rpc::Device& d = first->session_opened();
  s.device.worker_id = d.worker_id();
  s.device.key = d.key();
  s.device.target = d.target();
  s.device.cores = d.cores();
  s.device.description = d.description();
  s.device.leased = true;
  s.device.peer = d.peer();
  spdlog::info("leased device {} (key {}, target '{}') from {}", s.device.worker_id, s.device.key,
               s.device.target, options.server);
}

RemoteSession::~RemoteSession() = default;

const DeviceInfo& RemoteSession::device() const { return impl_->device; }

void RemoteSession::check_target(const std::string& target_key) const {
  if (target_key != impl_->device.target)
    throw Error(ErrorKind::kUnsupported, "the task's target '" + target_key + "' differs from device " +
                                             impl_->device.worker_id + "'s target '" + impl_->device.target + "'");
}

bool RemoteSession::lost() const { return impl_->lost; }

uint64_t RemoteSession::ready() {
  if (impl_->lost) throw Error(ErrorKind::kIo, impl_->lost_message);
  return 1;
}

Reply RemoteSession::call(const Request& request, double timeout_s) {
  Impl& s = *impl_;
  ready();
  rpc::ClientMessage message;
  std::vector<uint8_t> bytes = encode(request);
  message.mutable_frame()->set_request(std::string(bytes.begin(), bytes.end()));
  message.mutable_frame()->set_timeout_s(timeout_s);
  if (!s.stream->Write(message)) {
    const grpc::Status& status = s.finish(false);
    s.fail_lost(status.error_message());
  }
  const auto deadline = after(timeout_s < 0 ? 365.0 * 24 * 3600 : timeout_s + s.options.reply_margin_s);
  for (;;) {
    auto reply = s.next(deadline);
    if (!reply) {
      const bool ended = s.has_ended();
      const grpc::Status& status = s.finish(!ended);
      if (!ended)
        s.fail_lost("device lost: no reply from worker " + s.device.worker_id + " within " +
                    std::to_string(timeout_s + s.options.reply_margin_s) + " s");
      s.fail_lost(status.ok() ? "the server ended the session" : status.error_message());
    }
    if (!reply->has_reply()) continue;  // nothing else is expected mid-session
    const std::string& r = reply->reply().reply();
    return decode_reply(std::vector<uint8_t>(r.begin(), r.end()));
  }
}

namespace {

// Leases up to options.devices sessions at once (so that the wait is one lease timeout, not one
// per device) and checks that they share a target.
std::vector<std::unique_ptr<RunnerChannel>> lease_sessions(const RemoteRunnerOptions& options) {
  if (options.devices == 0) throw Error(ErrorKind::kInvalidArgument, "devices must be at least 1");
  std::vector<std::future<std::unique_ptr<RemoteSession>>> leases;
  for (size_t i = 0; i < options.devices; ++i)
    leases.push_back(std::async(std::launch::async,
                                [&options] { return std::make_unique<RemoteSession>(options.session); }));
  std::vector<std::unique_ptr<RunnerChannel>> sessions;
  std::exception_ptr first_error;
  std::string first_message;
  for (auto& lease : leases) {
    try {
      sessions.push_back(lease.get());
    } catch (const std::exception& e) {
      if (!first_error) {
        first_error = std::current_exception();
        first_message = e.what();
      }
    }
  }
  if (sessions.empty()) std::rethrow_exception(first_error);
  if (sessions.size() < options.devices)
    spdlog::warn("leased {} of {} devices with key '{}' from {} ({}); measuring on {}", sessions.size(),
                 options.devices, options.session.device_key, options.session.server, first_message,
                 sessions.size());
  const auto& first = static_cast<RemoteSession&>(*sessions.front()).device();
  for (const auto& session : sessions) {
    const auto& d = static_cast<RemoteSession&>(*session).device();
    if (d.target != first.target)
      throw Error(ErrorKind::kUnsupported, "devices of key '" + options.session.device_key +
                                               "' differ in target: " + first.worker_id + " has '" +
                                               first.target + "', " + d.worker_id + " has '" + d.target + "'");
  }
  return sessions;
}

}  // namespace

RemoteRunner::RemoteRunner(const RemoteRunnerOptions& options) : RemoteRunner(options, lease_sessions(options)) {}

RemoteRunner::RemoteRunner(const RemoteRunnerOptions& options, std::vector<std::unique_ptr<RunnerChannel>> sessions)
    : ChannelRunner(options, std::move(sessions)) {
  for (size_t i = 0; i < channel_count(); ++i) sessions_.push_back(static_cast<RemoteSession*>(&channel(i)));
}

RemoteRunner::~RemoteRunner() = default;

std::vector<DeviceInfo> RemoteRunner::devices() const {
  std::vector<DeviceInfo> out;
  for (const RemoteSession* s : sessions_) out.push_back(s->device());
  return out;
}

}  // namespace ktune::rpc_runner
