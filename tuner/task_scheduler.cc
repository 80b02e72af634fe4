// The multi-task scheduler: warm-up, then Ansor's gradient (or round robin) picks the task of each
// allocation.
#include "tuner/task_scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "support/error.h"

namespace ktune::tuner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

void validate(const TaskSchedulerOptions& o) {
  if (o.strategy != "gradient" && o.strategy != "round_robin")
    throw Error(ErrorKind::kInvalidArgument,
                "unknown task scheduler '" + o.strategy + "' (known: gradient, round_robin)");
  if (o.trials == 0)
    throw Error(ErrorKind::kInvalidArgument, "the trial budget must be at least 1");
  if (o.batch_size == 0)
    throw Error(ErrorKind::kInvalidArgument, "the batch size must be at least 1");
  if (!(o.alpha >= 0 && o.alpha <= 1))
    throw Error(ErrorKind::kInvalidArgument, "alpha must lie in [0, 1]");
  if (!(o.beta > 0) || !std::isfinite(o.beta))
    throw Error(ErrorKind::kInvalidArgument, "beta must be positive");
  if (o.backward_window == 0)
    throw Error(ErrorKind::kInvalidArgument, "the backward window must be at least 1");
  if (!(o.time_budget_s >= 0) || !std::isfinite(o.time_budget_s))
    throw Error(ErrorKind::kInvalidArgument, "the time budget must be 0 (none) or positive");
}

TaskScheduler::TaskScheduler(std::vector<ScheduledTask> tasks, TaskSchedulerOptions options)
    : tasks_(std::move(tasks)), options_(std::move(options)), rng_(options_.seed) {
  validate(options_);
  if (tasks_.empty()) throw Error(ErrorKind::kInvalidArgument, "no task to schedule");
  for (const auto& t : tasks_) {
    if (t.tuner == nullptr)
      throw Error(ErrorKind::kInvalidArgument, "task '" + t.name + "' has no tuner");
    if (!(t.weight > 0) || !std::isfinite(t.weight))
      throw Error(ErrorKind::kInvalidArgument, "task '" + t.name + "' needs a positive weight");
  }
  trials_.assign(tasks_.size(), 0);
  allocations_.assign(tasks_.size(), 0);
  history_.assign(tasks_.size(), {});
  exhausted_.assign(tasks_.size(), false);
}

double TaskScheduler::model_latency() const {
  double sum = 0;
  for (const auto& t : tasks_) sum += t.weight * t.tuner->best_latency();
  return sum;
}

double TaskScheduler::gradient(size_t i) const {
  const ScheduledTask& task = tasks_[i];
  const double best = task.tuner->best_latency();
  const size_t t = allocations_[i];
  // Nothing works yet: worth a few more tries (its share of the model is unknown, maybe large);
  // after a window of failures it gets no estimate (0: only ties pick it).
  if (!std::isfinite(best)) return t < options_.backward_window ? -kInf : 0.0;

  // Backward: what the last `window` allocations actually gained, per allocation.
  double backward = 0;
  const auto& h = history_[i];
  const size_t w = options_.backward_window;
  if (h.size() > w && std::isfinite(h[h.size() - 1 - w]))
    backward = (h.back() - h[h.size() - 1 - w]) / static_cast<double>(w);

  // Forward, optimistic: latency keeps falling like 1/allocations, but a task is not expected to
  // get faster than `beta` times the time its group's best throughput would give it.
  double next = t > 0 ? best - best / static_cast<double>(t) : 0.0;
  double group_flops = 0;
  size_t group_size = 0;
  for (size_t j = 0; j < tasks_.size(); ++j) {
    if (tasks_[j].group != task.group) continue;
    ++group_size;
    const double bj = tasks_[j].tuner->best_latency();
    if (std::isfinite(bj) && bj > 0) group_flops = std::max(group_flops, tasks_[j].flop / bj);
  }
  if (group_size > 1 && group_flops > 0 && task.flop > 0)
    next = std::min(next, options_.beta * task.flop / group_flops);
  const double forward = std::min(next - best, 0.0);

  // d(model latency)/d(best_i) is the task's weight: the model latency is sum_i weight_i x best_i.
  return task.weight * (options_.alpha * backward + (1 - options_.alpha) * forward);
}

size_t TaskScheduler::pick_next() {
  const size_t n = tasks_.size();
  for (size_t i = 0; i < n; ++i)
    if (allocations_[i] < tasks_[i].warmup && !exhausted_[i]) return i;  // warm-up
  if (options_.strategy == "round_robin") {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (next_round_robin_ + k) % n;
      if (!exhausted_[i]) {
        next_round_robin_ = (i + 1) % n;
        return i;
      }
    }
    return n;
  }
  std::vector<size_t> best;
  double lowest = kInf;
  for (size_t i = 0; i < n; ++i) {
    if (exhausted_[i]) continue;
    const double g = gradient(i);
    if (best.empty() || g < lowest) {
      lowest = g;
      best = {i};
    } else if (g == lowest) {
      best.push_back(i);
    }
  }
  if (best.empty()) return n;
  if (best.size() == 1) return best.front();
  return best[std::uniform_int_distribution<size_t>(0, best.size() - 1)(rng_)];
}

std::vector<SchedulerStep> TaskScheduler::run(
    const std::function<void(const SchedulerStep&)>& on_step) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  std::vector<SchedulerStep> steps;
  size_t total = 0;
  out_of_time_ = false;
  while (total < options_.trials) {
    if (options_.time_budget_s > 0 &&
        std::chrono::duration<double>(Clock::now() - start).count() >= options_.time_budget_s) {
      out_of_time_ = true;
      break;
    }
    const size_t i = pick_next();
    if (i >= tasks_.size()) break;
    const size_t measured =
        tasks_[i].tuner->tune(std::min(options_.batch_size, options_.trials - total));
    if (measured == 0) {
      exhausted_[i] = true;
      continue;
    }
    trials_[i] += measured;
    ++allocations_[i];
    history_[i].push_back(tasks_[i].tuner->best_latency());
    total += measured;
    steps.push_back({i, measured, total, model_latency()});
    if (on_step) on_step(steps.back());
  }
  return steps;
}

}  // namespace ktune::tuner
