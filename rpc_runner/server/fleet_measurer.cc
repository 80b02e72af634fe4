// The job's Measurer over the device pool, and the proto forms of tasks, options and results.
#include "rpc_runner/server/fleet_measurer.h"

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "codegen/target.h"
#include "rpc_runner/protocol/peer_checks.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/runner/reference.h"
#include "rpc_runner/server/cross_build.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "support/thread_pool.h"
#include "te/lower.h"

namespace ktune::rpc_runner {

// Builds kernels here for devices that cannot: candidates in a pool of threads, references once.
struct FleetMeasurer::CrossBuilder {
  ThreadPool threads;
  std::map<std::string, std::string> references;  // serialized reference artifact by task key

  const std::string& reference(const schedule_space::Task& task) {
    const std::string key = task.workload_key() + "|" + task.target().key;
    auto it = references.find(key);
    if (it != references.end()) return it->second;
    return references
        .emplace(key, cross_build(lower_reference(task), codegen::Target::parse(task.target().key)))
        .first->second;
  }
};

FleetMeasurer::FleetMeasurer(DevicePool& pool, uint64_t job_id, std::string device_key,
                             FleetMeasurerOptions options, std::function<bool()> stop)
    : pool_(pool),
      job_id_(job_id),
      device_key_(std::move(device_key)),
      options_(std::move(options)),
      stop_(std::move(stop)) {}

FleetMeasurer::~FleetMeasurer() = default;

std::vector<tuner::MeasureResult> FleetMeasurer::measure(
    const std::vector<tuner::MeasureInput>& inputs) {
  // Shared with the callbacks: a result may arrive after this call gave up (job stopped).
  struct Batch {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<tuner::MeasureResult> results;
    size_t remaining = 0;
  };
  auto batch = std::make_shared<Batch>();
  batch->results.resize(inputs.size());
  batch->remaining = inputs.size();

  // Kernels for devices without a compiler: built here, in parallel, before anything is sent.
  std::vector<std::optional<std::string>> kernels(inputs.size());
  const bool built_here = pool_.needs_kernels(device_key_);
  if (built_here) {
    if (!builder_) builder_ = std::make_unique<CrossBuilder>();
    const double timeout = options_.measure.build_timeout_s;
    std::vector<std::future<tuner::MeasureResult>> builds;
    for (size_t i = 0; i < inputs.size(); ++i) {
      builds.push_back(builder_->threads.submit([&, i, timeout] {
        const auto start = std::chrono::steady_clock::now();
        auto seconds = [&] {
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        };
        const schedule_space::Task& task = *inputs[i].task;
        schedule_space::Instantiated inst;
        try {
          inst = task.instantiate(inputs[i].config);
        } catch (const std::exception& e) {
          return tuner::make_error_result(ErrorKind::kInstantiation, e.what(), seconds());
        }
        try {
          // Linked into a shared object: a device without a compiler loads it with dlopen.
          std::string kernel =
              cross_build(te::lower(inst.schedule, inst.args, task.template_name()),
                          codegen::Target::parse(task.target().key));
          if (seconds() > timeout)
            return tuner::make_error_result(
                ErrorKind::kBuildTimeout,
                fmt::format("build took {:.2f} s, over {:g} s", seconds(), timeout), seconds());
          kernels[i] = std::move(kernel);
          tuner::MeasureResult built;
          built.build_s = seconds();
          return built;
        } catch (const std::exception& e) {
          return tuner::make_error_result(ErrorKind::kBuild, e.what(), seconds());
        }
      }));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      tuner::MeasureResult r = builds[i].get();
      if (!kernels[i]) {
        batch->results[i] = std::move(r);
        --batch->remaining;
      }
    }
  }

  for (size_t i = 0; i < inputs.size(); ++i) {
    const schedule_space::Task& task = *inputs[i].task;
    if (built_here && !kernels[i]) continue;  // failed to build here: its result is set
    rpc::Candidate c;
    to_proto(task, c.mutable_task());
    c.set_config_index(inputs[i].config.index());
    c.set_config_json(inputs[i].config.to_json_string());
    to_proto(options_.measure, c.mutable_measure());
    if (kernels[i]) {
      c.set_artifact(std::move(*kernels[i]));
      try {
        c.set_reference_artifact(builder_->reference(task));
      } catch (const std::exception& e) {
        batch->results[i] = tuner::make_error_result(
            ErrorKind::kUnknown, std::string("cannot build the reference: ") + e.what());
        --batch->remaining;
        continue;
      }
    }
    // The ceiling is the worker's calibration at attach (peer_checks.h), times what the
    // template's flop may run above an FMA peak; lanes are the server's view of the target.
    const double flop = task.flop();
    const double multiple = task.template_def().peak_multiple;
    const int lanes = task.target().vector_lanes();
    const tuner::MeasureOptions& measure = options_.measure;
    DevicePool& pool = pool_;
    pool_.submit(
        job_id_, std::move(c),
        [batch, i, flop, multiple, lanes, measure, &pool](const WorkerInfo& w,
                                                          rpc::CandidateResult r) {
          const double ceiling = calibrated_ceiling_gflops(w, measure.run_threads, multiple, lanes);
          CheckedResult checked = check_result(r, result_limits(measure, flop, ceiling));
          tuner::MeasureResult result = std::move(checked.result);
          if (!checked.refusal.empty()) {
            spdlog::warn("refused a result of worker {} (key {}, {}): {}", w.worker_id, w.key,
                         w.peer, checked.refusal);
            pool.flag(w.worker_id, checked.refusal);
            result.error_message = "refused from worker " + w.worker_id + ": " + checked.refusal;
          }
          result.emulated = w.emulated;  // an emulator's timing is never served as the device's
          result.worker = w.worker_id;
          if (result.error == ErrorKind::kUnsupported)
            result.error_message = "worker " + w.worker_id + " (key " + w.key + ", target '" +
                                   w.target + "') cannot run this task: " + result.error_message;
          std::lock_guard lock(batch->mu);
          batch->results[i] = std::move(result);
          --batch->remaining;
          batch->cv.notify_all();
        });
  }
  std::unique_lock lock(batch->mu);
  while (batch->remaining > 0) {
    if (stop_ && stop_()) throw Error(ErrorKind::kIo, "job stopped");
    batch->cv.wait_for(lock, std::chrono::milliseconds(100));
  }
  // A device that cannot run the job's target (another architecture) says nothing about the
  // configs: the job ends with its answer, and nothing of the batch is recorded.
  for (const tuner::MeasureResult& r : batch->results)
    if (r.error == ErrorKind::kUnsupported) throw Error(ErrorKind::kUnsupported, r.error_message);
  return std::move(batch->results);
}

}  // namespace ktune::rpc_runner
