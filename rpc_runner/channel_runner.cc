// The channel runner: parallel builds, then the candidates spread over the channels, one at a time on each.
#include "rpc_runner/channel_runner.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <optional>
#include <set>
#include <thread>

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

namespace {

std::vector<std::unique_ptr<RunnerChannel>> one_channel(std::unique_ptr<RunnerChannel> channel) {
  std::vector<std::unique_ptr<RunnerChannel>> channels;
  channels.push_back(std::move(channel));
  return channels;
}

}  // namespace

TimingOptions timing_options(const tuner::MeasureOptions& m, int threads) {
  TimingOptions t;
  t.number = m.number;
  t.repeat = m.repeat;
  t.min_repeat_ms = m.min_repeat_ms;
  t.cooldown_s = m.cooldown_s;
  t.flush_cache = m.flush_cache;
  t.check_correctness = m.check_correctness;
  t.rtol = m.rtol;
  t.atol = m.atol;
  t.threads = threads;
  return t;
}

ChannelRunner::ChannelRunner(const ChannelRunnerOptions& options, std::unique_ptr<RunnerChannel> channel)
    : ChannelRunner(options, one_channel(std::move(channel))) {}

ChannelRunner::ChannelRunner(const ChannelRunnerOptions& options,
                             std::vector<std::unique_ptr<RunnerChannel>> channels)
    : base_options_(options), pool_(options.build_threads) {
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

tuner::MeasureResult ChannelRunner::run_candidate(ChannelSlot& slot, const schedule_space::Task& task,
                                                  const codegen::Artifact& artifact, double build_s) {
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
      request.data_seed = base_options_.data_seed;
      request.timing.threads = base_options_.run_threads;
      try {
        Reply reply = channel.call(request, base_options_.reference_timeout_s);
        if (reply.error) error = "reference failed: " + reply.message;
      } catch (const Error& e) {
        if (channel.lost()) throw;
        error = std::string("reference failed: ") + e.what();
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
  request.data_seed = base_options_.data_seed;
  request.timing = timing_options(m, base_options_.run_threads);

  const auto start = Clock::now();
  try {
    Reply reply = channel.call(request, m.run_timeout_s);
    double run_s = seconds_since(start);
    if (reply.error) return tuner::make_error_result(*reply.error, reply.message, build_s, run_s);
    if (reply.costs.empty())
      return tuner::make_error_result(ErrorKind::kUnknown, "runner returned no costs", build_s, run_s);
    return tuner::make_ok_result(std::move(reply.costs), build_s, run_s);
  } catch (const Error& e) {
    if (channel.lost()) throw;  // no later candidate can run on this channel either
    double run_s = seconds_since(start);
    ErrorKind kind = e.kind() == ErrorKind::kRunTimeout ? ErrorKind::kRunTimeout
                     : e.kind() == ErrorKind::kRun     ? ErrorKind::kRun
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
      if (artifacts[i]) results[i] = run_candidate(*live.front(), *inputs[i].task, *artifacts[i], build_seconds[i]);
    return;
  }

  // Several: a queue in input order; a thread per channel takes the next index when free. A
  // lost channel puts its candidate back at the front (so order is kept as far as possible)
  // and its thread ends; the others wait while candidates are in flight, since one may return.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> queue;       // guarded by mu
  size_t in_flight = 0;           // guarded by mu
  std::exception_ptr fatal;       // guarded by mu: a failure that ends the batch
  std::optional<Error> last_loss; // guarded by mu
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
        tuner::MeasureResult result = run_candidate(slot, *inputs[i].task, *artifacts[i], build_seconds[i]);
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

std::vector<tuner::MeasureResult> ChannelRunner::measure(const std::vector<tuner::MeasureInput>& inputs) {
  const tuner::MeasureOptions& m = base_options_.measure;
  const auto build_start = Clock::now();
  std::vector<tuner::MeasureResult> results(inputs.size());
  std::vector<std::future<BuildOutcome>> builds(inputs.size());
  std::vector<std::shared_ptr<BuildClock>> clocks(inputs.size());

  for (size_t i = 0; i < inputs.size(); ++i) {
    const schedule_space::Task& task = *inputs[i].task;
    for (auto& slot : channels_)
      if (!slot.channel->lost()) slot.channel->check_target(task.target().key);
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
  run_batch(inputs, artifacts, build_seconds, results);
  phase_times_.run_s += seconds_since(run_start);
  return results;
}

}  // namespace ktune::rpc_runner
