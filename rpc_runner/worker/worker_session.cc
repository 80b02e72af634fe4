// The worker session: one Attach stream at a time; a reader, a measuring thread and a
// heartbeat thread per connection.
#include "rpc_runner/worker/worker_session.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "rpc_runner/protocol/credentials.h"
#include "rpc_runner/protocol/ktune.grpc.pb.h"
#include "rpc_runner/worker/backoff.h"
#include "support/error.h"

namespace ktune::rpc_runner {

using Stream = grpc::ClientReaderWriter<rpc::WorkerMessage, rpc::ServerToWorker>;

rpc::WorkerMessage hello_message(const WorkerSessionOptions& options) {
  rpc::WorkerMessage hello;
  rpc::WorkerHello* h = hello.mutable_hello();
  h->set_protocol_version(options.protocol_version);
  h->set_key(options.key);
  h->set_target(options.target);
  h->set_cores(options.cores);
  h->set_description(options.description);
  h->set_slots(options.slots);
  h->set_can_build(options.can_build);
  h->set_peak_gflops(options.peak_gflops);
  h->set_vector_bits(options.vector_bits);
  h->set_emulated(options.emulated);
  return hello;
}

bool is_refusal(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
         status.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
}

struct WorkerSession::Impl {
  WorkerSessionOptions options;
  MeasureBatchFn measure;
  ClientSecurity security;

  std::thread thread;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;                         // guarded by mu
  std::unique_ptr<grpc::ClientContext> context;  // guarded by mu: the current connection
  std::string refusal;                           // guarded by mu
  std::string target;                            // guarded by mu: canonical, from the server
  bool ever_attached = false;                    // guarded by mu
  std::atomic<bool> attached{false};
  std::atomic<size_t> results{0};

  // One connection: hello, then candidates in, results and heartbeats out, until it ends.
  grpc::Status serve_once(bool* was_attached) {
    auto stub = rpc::Tuning::NewStub(make_channel(options.server, security));
    grpc::ClientContext* ctx;
    {
      std::lock_guard lock(mu);
      if (stopping) return grpc::Status::CANCELLED;
      context = std::make_unique<grpc::ClientContext>();
      ctx = context.get();
      attach_token(*ctx, security);
    }
    // Shared by this connection's threads.
    std::mutex queue_mu;
    std::condition_variable queue_cv;
    std::deque<rpc::Candidate> queue;
    bool ended = false;
    double heartbeat_s = 2;
    // The server's answer to the hello; candidates may arrive before it (the server registers a
    // worker, and may hand it queued work, before its answer is written), and they wait for it.
    bool acknowledged = false;
    std::string canonical_target = options.target;

    // A peer that takes the connection and never answers (no ktune server, or its metrics port)
    // would leave the worker waiting without a word (the call's start alone waits for the
    // connection): unanswered, the hello ends the attempt.
    bool unanswered = false;
    std::thread hello_watch([&] {
      std::unique_lock lock(queue_mu);
      if (queue_cv.wait_for(lock, std::chrono::duration<double>(kHelloTimeoutS),
                            [&] { return ended || acknowledged; }))
        return;
      unanswered = true;
      ctx->TryCancel();
    });
    std::unique_ptr<Stream> stream = stub->Attach(ctx);
    std::mutex write_mu;
    auto write = [&](const rpc::WorkerMessage& m) {
      std::lock_guard lock(write_mu);
      return stream->Write(m);
    };
    write(hello_message(options));  // a failure shows as the end of the stream below

    std::thread measurer([&] {
      for (;;) {
        std::vector<rpc::Candidate> batch;
        std::string batch_target;
        {
          std::unique_lock lock(queue_mu);
          queue_cv.wait(lock, [&] { return ended || (acknowledged && !queue.empty()); });
          if (ended) return;
          batch_target = canonical_target;
          // The front candidate's setting; others of the same setting join it, up to the slots.
          const std::string setting = queue.front().measure().SerializeAsString();
          for (auto it = queue.begin();
               it != queue.end() && static_cast<int>(batch.size()) < options.slots;) {
            if (it->measure().SerializeAsString() == setting) {
              batch.push_back(std::move(*it));
              it = queue.erase(it);
            } else {
              ++it;
            }
          }
        }
        for (rpc::CandidateResult& r : measure(batch, batch_target)) {
          rpc::WorkerMessage m;
          *m.mutable_result() = std::move(r);
          if (!write(m)) return;
          ++results;
        }
      }
    });
    std::thread heartbeat([&] {
      std::unique_lock lock(queue_mu);
      while (!ended) {
        queue_cv.wait_for(lock, std::chrono::duration<double>(heartbeat_s));
        if (ended) return;
        lock.unlock();
        rpc::WorkerMessage beat;
        beat.mutable_heartbeat();
        const bool ok = write(beat);
        lock.lock();
        if (!ok) return;
      }
    });

    rpc::ServerToWorker message;
    while (stream->Read(&message)) {
      if (message.has_attached()) {
        *was_attached = true;
        attached = true;
        const rpc::WorkerAttached& a = message.attached();
        {
          std::lock_guard lock(queue_mu);
          if (a.heartbeat_s() > 0) heartbeat_s = a.heartbeat_s();
          if (!a.target().empty()) canonical_target = a.target();
          acknowledged = true;
          queue_cv.notify_all();
        }
        {
          std::lock_guard lock(mu);
          target = a.target().empty() ? options.target : a.target();
        }
        spdlog::info("attached to {} as worker {} (key {}, target '{}', {} slots{})",
                     options.server, a.worker_id(), options.key,
                     a.target().empty() ? options.target : a.target(), options.slots,
                     options.emulated ? ", emulated" : "");
      } else if (message.has_candidate()) {
        std::lock_guard lock(queue_mu);
        queue.push_back(std::move(*message.mutable_candidate()));
        queue_cv.notify_all();
      }
    }
    attached = false;
    {
      std::lock_guard lock(queue_mu);
      ended = true;
      queue_cv.notify_all();
    }
    // A write in progress fails by itself now that the stream is over; the status below is the
    // server's own (a refusal must not be masked by a cancellation of ours).
    measurer.join();
    heartbeat.join();
    hello_watch.join();
    const grpc::Status finished = stream->Finish();
    if (unanswered)
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          fmt::format("no answer to this worker's hello in {:g} s (is it a ktune "
                                      "server's gRPC port?)",
                                      kHelloTimeoutS));
    return finished;
  }

  // How long a server may take to answer the hello (it answers at once; a busy one in a second).
  static constexpr double kHelloTimeoutS = 10;

  // Plaintext connections the server closed before answering, in a row, that make a worker never
  // attached conclude the server serves TLS only.
  static constexpr int kTlsStrikes = 3;

  void run() {
    int tls_strikes = 0;
    // Seeded apart per worker: the jitter exists to spread workers that lost the server together.
    Backoff backoff(options.reconnect_initial_s, options.reconnect_max_s, std::random_device{}());
    bool announce = true;  // one log line per outage, not one per attempt
    for (;;) {
      bool was_attached = false;
      grpc::Status status = serve_once(&was_attached);
      std::unique_lock lock(mu);
      if (stopping) return;
      ever_attached = ever_attached || was_attached;
      bool refused = is_refusal(status);
      std::string reason = status.error_message();
      // Nor can it help when TLS fails before this worker was ever attached: a CA that does not
      // verify the server, TLS on one side only. A failure that only looks like one (a closed
      // connection) counts once it repeats; after an attach, TLS failures are retried (a server
      // restarting with a renewed certificate).
      if (!refused && !ever_attached) {
        const TlsFailure tls = tls_failure(status, !security.tls_ca_pem.empty());
        tls_strikes = tls.reason.empty() ? 0 : tls_strikes + 1;
        if (tls.certain || tls_strikes >= kTlsStrikes) {
          refused = true;
          reason = tls.reason;
        }
      }
      if (refused) {
        // Say it once; refused at the start, the owner reports it (refused_at_start).
        if (refusal != reason && ever_attached)
          spdlog::error("the tuning server at {} refused this worker: {}", options.server, reason);
        refusal = reason;
      }
      if (was_attached) {
        backoff.reset();
        announce = true;
      }
      // A failure that may be TLS's waits for its verdict (refused, or not TLS after all).
      if (announce && !refused && tls_strikes == 0) {
        spdlog::warn("tuning server {} {} ({}); reconnecting with backoff up to {:g} s",
                     options.server, was_attached ? "went away" : "unreachable",
                     status.error_message(), options.reconnect_max_s);
        announce = false;
      }
      cv.wait_for(lock, std::chrono::duration<double>(backoff.next()), [&] { return stopping; });
      if (stopping) return;
    }
  }
};

WorkerSession::WorkerSession(const WorkerSessionOptions& options, MeasureBatchFn measure)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  if (options.server.empty())
    throw Error(ErrorKind::kInvalidArgument, "a worker needs a server address");
  if (options.key.empty()) throw Error(ErrorKind::kInvalidArgument, "a worker needs a device key");
  if (!measure) throw Error(ErrorKind::kInvalidArgument, "a worker needs a way to measure");
  w.options = options;
  w.options.slots = std::max(w.options.slots, 1);
  w.measure = std::move(measure);
  w.security = load_client_security(options.token_file, options.tls_ca_file, Role::kWorker,
                                    options.allow_readable_token);
  w.thread = std::thread([&w] { w.run(); });
}

WorkerSession::~WorkerSession() { stop(); }

void WorkerSession::stop() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
    if (impl_->context) impl_->context->TryCancel();
    impl_->cv.notify_all();
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool WorkerSession::attached() const { return impl_->attached; }

size_t WorkerSession::results_sent() const { return impl_->results; }

std::string WorkerSession::target() const {
  std::lock_guard lock(impl_->mu);
  return impl_->target;
}

std::string WorkerSession::last_refusal() const {
  std::lock_guard lock(impl_->mu);
  return impl_->refusal;
}

std::string WorkerSession::refused_at_start() const {
  std::lock_guard lock(impl_->mu);
  return impl_->ever_attached ? "" : impl_->refusal;
}

}  // namespace ktune::rpc_runner
