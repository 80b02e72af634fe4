// Simulated devices: landscape answers, and a fleet of gRPC callback reactors driven by one timer
// thread (delayed answers, heartbeats, reconnections).
#include "rpc_runner/worker/simulated_fleet.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <queue>
#include <thread>

#include <spdlog/spdlog.h>

#include "rpc_runner/protocol/credentials.h"
#include "rpc_runner/protocol/ktune.grpc.pb.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/worker/backoff.h"
#include "support/error.h"

namespace ktune::rpc_runner {

// ---- LandscapeAnswers ----

LandscapeAnswers::LandscapeAnswers(tuner::Landscape landscape) : landscape_(std::move(landscape)) {
  if (landscape_.points.empty())
    throw Error(ErrorKind::kInvalidArgument, "a simulated device needs a landscape with points");
  for (const auto& [index, point] : landscape_.points) recorded_.push_back(index);
  std::sort(recorded_.begin(), recorded_.end());
}

const tuner::LandscapePoint& LandscapeAnswers::point(uint64_t index) const {
  auto it = landscape_.points.find(index);
  if (it != landscape_.points.end()) return it->second;
  // splitmix64's finalizer: neighbouring indices pick unrelated recorded configs.
  uint64_t h = index + 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return landscape_.points.at(recorded_[h % recorded_.size()]);
}

double LandscapeAnswers::flop_of(const rpc::TaskSpec& task) const {
  const std::string key = task.SerializeAsString();
  std::lock_guard lock(mu_);
  auto it = flop_.find(key);
  if (it != flop_.end()) return it->second;
  double flop = 0;
  try {
    const schedule_space::Task t = from_proto(task);
    if (t.workload_key() == landscape_.header.value("workload", "") ||
        t.template_name() == "fma_peak")
      flop = t.flop();
  } catch (const std::exception& e) {
    spdlog::warn("simulated device: cannot rebuild a task of template '{}': {}",
                 task.template_name(), e.what());
  }
  return flop_.emplace(key, flop).first->second;
}

rpc::CandidateResult LandscapeAnswers::answer(const rpc::Candidate& c) const {
  rpc::CandidateResult r;
  r.set_id(c.id());
  const double flop = flop_of(c.task());
  if (flop <= 0) {
    r.set_error_kind(std::string(to_string(ErrorKind::kUnsupported)));
    r.set_error_message(
        "this simulated device replays " + landscape_.header.value("workload", std::string("?")) +
        " only, not another workload (this task's template: '" + c.task().template_name() + "')");
    return r;
  }
  if (c.task().template_name() == "fma_peak") return calibration(c, flop);
  const tuner::LandscapePoint& p = point(c.config_index());
  if (p.error || !(p.gflops > 0)) {
    r.set_error_kind(std::string(to_string(p.error.value_or(ErrorKind::kUnknown))));
    r.set_error_message("failed when recorded (simulated device)");
    return r;
  }
  const double cost = flop / (p.gflops * 1e9);
  const int repeat = std::max(c.measure().repeat(), 1);
  for (int i = 0; i < repeat; ++i) r.add_costs(cost);
  r.set_run_s(cost * repeat * std::max(c.measure().number(), 1));
  return r;
}

rpc::CandidateResult LandscapeAnswers::calibration(const rpc::Candidate& c, double flop) const {
  double fastest = 0;
  for (const auto& [index, point] : landscape_.points) fastest = std::max(fastest, point.gflops);
  rpc::CandidateResult r;
  r.set_id(c.id());
  // fma_peak's flop counts its copies (one per core on all threads): per copy, one core's time.
  const double copies = static_cast<double>(from_proto(c.task()).args().get_int("copies"));
  const double cost = flop / copies / (fastest * 1e9);
  const int repeat = std::max(c.measure().repeat(), 1);
  for (int i = 0; i < repeat; ++i) r.add_costs(cost);
  r.set_run_s(cost * repeat);
  return r;
}

// ---- SimulatedFleet ----

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(std::max(seconds, 0.0)));
}

// Runs actions at their times on one thread of its own: the fleet's delayed answers, heartbeats
// and reconnections. An action runs without the timer's lock. Thread-safe.
class Timer {
 public:
  Timer() : thread_([this] { run(); }) {}
  ~Timer() { stop(); }

  // Queues an action; dropped once stopped.
  void at(Clock::time_point when, std::function<void()> action) {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    queue_.push({when, next_++, std::move(action)});
    cv_.notify_one();
  }

  // Drops what is queued, waits for the action running, if any. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Entry {
    Clock::time_point when;
    uint64_t order;  // first queued, first run among equal times
    std::function<void()> action;
    bool operator>(const Entry& o) const {
      return when != o.when ? when > o.when : order > o.order;
    }
  };

  void run() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      if (queue_.empty()) {
        cv_.wait(lock);
        continue;
      }
      if (queue_.top().when > Clock::now()) {
        cv_.wait_until(lock, queue_.top().when);
        continue;
      }
      std::function<void()> action = std::move(const_cast<Entry&>(queue_.top()).action);
      queue_.pop();
      lock.unlock();
      action();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  uint64_t next_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

struct SimulatedFleet::Impl {
  struct Device;

  // One attempt of one device: a bidirectional Attach stream. Deletes itself when gRPC is done
  // with it (OnDone), after telling the fleet.
  class Connection final : public grpc::ClientBidiReactor<rpc::WorkerMessage, rpc::ServerToWorker> {
   public:
    Connection(Impl& fleet, Device& device, uint64_t generation)
        : fleet_(fleet), device_(device), generation_(generation) {}

    // Starts the call with the hello. Called with the device's lock held.
    void start() {
      attach_token(context_, fleet_.security);
      device_.stub->async()->Attach(&context_, this);
      send(fleet_.hello_of(device_));
      StartRead(&in_);
      // Writes start from the timer thread too: the hold keeps the call alive for them until the
      // read side has ended (OnReadDone false).
      AddHold();
      StartCall();
    }

    // Queues a message; at most one write is in flight (gRPC's rule). Dropped once the read side
    // has ended.
    void send(rpc::WorkerMessage m) {
      std::lock_guard lock(mu_);
      if (closing_) return;
      out_.push_back(std::move(m));
      if (!writing_) {
        writing_ = true;
        StartWrite(&out_.front());  // deque references survive push_back
      }
    }

    void cancel() { context_.TryCancel(); }
    uint64_t generation() const { return generation_; }

    void OnReadDone(bool ok) override {
      if (!ok) {
        {
          std::lock_guard lock(mu_);
          closing_ = true;
        }
        RemoveHold();
        return;
      }
      if (in_.has_attached()) {
        fleet_.on_attached(device_, generation_, in_.attached().heartbeat_s());
      } else if (in_.has_candidate()) {
        fleet_.on_candidate(device_, generation_, in_.candidate());
      }
      StartRead(&in_);
    }

    void OnWriteDone(bool ok) override {
      std::lock_guard lock(mu_);
      out_.pop_front();
      if (!ok) out_.clear();  // the stream is broken; its end shows on the read side
      if (out_.empty()) {
        writing_ = false;
        return;
      }
      StartWrite(&out_.front());
    }

    void OnDone(const grpc::Status& status) override {
      fleet_.on_done(device_, status);
      delete this;
    }

   private:
    Impl& fleet_;
    Device& device_;
    const uint64_t generation_;
    grpc::ClientContext context_;
    rpc::ServerToWorker in_;
    std::mutex mu_;
    std::deque<rpc::WorkerMessage> out_;  // guarded by mu_
    bool writing_ = false;                // guarded by mu_
    bool closing_ = false;                // guarded by mu_
  };

  struct Device {
    int index = 0;
    std::unique_ptr<rpc::Tuning::Stub> stub;  // over a channel (a connection) of its own
    std::mutex mu;
    Connection* connection = nullptr;  // guarded by mu: the current attempt
    uint64_t generation = 0;           // guarded by mu: of the current attempt
    bool silent = false;               // guarded by mu
    bool attached = false;             // guarded by mu
    bool ever_attached = false;        // guarded by mu
    Backoff backoff;
    explicit Device(const Backoff& b) : backoff(b) {}
  };

  SimulatedFleetOptions options;
  std::shared_ptr<const LandscapeAnswers> answers;
  ClientSecurity security;
  std::vector<std::unique_ptr<Device>> devices;
  Timer timer;

  std::atomic<bool> stopping{false};
  std::atomic<int> attached{0};
  std::atomic<size_t> received{0};
  std::atomic<size_t> sent{0};
  std::mutex mu;
  std::condition_variable live_cv;
  int live = 0;         // guarded by mu: connections gRPC still holds
  std::string refusal;  // guarded by mu

  rpc::WorkerMessage hello_of(const Device& d) const {
    WorkerSessionOptions o = options.worker;
    if (o.description.empty())
      o.description = "simulated device " + std::to_string(d.index) + ", replays " +
                      answers->landscape().header.value("workload", std::string("?"));
    return hello_message(o);
  }

  // Starts a new attempt of the device unless it is silent or the fleet stops.
  void connect(Device& d) {
    std::lock_guard lock(d.mu);
    if (stopping || d.silent || d.connection) return;
    {
      std::lock_guard l(mu);
      ++live;
    }
    d.connection = new Connection(*this, d, ++d.generation);
    d.connection->start();
  }

  // Sends on the device's current stream when it is still attempt `generation`.
  bool send(Device& d, uint64_t generation, rpc::WorkerMessage m) {
    std::lock_guard lock(d.mu);
    if (d.silent || !d.connection || d.generation != generation) return false;
    d.connection->send(std::move(m));
    return true;
  }

  void on_attached(Device& d, uint64_t generation, double heartbeat_s) {
    {
      std::lock_guard lock(d.mu);
      d.attached = true;
      d.ever_attached = true;
      d.backoff.reset();
    }
    ++attached;
    // The first beat at a random point of the interval, so a fleet that attached together does
    // not beat together.
    const double interval = heartbeat_s > 0 ? heartbeat_s : 2;
    heartbeat(d, generation, interval, interval * (0.5 + 0.5 * (d.index % 97) / 97.0));
  }

  void heartbeat(Device& d, uint64_t generation, double interval, double wait) {
    timer.at(after(wait), [this, &d, generation, interval] {
      rpc::WorkerMessage beat;
      beat.mutable_heartbeat();
      if (send(d, generation, std::move(beat))) heartbeat(d, generation, interval, interval);
    });
  }

  void on_candidate(Device& d, uint64_t generation, const rpc::Candidate& c) {
    ++received;
    rpc::WorkerMessage m;
    *m.mutable_result() = answers->answer(c);
    if (options.delay_s <= 0) {
      if (send(d, generation, std::move(m))) ++sent;
      return;
    }
    timer.at(after(options.delay_s), [this, &d, generation, m = std::move(m)]() mutable {
      if (send(d, generation, std::move(m))) ++sent;
    });
  }

  void on_done(Device& d, const grpc::Status& status) {
    bool retry = false;
    {
      std::lock_guard lock(d.mu);
      d.connection = nullptr;
      if (d.attached) --attached;
      d.attached = false;
      retry = !stopping && !d.silent;
      if (retry && is_refusal(status)) {
        retry = false;
        std::lock_guard l(mu);
        // One line for the fleet: its devices share one configuration, and so one refusal.
        if (refusal.empty())
          spdlog::error("the tuning server refused simulated device {}: {}", d.index,
                        status.error_message());
        if (!d.ever_attached && refusal.empty()) refusal = status.error_message();
      }
      if (retry) timer.at(after(d.backoff.next()), [this, &d] { connect(d); });
    }
    std::lock_guard l(mu);
    --live;
    live_cv.notify_all();
  }
};

SimulatedFleet::SimulatedFleet(const SimulatedFleetOptions& options,
                               std::shared_ptr<const LandscapeAnswers> answers)
    : impl_(std::make_unique<Impl>()) {
  Impl& f = *impl_;
  if (options.worker.server.empty())
    throw Error(ErrorKind::kInvalidArgument, "a simulated fleet needs a server address");
  if (options.worker.key.empty())
    throw Error(ErrorKind::kInvalidArgument, "a simulated fleet needs a device key");
  if (options.devices < 1)
    throw Error(ErrorKind::kInvalidArgument, "a simulated fleet needs at least one device");
  if (!answers) throw Error(ErrorKind::kInvalidArgument, "a simulated fleet needs a landscape");
  f.options = options;
  f.options.worker.slots = std::max(f.options.worker.slots, 1);
  f.answers = std::move(answers);
  WorkerSessionOptions& w = f.options.worker;
  if (w.target.empty()) {
    const nlohmann::json& h = f.answers->landscape().header;
    w.target = h.value("target", std::string());
    w.cores = h.value("cores", 1);
    w.vector_bits = h.value("vector_bits", 0);
  }
  f.security =
      load_client_security(w.token_file, w.tls_ca_file, Role::kWorker, w.allow_readable_token);
  for (int i = 0; i < options.devices; ++i) {
    auto d = std::make_unique<Impl::Device>(
        Backoff(w.reconnect_initial_s, w.reconnect_max_s, options.seed + static_cast<uint64_t>(i)));
    d->index = i;
    d->stub = rpc::Tuning::NewStub(make_channel(w.server, f.security, /*own_connection=*/true));
    f.devices.push_back(std::move(d));
  }
  for (auto& d : f.devices) f.connect(*d);
}

SimulatedFleet::~SimulatedFleet() { stop(); }

void SimulatedFleet::stop() {
  Impl& f = *impl_;
  if (f.stopping.exchange(true)) return;
  f.timer.stop();
  for (auto& d : f.devices) {
    std::lock_guard lock(d->mu);
    if (d->connection) d->connection->cancel();
  }
  std::unique_lock lock(f.mu);
  f.live_cv.wait(lock, [&] { return f.live == 0; });
}

int SimulatedFleet::attached() const { return impl_->attached; }

size_t SimulatedFleet::candidates_received() const { return impl_->received; }

size_t SimulatedFleet::results_sent() const { return impl_->sent; }

int SimulatedFleet::silence(int count) {
  int n = 0;
  for (auto& d : impl_->devices) {
    if (n >= count) break;
    std::lock_guard lock(d->mu);
    if (d->silent || !d->attached) continue;
    d->silent = true;
    ++n;
  }
  return n;
}

std::string SimulatedFleet::refused_at_start() const {
  std::lock_guard lock(impl_->mu);
  return impl_->refusal;
}

}  // namespace ktune::rpc_runner
