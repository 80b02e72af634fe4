// The channel runner: parallel builds, then one candidate at a time through the channel.
#include "rpc_runner/channel_runner.h"

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "rpc_runner/reference.h"
#include "schedule_space/task.h"
#include "te/lower.h"

namespace ktune::rpc_runner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What a build job hands back: an artifact, or the failed result.
struct BuildOutcome {
  std::optional<codegen::Artifact> artifact;
  tuner::MeasureResult failure;
  double build_s = 0;
};

// Set by the build job when a pool thread picks it up, so that queue time is not counted.
struct BuildClock {
  std::atomic<int64_t> start_ns{0};  // 0 = still queued
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

struct ChannelRunner::Reference {
  std::string key;
  std::vector<uint8_t> blob;        // serialized artifact
  std::optional<std::string> error; // why the reference is unusable
};

ChannelRunner::ChannelRunner(const ChannelRunnerOptions& options, std::unique_ptr<RunnerChannel> channel)
    : base_options_(options), pool_(options.build_threads), channel_(std::move(channel)) {
  if (!channel_) throw Error(ErrorKind::kInternal, "ChannelRunner needs a channel");
}

ChannelRunner::~ChannelRunner() = default;

ChannelRunner::Reference& ChannelRunner::reference_for(const schedule_space::Task& task) {
  const std::string key = task.workload_key() + "|" + task.target().key;
  auto it = references_.find(key);
  if (it != references_.end()) return *it->second;
  auto ref = std::make_unique<Reference>();
  ref->key = key;
  try {
    codegen::Target target = codegen::Target::parse(task.target().key);
    ref->blob = codegen::build(lower_reference(task), target).serialize();
  } catch (const std::exception& e) {
    ref->error = std::string("cannot build the reference: ") + e.what();
    spdlog::error("{}: {}", task.workload_key(), *ref->error);
  }
  return *references_.emplace(key, std::move(ref)).first->second;
}

tuner::MeasureResult ChannelRunner::run_candidate(const schedule_space::Task& task,
                                                const codegen::Artifact& artifact, double build_s) {
  const tuner::MeasureOptions& m = base_options_.measure;
  const std::string key = task.workload_key() + "|" + task.target().key;
  // A runner that died with the previous candidate is replaced first: that also forgets the
  // references it held, so they are sent again below.
  const uint64_t epoch = channel_->ready();  // may throw kIo: the measurer cannot work
  if (epoch != loaded_epoch_) {
    loaded_references_.clear();
    loaded_epoch_ = epoch;
  }
  if (m.check_correctness) {
    Reference& ref = reference_for(task);
    if (ref.error) return tuner::make_error_result(ErrorKind::kUnknown, *ref.error, build_s);
    if (!loaded_references_.count(ref.key)) {
      Request request;
      request.type = RequestType::kReference;
      request.reference_key = ref.key;
      request.artifact = ref.blob;
      request.data_seed = base_options_.data_seed;
      request.timing.threads = base_options_.run_threads;
      try {
        Reply reply = channel_->call(request, base_options_.reference_timeout_s);
        if (reply.error) ref.error = "reference failed: " + reply.message;
      } catch (const Error& e) {
        if (channel_->lost()) throw;
        ref.error = std::string("reference failed: ") + e.what();
      }
      if (ref.error) {
        spdlog::error("{}: {}", task.workload_key(), *ref.error);
        return tuner::make_error_result(ErrorKind::kUnknown, *ref.error, build_s);
      }
      loaded_references_.insert(ref.key);
    }
  }

  Request request;
  request.type = RequestType::kMeasure;
  request.reference_key = key;
  request.artifact = artifact.serialize();
  request.data_seed = base_options_.data_seed;
  TimingOptions& t = request.timing;
  t.number = m.number;
  t.repeat = m.repeat;
  t.min_repeat_ms = m.min_repeat_ms;
  t.cooldown_s = m.cooldown_s;
  t.flush_cache = m.flush_cache;
  t.check_correctness = m.check_correctness;
  t.rtol = m.rtol;
  t.atol = m.atol;
  t.threads = base_options_.run_threads;

  const auto start = Clock::now();
  try {
    Reply reply = channel_->call(request, m.run_timeout_s);
    double run_s = seconds_since(start);
    if (reply.error) return tuner::make_error_result(*reply.error, reply.message, build_s, run_s);
    if (reply.costs.empty())
      return tuner::make_error_result(ErrorKind::kUnknown, "runner returned no costs", build_s, run_s);
    return tuner::make_ok_result(std::move(reply.costs), build_s, run_s);
  } catch (const Error& e) {
    if (channel_->lost()) throw;  // no later candidate can run either
    double run_s = seconds_since(start);
    ErrorKind kind = e.kind() == ErrorKind::kRunTimeout ? ErrorKind::kRunTimeout
                     : e.kind() == ErrorKind::kRun     ? ErrorKind::kRun
                                                       : ErrorKind::kUnknown;
    spdlog::debug("runner: {}", e.what());
    return tuner::make_error_result(kind, e.what(), build_s, run_s);
  }
}

std::vector<tuner::MeasureResult> ChannelRunner::measure(const std::vector<tuner::MeasureInput>& inputs) {
  const tuner::MeasureOptions& m = base_options_.measure;
  const auto build_start = Clock::now();
  std::vector<tuner::MeasureResult> results(inputs.size());
  std::vector<std::future<BuildOutcome>> builds(inputs.size());
  std::vector<std::shared_ptr<BuildClock>> clocks(inputs.size());

  for (size_t i = 0; i < inputs.size(); ++i) {
    const schedule_space::Task& task = *inputs[i].task;
    channel_->check_target(task.target().key);
    // Instantiate here (cheap) so that a build job owns everything it touches and may
    // outlive this call when abandoned after a build timeout.
    auto clock = std::make_shared<BuildClock>();
    clocks[i] = clock;
    const auto inst_start = Clock::now();
    std::optional<schedule_space::Instantiated> inst;
    try {
      inst = task.instantiate(inputs[i].config);
    } catch (const Error& e) {
      results[i] = tuner::make_error_result(ErrorKind::kInstantiation, e.what(), seconds_since(inst_start));
      continue;
    } catch (const std::exception& e) {
      results[i] = tuner::make_error_result(ErrorKind::kInstantiation, e.what(), seconds_since(inst_start));
      continue;
    }
    double inst_s = seconds_since(inst_start);
    std::string target_key = task.target().key;
    std::string name = task.template_name();
    builds[i] = pool_.submit([clock, inst = std::move(*inst), target_key, name, inst_s]() {
      clock->start_ns = now_ns();
      const auto start = Clock::now();
      BuildOutcome out;
      try {
        te::LoweredFunc func = te::lower(inst.schedule, inst.args, name);
        out.artifact = codegen::build(func, codegen::Target::parse(target_key));
      } catch (const Error& e) {
        ErrorKind kind = e.kind() == ErrorKind::kInstantiation ? ErrorKind::kInstantiation : ErrorKind::kBuild;
        out.failure = tuner::make_error_result(kind, e.what());
      } catch (const std::exception& e) {
        out.failure = tuner::make_error_result(ErrorKind::kBuild, e.what());
      }
      out.build_s = inst_s + seconds_since(start);
      out.failure.build_s = out.build_s;
      return out;
    });
  }

  // Every build of the batch finishes before the first run: a kernel timed while LLVM
  // compiles on the other cores would be timed slower than it is.
  std::vector<std::optional<codegen::Artifact>> artifacts(inputs.size());
  std::vector<double> build_seconds(inputs.size(), 0.0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!builds[i].valid()) continue;  // failed to instantiate
    bool timed_out = false;
    while (builds[i].wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
      int64_t started = clocks[i]->start_ns.load();
      if (started != 0 && (now_ns() - started) * 1e-9 > m.build_timeout_s) {
        timed_out = true;
        break;
      }
    }
    if (timed_out) {
      // The job keeps its pool thread until LLVM returns; its result is dropped.
      results[i] = tuner::make_error_result(
          ErrorKind::kBuildTimeout, "build exceeded " + std::to_string(m.build_timeout_s) + " s",
          m.build_timeout_s);
      continue;
    }
    BuildOutcome out = builds[i].get();
    // A build that finished while an earlier one was awaited is judged by its own duration.
    if (out.build_s > m.build_timeout_s) {
      results[i] = tuner::make_error_result(
          ErrorKind::kBuildTimeout,
          "build took " + std::to_string(out.build_s) + " s, over " +
              std::to_string(m.build_timeout_s) + " s",
          out.build_s);
      continue;
    }
    if (!out.artifact) {
      results[i] = std::move(out.failure);
      continue;
    }
    artifacts[i] = std::move(out.artifact);
    build_seconds[i] = out.build_s;
  }
  const auto run_start = Clock::now();
  phase_times_.build_s += std::chrono::duration<double>(run_start - build_start).count();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (artifacts[i]) results[i] = run_candidate(*inputs[i].task, *artifacts[i], build_seconds[i]);
  }
  phase_times_.run_s += seconds_since(run_start);
  return results;
}

}  // namespace ktune::rpc_runner
