// The channel runner: parallel builds, then the candidates spread over the channels, one at a time
// on each.
#include "rpc_runner/runner/channel_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <optional>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "rpc_runner/runner/forked_build.h"
#include "rpc_runner/runner/reference.h"
#include "schedule_space/task.h"
#include "support/seconds_since.h"

namespace ktune::rpc_runner {
namespace {

using Clock = std::chrono::steady_clock;

// What decides a build: the workload on its target and the config (its index in the task's space).
std::string build_key(const schedule_space::Task& task, const schedule_space::Config& config) {
  return task.workload_key() + "\n" + task.target().key + "\n" + std::to_string(config.index());
}

}  // namespace

struct ChannelRunner::Reference {
  std::string key;
  std::vector<uint8_t> blob;         // serialized artifact
  std::optional<std::string> error;  // why the reference is unusable
};

namespace {

std::vector<std::unique_ptr<RunnerChannel>> one_channel(std::unique_ptr<RunnerChannel> channel) {
  std::vector<std::unique_ptr<RunnerChannel>> channels;
  channels.push_back(std::move(channel));
  return channels;
}

}  // namespace

ChannelRunner::ChannelRunner(const ChannelRunnerOptions& options,
                             std::unique_ptr<RunnerChannel> channel)
    : ChannelRunner(options, one_channel(std::move(channel))) {}

ChannelRunner::ChannelRunner(const ChannelRunnerOptions& options,
                             std::vector<std::unique_ptr<RunnerChannel>> channels)
    : base_options_(options),
      build_parallelism_(options.build_threads > 0
                             ? options.build_threads
                             : std::max(1u, std::thread::hardware_concurrency())) {
  if (channels.empty()) throw Error(ErrorKind::kInternal, "ChannelRunner needs a channel");
  for (auto& channel : channels) {
    if (!channel) throw Error(ErrorKind::kInternal, "ChannelRunner needs a channel");
    channels_.push_back(ChannelSlot{std::move(channel), {}, 0});
  }
}

ChannelRunner::~ChannelRunner() = default;

ChannelRunner::Reference& ChannelRunner::reference_for(const schedule_space::Task& task) {
  const std::string key = task.workload_key() + "|" + task.target().key;
  // Held while building: a second channel needing the same reference waits for this build.
  std::lock_guard lock(references_mu_);
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

tuner::MeasureResult ChannelRunner::run_candidate(ChannelSlot& slot,
                                                  const schedule_space::Task& task,
                                                  const codegen::Artifact& artifact,
                                                  double build_s) {
  const tuner::MeasureOptions& m = base_options_.measure;
  RunnerChannel& channel = *slot.channel;
  const std::string key = task.workload_key() + "|" + task.target().key;
  // A runner that died with the previous candidate is replaced first: that also forgets the
  // references it held, so they are sent again below.
  const uint64_t epoch = channel.ready();  // may throw kIo: the channel cannot work
  if (epoch != slot.loaded_epoch) {
    slot.loaded_references.clear();
    slot.loaded_epoch = epoch;
  }
  if (m.check_correctness) {
    Reference& ref = reference_for(task);  // its key and blob never change once built
    std::optional<std::string> error;
    {
      std::lock_guard lock(references_mu_);
      error = ref.error;
    }
    if (error) return tuner::make_error_result(ErrorKind::kUnknown, *error, build_s);
    if (!slot.loaded_references.count(ref.key)) {
      Request request;
      request.type = RequestType::kReference;
      request.reference_key = ref.key;
      request.artifact = ref.blob;
      request.measure = base_options_.measure;
      // A runner that crashed once (a transient fault) gets a fresh child and another try before
      // the task's candidates are given up as unknown.
      for (int attempt = 1; attempt <= kReferenceAttempts; ++attempt) {
        error.reset();
        try {
          Reply reply = channel.call(request, base_options_.reference_timeout_s);
          if (reply.error) error = "reference failed: " + reply.message;
        } catch (const Error& e) {
          if (channel.lost()) throw;
          error = std::string("reference failed: ") + e.what();
        }
        if (!error) break;
        if (attempt < kReferenceAttempts) {
          spdlog::warn("{}: {} (attempt {} of {}); retrying", task.workload_key(), *error, attempt,
                       kReferenceAttempts);
          slot.loaded_epoch = channel.ready();  // a fresh runner when the last one died
          slot.loaded_references.clear();
        }
      }
      if (error) {
        spdlog::error("{}: {}", task.workload_key(), *error);
        std::lock_guard lock(references_mu_);
        if (!ref.error) ref.error = error;
        return tuner::make_error_result(ErrorKind::kUnknown, *error, build_s);
      }
      slot.loaded_references.insert(ref.key);
    }
  }

  Request request;
  request.type = RequestType::kMeasure;
  request.reference_key = key;
  request.artifact = artifact.serialize();
  request.measure = m;

  const auto start = Clock::now();
  try {
    Reply reply = channel.call(request, m.run_timeout_s);
    double run_s = seconds_since(start);
    if (reply.error) return tuner::make_error_result(*reply.error, reply.message, build_s, run_s);
    if (reply.costs.empty())
      return tuner::make_error_result(ErrorKind::kUnknown, "runner returned no costs", build_s,
                                      run_s);
    tuner::MeasureResult ok = tuner::make_ok_result(std::move(reply.costs), build_s, run_s);
    ok.outputs = std::move(reply.outputs);
    return ok;
  } catch (const Error& e) {
    if (channel.lost()) throw;  // no later candidate can run on this channel either
    double run_s = seconds_since(start);
    ErrorKind kind = e.kind() == ErrorKind::kRunTimeout ? ErrorKind::kRunTimeout
                     : e.kind() == ErrorKind::kRun      ? ErrorKind::kRun
                                                        : ErrorKind::kUnknown;
    spdlog::debug("runner: {}", e.what());
    return tuner::make_error_result(kind, e.what(), build_s, run_s);
  }
}

void ChannelRunner::run_batch(const std::vector<tuner::MeasureInput>& inputs,
                              const std::vector<std::optional<codegen::Artifact>>& artifacts,
                              const std::vector<double>& build_seconds,
                              std::vector<tuner::MeasureResult>& results) {
  std::vector<ChannelSlot*> live;
  for (auto& slot : channels_)
    if (!slot.channel->lost()) live.push_back(&slot);
  if (live.empty()) {
    channels_.front().channel->ready();  // throws the loss
    throw Error(ErrorKind::kIo, "device lost: no channel left");
  }

  // One channel: run in this thread, and any failure of the channel ends the batch.
  if (live.size() == 1) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (artifacts[i])
        results[i] = run_candidate(*live.front(), *inputs[i].task, *artifacts[i], build_seconds[i]);
    return;
  }

  // Several: a queue in input order; a thread per channel takes the next index when free. A
  // lost channel puts its candidate back at the front (so order is kept as far as possible)
  // and its thread ends; the others wait while candidates are in flight, since one may return.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> queue;        // guarded by mu
  size_t in_flight = 0;            // guarded by mu
  std::exception_ptr fatal;        // guarded by mu: a failure that ends the batch
  std::optional<Error> last_loss;  // guarded by mu
  for (size_t i = 0; i < inputs.size(); ++i)
    if (artifacts[i]) queue.push_back(i);

  auto serve = [&](ChannelSlot& slot) {
    for (;;) {
      size_t i;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return fatal || !queue.empty() || in_flight == 0; });
        if (fatal || queue.empty()) return;
        i = queue.front();
        queue.pop_front();
        ++in_flight;
      }
      try {
        tuner::MeasureResult result =
            run_candidate(slot, *inputs[i].task, *artifacts[i], build_seconds[i]);
        std::lock_guard lock(mu);
        results[i] = std::move(result);
        --in_flight;
        cv.notify_all();
      } catch (const Error& e) {
        std::lock_guard lock(mu);
        --in_flight;
        if (slot.channel->lost()) {
          spdlog::warn("{}; its candidate goes to another device", e.what());
          queue.push_front(i);
          last_loss = e;
        } else if (!fatal) {
          fatal = std::current_exception();
        }
        cv.notify_all();
        return;
      } catch (...) {
        std::lock_guard lock(mu);
        --in_flight;
        if (!fatal) fatal = std::current_exception();
        cv.notify_all();
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(live.size());
  for (ChannelSlot* slot : live) threads.emplace_back(serve, std::ref(*slot));
  for (auto& t : threads) t.join();
  if (fatal) std::rethrow_exception(fatal);
  if (!queue.empty()) {
    // Every channel was lost with candidates left.
    if (last_loss) throw *last_loss;
    throw Error(ErrorKind::kIo, "device lost: no channel left");
  }
}

std::vector<tuner::MeasureResult> ChannelRunner::measure(
    const std::vector<tuner::MeasureInput>& inputs) {
  const tuner::MeasureOptions& m = base_options_.measure;
  const auto build_start = Clock::now();
  std::vector<tuner::MeasureResult> results(inputs.size());
  std::vector<BuildJob> jobs;
  std::vector<size_t> job_input;  // jobs[j] builds inputs[job_input[j]]
  std::vector<double> inst_seconds;
  std::vector<std::optional<codegen::Artifact>> artifacts(inputs.size());
  std::vector<double> build_seconds(inputs.size(), 0.0);
  std::vector<std::string> keys(inputs.size());  // build_key of each input
  jobs.reserve(inputs.size());

  for (size_t i = 0; i < inputs.size(); ++i) {
    const schedule_space::Task& task = *inputs[i].task;
    for (auto& slot : channels_)
      if (!slot.channel->lost()) slot.channel->check_target(task.target().key);
    // Built before (a re-timing round): the same code, so the kept artifact runs again.
    keys[i] = build_key(task, inputs[i].config);
    if (const auto kept = kept_builds_.find(keys[i]); kept != kept_builds_.end()) {
      artifacts[i] = kept->second.artifact;
      build_seconds[i] = kept->second.seconds;
      ++reused_builds_;
      continue;
    }
    // Instantiate here (cheap); the build child gets the scheduled program with its memory.
    const auto inst_start = Clock::now();
    try {
      jobs.push_back(
          BuildJob{task.instantiate(inputs[i].config), task.template_name(), task.target().key});
    } catch (const std::exception& e) {
      results[i] =
          tuner::make_error_result(ErrorKind::kInstantiation, e.what(), seconds_since(inst_start));
      continue;
    }
    job_input.push_back(i);
    inst_seconds.push_back(seconds_since(inst_start));
  }

  // Every build of the batch finishes (or is killed) before the first run: a kernel timed while
  // LLVM compiles on the other cores would be timed slower than it is. Each build runs in a child
  // process that is killed at the build timeout, so a slow build holds no thread of this process.
  std::vector<const BuildJob*> job_ptrs;
  for (const auto& job : jobs) job_ptrs.push_back(&job);
  std::vector<BuildOutcome> built =
      build_in_children(job_ptrs, build_parallelism_, m.build_timeout_s);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const size_t i = job_input[j];
    BuildOutcome& out = built[j];
    const double build_s = inst_seconds[j] + out.seconds;
    if (!out.artifact) {
      results[i] = tuner::make_error_result(out.error, out.message, build_s);
      continue;
    }
    if (kept_builds_.emplace(keys[i], KeptBuild{*out.artifact, build_s}).second) {
      kept_order_.push_back(keys[i]);
      if (kept_order_.size() > kBuildsKept) {
        kept_builds_.erase(kept_order_.front());
        kept_order_.pop_front();
      }
    }
    artifacts[i] = std::move(out.artifact);
    build_seconds[i] = build_s;
  }
  const auto run_start = Clock::now();
  phase_times_.build_s += std::chrono::duration<double>(run_start - build_start).count();
  run_batch(inputs, artifacts, build_seconds, results);
  phase_times_.run_s += seconds_since(run_start);
  return results;
}

}  // namespace ktune::rpc_runner
