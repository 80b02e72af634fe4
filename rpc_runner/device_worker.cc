// The device worker: one Attach stream at a time; a reader, a measuring thread and a heartbeat
// thread per connection; candidates built and measured by LocalRunners.
#include "rpc_runner/device_worker.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "rpc_runner/credentials.h"
#include "rpc_runner/fleet_measurer.h"
#include "rpc_runner/local_runner.h"
#include "rpc_runner/proto/ktune.grpc.pb.h"
#include "rpc_runner/runner_channel.h"
#include "rpc_runner/runner_protocol.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "support/json_input.h"

namespace ktune::rpc_runner {
namespace {

using Stream = grpc::ClientReaderWriter<rpc::WorkerMessage, rpc::ServerToWorker>;

std::string default_description(const codegen::Target& host) {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  return "cpu " + host.cpu() + ", " + host.triple() + ", " + std::to_string(host.cores()) + " cores" +
         (name[0] ? std::string(", host ") + name : "");
}

rpc::CandidateResult error_result(uint64_t id, ErrorKind kind, const std::string& message) {
  rpc::CandidateResult r;
  r.set_id(id);
  r.set_error_kind(std::string(to_string(kind)));
  r.set_error_message(message);
  return r;
}

rpc::CandidateResult to_proto(uint64_t id, const tuner::MeasureResult& m) {
  rpc::CandidateResult r;
  r.set_id(id);
  for (double c : m.costs) r.add_costs(c);
  if (!m.ok()) {
    r.clear_costs();
    r.set_error_kind(std::string(to_string(m.error.value_or(ErrorKind::kUnknown))));
    r.set_error_message(m.error_message);
  }
  r.set_build_s(m.build_s);
  r.set_run_s(m.run_s);
  return r;
}

}  // namespace

struct DeviceWorker::Impl {
  DeviceWorkerOptions options;
  ClientSecurity security;
  codegen::Target host = codegen::Target::host();
  int cores = 1;

  std::thread thread;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;                          // guarded by mu
  std::unique_ptr<grpc::ClientContext> context;   // guarded by mu: the current connection
  std::string refusal;                            // guarded by mu
  bool ever_attached = false;                     // guarded by mu
  std::atomic<bool> attached{false};
  std::atomic<size_t> results{0};

  // Used by the measuring thread only (one connection at a time).
  std::map<std::string, std::unique_ptr<LocalRunner>> runners;          // by MeasureSpec bytes
  std::map<std::string, std::unique_ptr<schedule_space::Task>> tasks;   // by TaskSpec bytes
  std::atomic<size_t> runners_started_before{0};  // children of runners already dropped
  std::atomic<size_t> built{0}, prebuilt{0};

  // Kernels cross-built by the server run on a child of their own, with the references it holds.
  std::unique_ptr<ProcessChannel> prebuilt_runner;
  std::set<std::string> prebuilt_loaded;
  uint64_t prebuilt_epoch = 0;

  rpc::CandidateResult run_prebuilt(const rpc::Candidate& c) {
    const rpc::MeasureSpec& m = c.measure();
    if (c.task().target() != options.target)
      return error_result(c.id(), ErrorKind::kUnsupported,
                          "this worker runs '" + options.target + "', not '" + c.task().target() + "'");
    if (!prebuilt_runner) prebuilt_runner = std::make_unique<ProcessChannel>(options.runner_path);
    ++prebuilt;
    const std::string reference_key = c.task().template_name() + c.task().args_json() + "|" + c.task().target();
    const TimingOptions timing = timing_options(from_proto(m), m.threads());
    const auto start = std::chrono::steady_clock::now();
    try {
      const uint64_t epoch = prebuilt_runner->ready();  // a fresh child after a crash holds nothing
      if (epoch != prebuilt_epoch) {
        prebuilt_loaded.clear();
        prebuilt_epoch = epoch;
      }
      if (m.check_correctness() && !prebuilt_loaded.count(reference_key)) {
        if (c.reference_artifact().empty())
          return error_result(c.id(), ErrorKind::kUnknown, "no reference kernel came with the candidate");
        Request ref;
        ref.type = RequestType::kReference;
        ref.reference_key = reference_key;
        ref.artifact.assign(c.reference_artifact().begin(), c.reference_artifact().end());
        ref.data_seed = m.data_seed();
        ref.timing.threads = m.threads();
        const Reply reply = prebuilt_runner->call(ref, 120);
        if (reply.error) return error_result(c.id(), ErrorKind::kUnknown, "reference failed: " + reply.message);
        prebuilt_loaded.insert(reference_key);
      }
      Request request;
      request.type = RequestType::kMeasure;
      request.reference_key = reference_key;
      request.artifact.assign(c.artifact().begin(), c.artifact().end());
      request.data_seed = m.data_seed();
      request.timing = timing;
      const Reply reply = prebuilt_runner->call(request, m.run_timeout_s());
      tuner::MeasureResult result =
          reply.error ? tuner::make_error_result(*reply.error, reply.message)
                      : tuner::make_ok_result(reply.costs);
      result.run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return to_proto(c.id(), result);
    } catch (const Error& e) {
      const ErrorKind kind =
          e.kind() == ErrorKind::kRun || e.kind() == ErrorKind::kRunTimeout ? e.kind() : ErrorKind::kUnknown;
      return error_result(c.id(), kind, e.what());
    }
  }

  LocalRunner& runner_for(const rpc::MeasureSpec& m) {
    const std::string key = m.SerializeAsString();
    auto it = runners.find(key);
    if (it != runners.end()) return *it->second;
    // A handful of settings at most in practice; cap the children kept alive.
    if (runners.size() >= 4) {
      for (auto& [k, r] : runners) runners_started_before += r->runners_started();
      runners.clear();
    }
    LocalRunnerOptions o;
    o.runner_path = options.runner_path;
    o.build_threads = static_cast<size_t>(std::max(options.slots, 1));
    o.run_threads = m.threads();
    o.data_seed = m.data_seed();
    o.measure = from_proto(m);
    return *runners.emplace(key, std::make_unique<LocalRunner>(o)).first->second;
  }

  // The task of a spec, rebuilt with exactly the server's traits so config indices agree.
  const schedule_space::Task& task_for(const rpc::TaskSpec& spec) {
    const std::string key = spec.SerializeAsString();
    auto it = tasks.find(key);
    if (it != tasks.end()) return *it->second;
    if (spec.target() != options.target)
      throw Error(ErrorKind::kUnsupported, "this worker runs '" + options.target + "', not '" + spec.target() + "'");
    const auto args = parse_json_input(spec.args_json(), "task arguments");
    if (!args.is_object()) throw Error(ErrorKind::kInvalidArgument, "task arguments are not a JSON object");
    std::map<std::string, std::string> given;
    for (const auto& [k, v] : args.items()) given[k] = v.is_string() ? v.get<std::string>() : v.dump();
    schedule_space::TargetTraits traits;
    traits.key = spec.target();
    traits.vector_bits = spec.vector_bits();
    traits.cores = spec.cores();
    traits.arch = spec.arch();
    auto task = std::make_unique<schedule_space::Task>(schedule_space::Task::create(spec.template_name(), given, traits));
    return *tasks.emplace(key, std::move(task)).first->second;
  }

  // Measures candidates of one setting as one batch (parallel builds, then runs one at a time).
  std::vector<rpc::CandidateResult> measure(const std::vector<rpc::Candidate>& batch) {
    std::vector<rpc::CandidateResult> out(batch.size());
    std::vector<tuner::MeasureInput> inputs;
    std::vector<size_t> where;
    for (size_t i = 0; i < batch.size(); ++i) {
      const rpc::Candidate& c = batch[i];
      if (!c.artifact().empty()) {
        out[i] = run_prebuilt(c);
        continue;
      }
      try {
        const schedule_space::Task& task = task_for(c.task());
        schedule_space::Config config = task.space().get(c.config_index());
        if (config.to_json() != schedule_space::Config::from_json_string(c.config_json()).to_json())
          throw Error(ErrorKind::kInstantiation, "config " + std::to_string(c.config_index()) +
                                                     " means another schedule on this worker (ktune versions differ?)");
        inputs.push_back({&task, std::move(config)});
        where.push_back(i);
      } catch (const Error& e) {
        const ErrorKind kind = e.kind() == ErrorKind::kInstantiation ? e.kind() : ErrorKind::kUnknown;
        out[i] = error_result(c.id(), kind, e.what());
      }
    }
    if (inputs.empty()) return out;
    try {
      std::vector<tuner::MeasureResult> results = runner_for(batch[where.front()].measure()).measure(inputs);
      built += inputs.size();
      for (size_t j = 0; j < where.size(); ++j) out[where[j]] = to_proto(batch[where[j]].id(), results[j]);
    } catch (const Error& e) {
      for (size_t i : where) out[i] = error_result(batch[i].id(), ErrorKind::kUnknown, e.what());
    }
    return out;
  }

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
    std::unique_ptr<Stream> stream = stub->Attach(ctx);
    std::mutex write_mu;
    auto write = [&](const rpc::WorkerMessage& m) {
      std::lock_guard lock(write_mu);
      return stream->Write(m);
    };
    rpc::WorkerMessage hello;
    rpc::WorkerHello* h = hello.mutable_hello();
    h->set_protocol_version(options.protocol_version);
    h->set_key(options.key);
    h->set_target(options.target);
    h->set_cores(cores);
    h->set_description(options.description);
    h->set_slots(options.slots);
    h->set_can_build(options.can_build);
    h->set_peak_gflops(options.peak_gflops);
    h->set_vector_bits(host.vector_bits());
    write(hello);  // a failure shows as the end of the stream below

    // Shared by this connection's threads.
    std::mutex queue_mu;
    std::condition_variable queue_cv;
    std::deque<rpc::Candidate> queue;
    bool ended = false;
    double heartbeat_s = 2;

    std::thread measurer([&] {
      for (;;) {
        std::vector<rpc::Candidate> batch;
        {
          std::unique_lock lock(queue_mu);
          queue_cv.wait(lock, [&] { return ended || !queue.empty(); });
          if (ended) return;
          // The front candidate's setting; others of the same setting join it, up to the slots.
          const std::string setting = queue.front().measure().SerializeAsString();
          for (auto it = queue.begin(); it != queue.end() && static_cast<int>(batch.size()) < options.slots;) {
            if (it->measure().SerializeAsString() == setting) {
              batch.push_back(std::move(*it));
              it = queue.erase(it);
            } else {
              ++it;
            }
          }
        }
        for (rpc::CandidateResult& r : measure(batch)) {
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
        {
          std::lock_guard lock(queue_mu);
          if (message.attached().heartbeat_s() > 0) heartbeat_s = message.attached().heartbeat_s();
        }
        spdlog::info("attached to {} as worker {} (key {}, target '{}', {} slots)", options.server,
                     message.attached().worker_id(), options.key, options.target, options.slots);
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
      ever_attached = ever_attached || was_attached;
      const bool refused = status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                           status.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
      if (refused) {
        // Retrying cannot help: a wrong token or another protocol version. Say it once; refused
        // at the start, the owner reports it (refused_at_start: `ktune worker` exits with it).
        if (refusal != status.error_message() && ever_attached)
          spdlog::error("the tuning server at {} refused this worker: {}", options.server, status.error_message());
        refusal = status.error_message();
      }
      if (was_attached) {
        backoff = options.reconnect_initial_s;
        announce = true;
      }
      if (announce && !refused) {
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
  if (::access(w.options.runner_path.c_str(), X_OK) != 0)
    throw Error(ErrorKind::kIo, "runner executable not found: " + w.options.runner_path);
  w.security = load_client_security(options.token_file, options.tls_ca_file, Role::kWorker);
  if (w.options.target.empty()) w.options.target = w.host.str();
  if (w.options.description.empty()) w.options.description = default_description(w.host);
  w.cores = w.host.cores();
  if (w.options.slots <= 0) w.options.slots = w.cores;
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

size_t DeviceWorker::results_sent() const { return impl_->results; }

size_t DeviceWorker::runners_started() const {
  // Read after stop() or between candidates in tests; the map is the measuring thread's.
  size_t n = impl_->runners_started_before;
  for (const auto& [k, r] : impl_->runners) n += r->runners_started();
  return n;
}

size_t DeviceWorker::built_here() const { return impl_->built; }

size_t DeviceWorker::prebuilt() const { return impl_->prebuilt; }

std::string DeviceWorker::last_refusal() const {
  std::lock_guard lock(impl_->mu);
  return impl_->refusal;
}

std::string DeviceWorker::refused_at_start() const {
  std::lock_guard lock(impl_->mu);
  return impl_->ever_attached ? "" : impl_->refusal;
}

}  // namespace ktune::rpc_runner
