// The tuning server's metrics: prometheus-cpp's registry, gauges refreshed from the fleet at each
// collection, counters and histograms fed by the pool and the jobs, civetweb's HTTP endpoint.
#include "rpc_runner/server/server_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <sstream>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

using prometheus::Gauge;
using prometheus::Histogram;

// Seconds, from a millisecond (a log write, a candidate that waited for nothing) to half an hour
// (a candidate queued behind a long job).
const Histogram::BucketBoundaries kWaitBuckets{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800};
const Histogram::BucketBoundaries kBuildRunBuckets{0.001, 0.01, 0.05, 0.1, 0.25, 0.5,
                                                   1,     2.5,  5,    10,  30,   60};
const Histogram::BucketBoundaries kWriteBuckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                0.05,   0.1,   0.25,   0.5,   1,    5};

// Why binding host:port fails, from a probe socket: the Exposer only says that it failed.
std::string bind_failure(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return "not an IPv4 address";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::strerror(errno);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  const int err = errno;
  ::close(fd);
  return bound ? "the HTTP server did not start" : std::strerror(err);
}

}  // namespace

struct ServerMetrics::Impl : prometheus::Collectable {
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
  std::mutex serve_mu;  // guards exposer and port
  std::unique_ptr<prometheus::Exposer> exposer;
  int port = 0;

  // Sets the gauges from a fresh snapshot, then collects every family.
  std::vector<prometheus::MetricFamily> Collect() const override {
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
    : impl_(std::make_shared<Impl>()) {
  impl_->snapshot = std::move(snapshot);
}

ServerMetrics::~ServerMetrics() { stop_serving(); }

void ServerMetrics::queue_wait(const std::string& key, double seconds) {
  impl_->queue_wait.Add({{"key", key}}, kWaitBuckets).Observe(seconds);
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

void ServerMetrics::serve(const std::string& host, int port) {
  std::lock_guard lock(impl_->serve_mu);
  if (impl_->exposer) throw Error(ErrorKind::kInternal, "the metrics are served already");
  const std::string address = host + ":" + std::to_string(port);
  try {
    impl_->exposer = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception&) {
    throw Error(ErrorKind::kIo,
                "cannot serve metrics on " + address + ": " + bind_failure(host, port));
  }
  impl_->exposer->RegisterCollectable(impl_);
  const std::vector<int> ports = impl_->exposer->GetListeningPorts();
  impl_->port = ports.empty() ? port : ports.front();
}

int ServerMetrics::port() const {
  std::lock_guard lock(impl_->serve_mu);
  return impl_->port;
}

void ServerMetrics::stop_serving() {
  std::lock_guard lock(impl_->serve_mu);
  impl_->exposer.reset();
  impl_->port = 0;
}

std::string ServerMetrics::text() {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, impl_->Collect());
  return out.str();
}

}  // namespace ktune::rpc_runner
