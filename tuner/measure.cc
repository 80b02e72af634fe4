// Helpers of MeasureResult.
#include "tuner/measure.h"

#include <chrono>
#include <limits>
#include <numeric>

namespace ktune::tuner {
namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

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
