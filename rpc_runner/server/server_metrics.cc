// The tuning server's metrics: prometheus-cpp's registry, gauges refreshed from the fleet at each
// collection, counters and histograms fed by the pool and the jobs, and a small HTTP endpoint.
#include "rpc_runner/server/server_metrics.h"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

using prometheus::Gauge;
using prometheus::Histogram;

// Seconds, from a fraction of a millisecond (a candidate that waited for nothing but dispatching:
// fine enough to read a p99 of a few ms) to half an hour (a candidate queued behind a long job).
const Histogram::BucketBoundaries kWaitBuckets{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                               0.5,    1,     5,     10,    30,   60,   300,  1800};
const Histogram::BucketBoundaries kBuildRunBuckets{0.001, 0.01, 0.05, 0.1, 0.25, 0.5,
                                                   1,     2.5,  5,    10,  30,   60};
const Histogram::BucketBoundaries kWriteBuckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                0.05,   0.1,   0.25,   0.5,   1,    5};

// Threads answering the plain-HTTP port: each idle connection holds one for up to a second.
constexpr size_t kHttpThreads = 64;

// The plain-HTTP port on cpp-httplib: GET /metrics, /healthz and /readyz, answered on its own
// threads (prometheus-cpp's Exposer is not used: the civetweb it embeds runs handlers on 100 KB
// stacks, which glibc's printf overflows in this process).
class HttpEndpoint {
 public:
  // Binds host:port. Throws Error(kIo) with the reason when it cannot.
  HttpEndpoint(const std::string& host, int port, std::function<std::string()> metrics,
               std::function<Readiness()> readiness) {
    const std::string address = host + ":" + std::to_string(port);
    // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server would
    // share a port in use instead of refusing it.
    server_.set_socket_options([this](int sock) {
      const int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      socket_ = sock;
    });
    // A connection holds one of the pool's threads until it is done: idle or slow clients (a
    // scraper's kept-alive connection, or anyone's open socket: the port needs no token) must not
    // hold all of them. Many threads, and a silent connection dropped after a second.
    server_.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
    server_.set_keep_alive_timeout(1);
    server_.set_read_timeout(1, 0);
    server_.set_write_timeout(2, 0);
    server_.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics(), "text/plain; version=0.0.4; charset=utf-8");
    });
    // Alive: the process answers (a probe that restarts a wedged server).
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain; charset=utf-8");
    });
    // Ready: jobs can run (the log takes writes, a worker is attached); 503 says what is missing.
    server_.Get("/readyz", [readiness](const httplib::Request&, httplib::Response& res) {
      const Readiness r = readiness();
      res.status = r.ready() ? 200 : 503;
      res.set_content(r.text(), "text/plain; charset=utf-8");
    });
    const bool bound =
        port == 0 ? (port_ = server_.bind_to_any_port(host)) > 0 : server_.bind_to_port(host, port);
    if (!bound)
      throw Error(ErrorKind::kIo, "cannot serve metrics on " + address + ": " +
                                      (errno != 0 ? std::strerror(errno) : "cannot bind"));
    if (port != 0) port_ = port;
    // Debian's httplib listens with a backlog of 5: connections past it (a burst of idle ones)
    // have their SYNs dropped and retried a second later, a scrape behind them too. listen()
    // again on the bound socket raises it.
    if (socket_ >= 0) ::listen(socket_, SOMAXCONN);
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      listening_done_ = true;
    });
    // httplib's stop() does nothing before its loop runs: wait for the loop, so that a stop right
    // after the start is not lost (and the destructor's join returns).
    while (!server_.is_running() && !listening_done_)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ~HttpEndpoint() {
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }

 private:
  httplib::Server server_;
  int socket_ = -1;  // the listening socket (httplib's)
  int port_ = 0;
  std::atomic<bool> listening_done_{false};
  std::thread thread_;
};

}  // namespace

struct ServerMetrics::Impl {
  std::function<FleetSnapshot()> snapshot;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  // Gauges: replaced at each collection, so a key no worker or job uses any more disappears.
  prometheus::Family<Gauge>& devices = prometheus::BuildGauge()
                                           .Name("ktune_devices")
                                           .Help("Device workers attached, by key and state")
                                           .Register(*registry);
  prometheus::Family<Gauge>& slots = prometheus::BuildGauge()
                                         .Name("ktune_device_slots")
                                         .Help("Candidate slots of the attached workers, by key")
                                         .Register(*registry);
  prometheus::Family<Gauge>& in_flight = prometheus::BuildGauge()
                                             .Name("ktune_candidates_in_flight")
                                             .Help("Candidates on workers now, by key")
                                             .Register(*registry);
  prometheus::Family<Gauge>& queue_depth =
      prometheus::BuildGauge()
          .Name("ktune_queue_depth")
          .Help("Candidates waiting for a worker, by device key")
          .Register(*registry);
  prometheus::Family<Gauge>& jobs = prometheus::BuildGauge()
                                        .Name("ktune_jobs")
                                        .Help("Jobs of the server's log, by state")
                                        .Register(*registry);
  prometheus::Family<prometheus::Counter>& trials =
      prometheus::BuildCounter()
          .Name("ktune_trials_total")
          .Help("Trials the server's jobs wrote to the log, by device key")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& errors =
      prometheus::BuildCounter()
          .Name("ktune_trial_errors_total")
          .Help("Logged trials that failed, by device key and error kind")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& requeued =
      prometheus::BuildCounter()
          .Name("ktune_candidates_requeued_total")
          .Help("Candidates taken back from a lost worker and queued again, by device key")
          .Register(*registry);
  prometheus::Family<Histogram>& queue_wait =
      prometheus::BuildHistogram()
          .Name("ktune_queue_wait_seconds")
          .Help("Time a candidate waited for a worker, by device key")
          .Register(*registry);
  prometheus::Family<Histogram>& build =
      prometheus::BuildHistogram()
          .Name("ktune_build_seconds")
          .Help("Build time of a logged trial that built, by device key")
          .Register(*registry);
  prometheus::Family<Histogram>& run =
      prometheus::BuildHistogram()
          .Name("ktune_run_seconds")
          .Help("Run and check time of a logged trial that ran, by device key")
          .Register(*registry);
  Histogram& log_write = prometheus::BuildHistogram()
                             .Name("ktune_log_write_seconds")
                             .Help("Time to write one measured batch to the log")
                             .Register(*registry)
                             .Add({}, kWriteBuckets);

  // One collection at a time: it replaces the gauges (the families themselves are thread-safe).
  mutable std::mutex collect_mu;
  mutable std::vector<std::pair<prometheus::Family<Gauge>*, Gauge*>> gauges;  // by collect_mu
  std::mutex serve_mu;                                                        // guards endpoint
  std::unique_ptr<HttpEndpoint> endpoint;

  // Sets the gauges from a fresh snapshot, then collects every family.
  std::vector<prometheus::MetricFamily> collect() const {
    const FleetSnapshot now = snapshot();
    std::lock_guard lock(collect_mu);
    for (auto [family, gauge] : gauges) family->Remove(gauge);
    gauges.clear();
    auto set = [&](prometheus::Family<Gauge>& family, const prometheus::Labels& labels,
                   double value) {
      Gauge& g = family.Add(labels);
      g.Set(value);
      gauges.emplace_back(&family, &g);
    };
    struct Fleet {
      int idle = 0, busy = 0, slots = 0, in_flight = 0;
    };
    std::map<std::string, Fleet> by_key;
    for (const WorkerInfo& w : now.workers) {
      Fleet& f = by_key[w.key];
      ++(w.in_flight > 0 ? f.busy : f.idle);
      f.slots += w.slots;
      f.in_flight += w.in_flight;
    }
    for (const auto& [key, f] : by_key) {
      set(devices, {{"key", key}, {"state", "idle"}}, f.idle);
      set(devices, {{"key", key}, {"state", "busy"}}, f.busy);
      set(slots, {{"key", key}}, f.slots);
      set(in_flight, {{"key", key}}, f.in_flight);
    }
    for (const auto& [key, n] : now.queued) set(queue_depth, {{"key", key}}, n);
    std::map<tuning_db::JobState, int> by_state;
    for (const JobStatus& j : now.jobs) ++by_state[j.state];
    for (auto state :
         {tuning_db::JobState::kQueued, tuning_db::JobState::kRunning, tuning_db::JobState::kDone,
          tuning_db::JobState::kFailed, tuning_db::JobState::kCancelled})
      set(jobs, {{"state", std::string(tuning_db::to_string(state))}}, by_state[state]);
    return registry->Collect();
  }
};

ServerMetrics::ServerMetrics(std::function<FleetSnapshot()> snapshot)
    : impl_(std::make_unique<Impl>()) {
  impl_->snapshot = std::move(snapshot);
}

ServerMetrics::~ServerMetrics() { stop_serving(); }

void ServerMetrics::queue_wait(const std::string& key, double seconds) {
  impl_->queue_wait.Add({{"key", key}}, kWaitBuckets).Observe(seconds);
}

void ServerMetrics::requeued(const std::string& key, size_t candidates) {
  impl_->requeued.Add({{"key", key}}).Increment(static_cast<double>(candidates));
}

void ServerMetrics::logged(const std::string& key, const std::vector<tuner::MeasureResult>& results,
                           double write_s) {
  impl_->log_write.Observe(write_s);
  impl_->trials.Add({{"key", key}}).Increment(static_cast<double>(results.size()));
  Histogram& build = impl_->build.Add({{"key", key}}, kBuildRunBuckets);
  Histogram& run = impl_->run.Add({{"key", key}}, kBuildRunBuckets);
  for (const tuner::MeasureResult& r : results) {
    // As the log records it (tuner/db_log): a result without costs is an error of unknown kind.
    if (!r.ok())
      impl_->errors
          .Add({{"key", key},
                {"kind", std::string(to_string(r.error.value_or(ErrorKind::kUnknown)))}})
          .Increment();
    if (r.build_s > 0) build.Observe(r.build_s);
    if (r.run_s > 0) run.Observe(r.run_s);
  }
}

std::string Readiness::text() const {
  return "log: " + (log_problem.empty() ? std::string("takes writes") : log_problem) +
         "\nworkers: " + std::to_string(workers) + " attached\n" +
         (ready() ? "ready\n" : "not ready\n");
}

void ServerMetrics::serve(const std::string& host, int port, std::function<Readiness()> readiness) {
  std::lock_guard lock(impl_->serve_mu);
  if (impl_->endpoint) throw Error(ErrorKind::kInternal, "the metrics are served already");
  impl_->endpoint = std::make_unique<HttpEndpoint>(
      host, port, [this] { return text(); }, std::move(readiness));
}

int ServerMetrics::port() const {
  std::lock_guard lock(impl_->serve_mu);
  return impl_->endpoint ? impl_->endpoint->port() : 0;
}

void ServerMetrics::stop_serving() {
  std::unique_ptr<HttpEndpoint> endpoint;
  {
    std::lock_guard lock(impl_->serve_mu);
    endpoint = std::move(impl_->endpoint);
  }
  endpoint.reset();  // joins its thread outside the lock (an answer may be under way)
}

std::string ServerMetrics::text() {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, impl_->collect());
  return out.str();
}

}  // namespace ktune::rpc_runner
