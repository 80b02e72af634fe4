// The device worker: a WorkerSession whose candidates are built and measured by LocalRunners, or
// only measured by a PrebuiltRunner when the server sent their kernels.
#include "rpc_runner/worker/device_worker.h"

#include <unistd.h>

#include <atomic>
#include <map>

#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/runner/local_runner.h"
#include "rpc_runner/worker/prebuilt_runner.h"
#include "rpc_runner/worker/worker_session.h"
#include "schedule_space/task.h"
#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

std::string default_description(const codegen::Target& host) {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  return "cpu " + host.cpu() + ", " + host.triple() + ", " + std::to_string(host.cores()) +
         " cores" + (name[0] ? std::string(", host ") + name : "");
}

rpc::CandidateResult to_proto(uint64_t id, const tuner::MeasureResult& m) {
  rpc::CandidateResult r;
  r.set_id(id);
  for (double c : m.costs) r.add_costs(c);
  r.set_outputs(m.outputs);
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
  codegen::Target host = codegen::Target::host();

  // Used by the session's measuring thread only (one batch at a time).
  std::map<std::string, std::unique_ptr<LocalRunner>> runners;         // by MeasureSpec bytes
  std::map<std::string, std::unique_ptr<schedule_space::Task>> tasks;  // by TaskSpec bytes
  std::atomic<size_t> runners_started_before{0};  // children of runners already dropped
  std::atomic<size_t> built{0};
  // Kernels cross-built by the server run on a child of their own, with the references it holds.
  std::unique_ptr<PrebuiltRunner> prebuilt;
  std::unique_ptr<WorkerSession> session;  // last: it calls into the members above

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
    o.measure = from_proto(m);
    return *runners.emplace(key, std::make_unique<LocalRunner>(o)).first->second;
  }

  // The task of a spec, rebuilt with exactly the server's traits so config indices agree.
  const schedule_space::Task& task_for(const rpc::TaskSpec& spec, const std::string& target) {
    const std::string key = spec.SerializeAsString();
    auto it = tasks.find(key);
    if (it != tasks.end()) return *it->second;
    if (spec.target() != target)
      throw Error(ErrorKind::kUnsupported,
                  "this worker runs '" + target + "', not '" + spec.target() + "'");
    auto task = std::make_unique<schedule_space::Task>(from_proto(spec));
    return *tasks.emplace(key, std::move(task)).first->second;
  }

  // Measures candidates of one setting as one batch (parallel builds, then runs one at a time).
  std::vector<rpc::CandidateResult> measure(const std::vector<rpc::Candidate>& batch,
                                            const std::string& target) {
    std::vector<rpc::CandidateResult> out(batch.size());
    std::vector<tuner::MeasureInput> inputs;
    std::vector<size_t> where;
    for (size_t i = 0; i < batch.size(); ++i) {
      const rpc::Candidate& c = batch[i];
      if (!c.artifact().empty()) {
        out[i] = prebuilt->run(c, target);
        continue;
      }
      try {
        const schedule_space::Task& task = task_for(c.task(), target);
        schedule_space::Config config = task.space().get(c.config_index());
        if (config.to_json() != schedule_space::Config::from_json_string(c.config_json()).to_json())
          throw Error(ErrorKind::kInstantiation,
                      "config " + std::to_string(c.config_index()) +
                          " means another schedule on this worker (ktune versions differ?)");
        inputs.push_back({&task, std::move(config)});
        where.push_back(i);
      } catch (const Error& e) {
        const ErrorKind kind =
            e.kind() == ErrorKind::kInstantiation || e.kind() == ErrorKind::kUnsupported
                ? e.kind()
                : ErrorKind::kUnknown;
        out[i] = error_result(c.id(), kind, e.what());
      }
    }
    if (inputs.empty()) return out;
    try {
      std::vector<tuner::MeasureResult> results =
          runner_for(batch[where.front()].measure()).measure(inputs);
      built += inputs.size();
      for (size_t j = 0; j < where.size(); ++j)
        out[where[j]] = to_proto(batch[where[j]].id(), results[j]);
    } catch (const Error& e) {
      for (size_t i : where) out[i] = error_result(batch[i].id(), ErrorKind::kUnknown, e.what());
    }
    return out;
  }
};

DeviceWorker::DeviceWorker(const DeviceWorkerOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.options = options;
  if (options.server.empty())
    throw Error(ErrorKind::kInvalidArgument, "a worker needs a server address");
  if (options.key.empty()) throw Error(ErrorKind::kInvalidArgument, "a worker needs a device key");
  if (w.options.runner_path.empty()) w.options.runner_path = default_runner_path();
  if (::access(w.options.runner_path.c_str(), X_OK) != 0)
    throw Error(ErrorKind::kIo, "runner executable not found: " + w.options.runner_path);
  if (w.options.target.empty()) w.options.target = w.host.str();
  if (w.options.description.empty()) w.options.description = default_description(w.host);
  if (w.options.slots <= 0) w.options.slots = w.host.cores();
  w.prebuilt = std::make_unique<PrebuiltRunner>(w.options.runner_path);
  WorkerSessionOptions s;
  s.server = options.server;
  s.key = options.key;
  s.target = w.options.target;
  s.description = w.options.description;
  s.cores = w.host.cores();
  s.vector_bits = w.host.vector_bits();
  s.slots = w.options.slots;
  s.can_build = options.can_build;
  s.emulated = options.emulated;
  s.peak_gflops = options.peak_gflops;
  s.token_file = options.token_file;
  s.allow_readable_token = options.allow_readable_token;
  s.tls_ca_file = options.tls_ca_file;
  s.reconnect_initial_s = options.reconnect_initial_s;
  s.reconnect_max_s = options.reconnect_max_s;
  s.protocol_version = options.protocol_version;
  w.session = std::make_unique<WorkerSession>(
      s, [&w](const std::vector<rpc::Candidate>& batch, const std::string& target) {
        return w.measure(batch, target);
      });
}

DeviceWorker::~DeviceWorker() { stop(); }

void DeviceWorker::stop() { impl_->session->stop(); }

bool DeviceWorker::attached() const { return impl_->session->attached(); }

size_t DeviceWorker::results_sent() const { return impl_->session->results_sent(); }

size_t DeviceWorker::runners_started() const {
  // Read after stop() or between candidates in tests; the map is the measuring thread's.
  size_t n = impl_->runners_started_before + impl_->prebuilt->started();
  for (const auto& [k, r] : impl_->runners) n += r->runners_started();
  return n;
}

size_t DeviceWorker::built_here() const { return impl_->built; }

size_t DeviceWorker::prebuilt() const { return impl_->prebuilt->measured(); }

std::string DeviceWorker::last_refusal() const { return impl_->session->last_refusal(); }

std::string DeviceWorker::refused_at_start() const { return impl_->session->refused_at_start(); }

}  // namespace ktune::rpc_runner
