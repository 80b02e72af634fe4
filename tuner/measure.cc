// Helpers of MeasureResult.
#include "tuner/measure.h"

#include <chrono>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "support/error.h"

namespace ktune::tuner {
namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `value` within [lo, hi] (NaN is not): else one line naming `what` and the range.
void check_range(double value, double lo, double hi, const char* what) {
  if (!(value >= lo && value <= hi))
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{} must be between {:g} and {:g}, not {}", what, lo, hi, value));
}

}  // namespace

void validate(const MeasureOptions& o) {
  check_range(o.number, 1, kMaxNumber, "number (runs per timing)");
  check_range(o.repeat, 1, kMaxRepeat, "repeat (timings per config)");
  check_range(o.min_repeat_ms, 0, kMaxMinRepeatMs, "min_repeat_ms");
  check_range(o.build_timeout_s, kMinTimeoutS, kMaxTimeoutS, "the build timeout (s)");
  check_range(o.run_timeout_s, kMinTimeoutS, kMaxTimeoutS, "the run timeout (s)");
  check_range(o.cooldown_s, 0, kMaxCooldownS, "the cooldown (s)");
  check_range(o.rtol, 0, 1, "rtol");
  check_range(o.atol, 0, 1, "atol");
  check_range(o.run_threads, 0, kMaxRunThreads, "run_threads");
}

double MeasureResult::mean_cost() const {
  if (!ok()) return std::numeric_limits<double>::infinity();
  return std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
}

MeasureResult make_ok_result(std::vector<double> costs, double build_s, double run_s) {
  MeasureResult r;
  r.costs = std::move(costs);
  r.build_s = build_s;
  r.run_s = run_s;
  r.timestamp = unix_now();
  return r;
}

MeasureResult make_error_result(ErrorKind kind, std::string message, double build_s, double run_s) {
  MeasureResult r;
  r.error = kind;
  r.error_message = std::move(message);
  r.build_s = build_s;
  r.run_s = run_s;
  r.timestamp = unix_now();
  return r;
}

}  // namespace ktune::tuner
