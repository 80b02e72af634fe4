// The tuning loop.
#include "tuner/tune.h"
#include "support/seconds_since.h"

#include <algorithm>
#include <chrono>
#include <unordered_set>

#include <spdlog/spdlog.h>

namespace ktune::tuner {
namespace {

using Clock = std::chrono::steady_clock;

// Batches in a row made only of known configs before the tuner is taken as exhausted.
constexpr size_t kMaxStaleRounds = 100;

// Keeps the best successful result and its config.
void consider(TuneResult& out, const schedule_space::Task& task,
              const schedule_space::Config& config, const MeasureResult& result, bool is_new,
              bool& improved) {
  improved = false;
  if (!result.ok()) return;
  if (out.best_config && result.mean_cost() >= out.best_result.mean_cost()) return;
  out.best_config = config;
  out.best_result = result;
  out.best_gflops = task.flop() / result.mean_cost() / 1e9;
  out.best_is_new = is_new;
  improved = true;
}

}  // namespace

TuneResult tune(const schedule_space::Task& task, Tuner& tuner, Measurer& measurer,
                const TuneOptions& options) {
  const auto start = Clock::now();
  TuneResult out;
  out.best_result.error = ErrorKind::kUnknown;
  out.best_result.error_message = "no successful measurement";
  const size_t batch_size = std::max<size_t>(options.batch_size, 1);

  std::unordered_set<uint64_t> seen;
  if (!options.resume.empty()) {
    std::vector<MeasureInput> inputs;
    std::vector<MeasureResult> results;
    for (const auto& past : options.resume) {
      if (!seen.insert(past.config.index()).second) continue;
      inputs.push_back({&task, past.config});
      results.push_back(past.result);
      bool improved = false;
      consider(out, task, past.config, past.result, false, improved);
    }
    out.n_resumed = inputs.size();
    auto t = Clock::now();
    tuner.update(inputs, results);
    out.tuner_s += seconds_since(t);
  }

  size_t since_improvement = 0;
  size_t stale_rounds = 0;
  while (out.n_measured < options.n_trial) {
    if (options.should_stop && options.should_stop()) {
      out.cancelled = true;
      break;
    }
    if (!tuner.has_next()) {
      out.space_exhausted = true;
      break;
    }
    const size_t want = std::min(batch_size, options.n_trial - out.n_measured);
    auto t = Clock::now();
    std::vector<schedule_space::Config> configs = tuner.next_batch(want);
    out.tuner_s += seconds_since(t);

    std::vector<MeasureInput> inputs;
    for (auto& config : configs) {
      // A tuner that proposes a config twice (or one from the log) wastes no measurement.
      if (inputs.size() == want) break;
      if (!seen.insert(config.index()).second) continue;
      inputs.push_back({&task, std::move(config)});
    }
    if (options.claim && !inputs.empty()) {
      const std::vector<bool> granted = options.claim(inputs);
      std::vector<MeasureInput> mine;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (i < granted.size() && granted[i]) {
          mine.push_back(std::move(inputs[i]));
        } else {
          ++out.n_claimed_elsewhere;
        }
      }
      inputs = std::move(mine);
      if (inputs.empty() && !configs.empty()) {
        // Another run has all of them: ask again, but not forever.
        if (++stale_rounds >= kMaxStaleRounds) {
          out.space_exhausted = true;
          break;
        }
        continue;
      }
    }
    if (inputs.empty()) {
      if (configs.empty()) {
        out.space_exhausted = true;
        break;
      }
      // Everything proposed was known; ask again, but not forever.
      if (++stale_rounds >= kMaxStaleRounds) {
        out.space_exhausted = true;
        break;
      }
      continue;
    }
    stale_rounds = 0;

    t = Clock::now();
    std::vector<MeasureResult> results = measurer.measure(inputs);
    out.measure_s += seconds_since(t);
    if (results.size() != inputs.size())
      throw Error(ErrorKind::kInternal, "measurer returned " + std::to_string(results.size()) +
                                            " results for " + std::to_string(inputs.size()) +
                                            " inputs");

    for (size_t i = 0; i < inputs.size(); ++i) {
      const MeasureResult& r = results[i];
      ++out.n_measured;
      out.build_s += r.build_s;
      out.run_s += r.run_s;
      if (r.ok()) {
        ++out.n_ok;
      } else {
        ++out.errors[r.error.value_or(ErrorKind::kUnknown)];
        spdlog::debug("config {}: {}: {}", inputs[i].config.index(),
                      to_string(r.error.value_or(ErrorKind::kUnknown)), r.error_message);
      }
      bool improved = false;
      consider(out, task, inputs[i].config, r, true, improved);
      since_improvement = improved ? 0 : since_improvement + 1;
    }

    if (options.log) options.log(inputs, results);
    t = Clock::now();
    tuner.update(inputs, results);
    out.tuner_s += seconds_since(t);
    for (const auto& callback : options.callbacks) callback(inputs, results);

    if (options.early_stopping > 0 && since_improvement >= options.early_stopping &&
        out.n_measured < options.n_trial) {
      out.stopped_early = true;
      spdlog::info("early stopping: no better config in the last {} trials", since_improvement);
      break;
    }
  }
  out.wall_s = seconds_since(start);
  return out;
}

}  // namespace ktune::tuner
