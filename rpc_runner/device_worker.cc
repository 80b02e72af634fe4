// The device worker: one gRPC Attach stream at a time, frames run on a ProcessChannel.
#include "rpc_runner/device_worker.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "rpc_runner/local_runner.h"
#include "rpc_runner/proto/ktune.grpc.pb.h"
#include "rpc_runner/runner_channel.h"
#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

std::string default_description(const codegen::Target& host) {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  return "cpu " + host.cpu() + ", " + host.triple() + ", " + std::to_string(host.cores()) + " cores" +
         (name[0] ? std::string(", host ") + name : "");
}

Reply error_reply(ErrorKind kind, std::string message) {
  Reply r;
  r.error = kind;
  r.message = std::move(message);
  return r;
}

}  // namespace

struct DeviceWorker::Impl {
  DeviceWorkerOptions options;
  int cores = 0;
  std::unique_ptr<ProcessChannel> runner;  // used by the serving thread only

  // Reference requests seen so far, by key, with the timeout they came with.
  struct Seen {
    Request request;
    double timeout_s = 0;
  };
  std::map<std::string, Seen> references;
  std::set<std::string> loaded;  // references the current child holds
  uint64_t loaded_epoch = 0;

  std::thread thread;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;                          // guarded by mu
  std::unique_ptr<grpc::ClientContext> context;   // guarded by mu: the current connection
  std::atomic<bool> attached{false};
  std::atomic<size_t> frames{0};

  // Starts a child if none is alive; a fresh child holds no reference yet.
  void sync_epoch() {
    const uint64_t epoch = runner->ready();
    if (epoch != loaded_epoch) {
      loaded.clear();
      loaded_epoch = epoch;
    }
  }

  Reply handle(const Request& request, double timeout_s) {
    try {
      sync_epoch();
      if (request.type == RequestType::kReference) {
        references[request.reference_key] = {request, timeout_s};
        loaded.erase(request.reference_key);
        Reply reply = runner->call(request, timeout_s);
        if (!reply.error) loaded.insert(request.reference_key);
        return reply;
      }
      if (request.timing.check_correctness && !loaded.count(request.reference_key)) {
        // A fresh child after a crash: give it the reference the client sent earlier.
        auto it = references.find(request.reference_key);
        if (it != references.end()) {
          try {
            Reply reply = runner->call(it->second.request, it->second.timeout_s);
            if (reply.error) return error_reply(ErrorKind::kUnknown, "reference failed on the worker: " + reply.message);
          } catch (const Error& e) {
            return error_reply(ErrorKind::kUnknown, std::string("reference failed on the worker: ") + e.what());
          }
          loaded.insert(request.reference_key);
        }
      }
      return runner->call(request, timeout_s);
    } catch (const Error& e) {
      const ErrorKind kind =
          e.kind() == ErrorKind::kRun || e.kind() == ErrorKind::kRunTimeout ? e.kind() : ErrorKind::kUnknown;
      spdlog::debug("worker: {}", e.what());
      return error_reply(kind, e.what());
    }
  }

  // One connection: attach, serve frames until the stream ends. Returns its final status.
  grpc::Status serve_once(bool* was_attached) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    args.SetMaxSendMessageSize(256 << 20);
    // Pings find a server whose machine vanished without closing the connection.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    auto stub = rpc::Tuning::NewStub(
        grpc::CreateCustomChannel(options.server, grpc::InsecureChannelCredentials(), args));
    grpc::ClientContext* ctx;
    {
      std::lock_guard lock(mu);
      if (stopping) return grpc::Status::CANCELLED;
      context = std::make_unique<grpc::ClientContext>();
      ctx = context.get();
    }
    auto stream = stub->Attach(ctx);
    rpc::WorkerMessage hello;
    hello.mutable_hello()->set_key(options.key);
    hello.mutable_hello()->set_target(options.target);
    hello.mutable_hello()->set_cores(cores);
    hello.mutable_hello()->set_description(options.description);
    stream->Write(hello);  // a failure shows as the end of the stream below

    rpc::ServerMessage message;
    while (stream->Read(&message)) {
      if (message.has_attached()) {
        *was_attached = true;
        attached = true;
        spdlog::info("attached to {} as worker {} (key {}, target '{}')", options.server,
                     message.attached().worker_id(), options.key, options.target);
        continue;
      }
      if (!message.has_frame()) continue;
      const std::string& bytes = message.frame().request();
      Reply reply;
      try {
        reply = handle(decode_request(std::vector<uint8_t>(bytes.begin(), bytes.end())),
                       message.frame().timeout_s());
      } catch (const Error& e) {
        reply = error_reply(ErrorKind::kUnknown, std::string("malformed request: ") + e.what());
      }
      rpc::WorkerMessage out;
      out.mutable_reply()->set_id(message.frame().id());
      std::vector<uint8_t> encoded = encode(reply);
      out.mutable_reply()->set_reply(std::string(encoded.begin(), encoded.end()));
      ++frames;
      if (!stream->Write(out)) break;
    }
    attached = false;
    return stream->Finish();
  }

  void run() {
    double backoff = options.reconnect_initial_s;
    bool announce = true;  // one log line per outage, not one per attempt
    for (;;) {
      bool was_attached = false;
      grpc::Status status = serve_once(&was_attached);
      std::unique_lock lock(mu);
      if (stopping) return;
      if (was_attached) {
        backoff = options.reconnect_initial_s;
        announce = true;
      }
      if (announce) {
        spdlog::warn("tuning server {} {} ({}); reconnecting with backoff up to {:g} s", options.server,
                     was_attached ? "went away" : "unreachable", status.error_message(), options.reconnect_max_s);
        announce = false;
      }
      cv.wait_for(lock, std::chrono::duration<double>(backoff), [&] { return stopping; });
      if (stopping) return;
      backoff = std::min(backoff * 2, options.reconnect_max_s);
    }
  }
};

DeviceWorker::DeviceWorker(const DeviceWorkerOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.options = options;
  if (options.server.empty()) throw Error(ErrorKind::kInvalidArgument, "a worker needs a server address");
  if (options.key.empty()) throw Error(ErrorKind::kInvalidArgument, "a worker needs a device key");
  if (w.options.runner_path.empty()) w.options.runner_path = default_runner_path();
  w.runner = std::make_unique<ProcessChannel>(w.options.runner_path);
  const codegen::Target host = codegen::Target::host();
  if (w.options.target.empty()) w.options.target = host.str();
  if (w.options.description.empty()) w.options.description = default_description(host);
  w.cores = host.cores();
  w.thread = std::thread([&w] { w.run(); });
}

DeviceWorker::~DeviceWorker() { stop(); }

void DeviceWorker::stop() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
    if (impl_->context) impl_->context->TryCancel();
    impl_->cv.notify_all();
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool DeviceWorker::attached() const { return impl_->attached; }

size_t DeviceWorker::frames_served() const { return impl_->frames; }

size_t DeviceWorker::runners_started() const { return impl_->runner->started(); }

}  // namespace ktune::rpc_runner
