// The checks of what a device worker sends: hello fields, result costs and times, free text.
#include "rpc_runner/protocol/peer_checks.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "rpc_runner/protocol/service_convert.h"
#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

bool printable(std::string_view text) { return first_control(text) == std::string_view::npos; }

// What a record may keep as its kind: the measurement kinds, and kUnsupported (a device that
// cannot run the task ends the job with that answer).
bool measurement_kind(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInstantiation:
    case ErrorKind::kBuild:
    case ErrorKind::kBuildTimeout:
    case ErrorKind::kRun:
    case ErrorKind::kRunTimeout:
    case ErrorKind::kWrongAnswer:
    case ErrorKind::kWorkerLost:
    case ErrorKind::kUnsupported:
    case ErrorKind::kUnknown:
      return true;
    default:
      return false;
  }
}

bool time_in_range(double s, double max_s) { return std::isfinite(s) && s >= 0 && s <= max_s; }

// Why the costs of an ok result are refused, or "".
std::string check_costs(const rpc::CandidateResult& r, const ResultLimits& limits) {
  if (r.costs_size() == 0) return "an ok result without costs";
  if (r.costs_size() > limits.max_costs)
    return fmt::format("{} costs for {} timings", r.costs_size(), limits.max_costs);
  for (double c : r.costs()) {
    if (!std::isfinite(c) || c <= 0) return fmt::format("a cost of {} s", c);
    if (c > limits.max_cost_s)
      return fmt::format("a cost of {:.4g} s is over the run timeout of {:g} s", c,
                         limits.max_cost_s);
    if (c < limits.min_cost_s)
      return fmt::format("a cost of {:.4g} s is faster than the device's ceiling allows ({:.4g} s)",
                         c, limits.min_cost_s);
  }
  return "";
}

}  // namespace

double peak_ceiling_gflops(int cores, int vector_lanes) {
  return std::clamp(cores, 1, kMaxCores) * std::max(vector_lanes, 1) * kFmaPortsCeiling * 2.0 *
         kClockGhzCeiling;
}

std::map<std::string, std::string> calibration_args(int lanes, int copies) {
  return {{"lanes", std::to_string(std::max(lanes, 1))},
          {"copies", std::to_string(std::clamp(copies, 1, kMaxCores))}};
}

tuner::MeasureOptions calibration_measure(int run_threads) {
  tuner::MeasureOptions m;
  m.number = 1;
  m.repeat = 5;
  m.min_repeat_ms = 20;
  m.build_timeout_s = 30;
  m.run_timeout_s = 30;
  m.check_correctness = false;
  m.run_threads = run_threads;
  return m;
}

std::string check_calibration(double core_gflops, double all_gflops, int cores, int lanes) {
  if (!std::isfinite(core_gflops) || core_gflops <= 0 || !std::isfinite(all_gflops) ||
      all_gflops <= 0)
    return fmt::format("a calibration of {} GFLOP/s on one core and {} on all", core_gflops,
                       all_gflops);
  const double one = peak_ceiling_gflops(1, lanes);
  if (core_gflops > one)
    return fmt::format(
        "its calibration runs {:.1f} GFLOP/s on one core, above what a core of its target can "
        "({:.1f}: {} lanes, {:g} FMAs a cycle at {:g} GHz)",
        core_gflops, one, std::max(lanes, 1), kFmaPortsCeiling, kClockGhzCeiling);
  const int declared = std::clamp(cores, 1, kMaxCores);
  if (all_gflops > declared * core_gflops * kCoresSlack)
    return fmt::format(
        "its calibration runs {:.1f} GFLOP/s on all cores, more than its {} declared core(s) at "
        "{:.1f} each",
        all_gflops, declared, core_gflops);
  return "";
}

std::string calibration_note(double core_gflops, double all_gflops, int cores) {
  const double runs_like = core_gflops > 0 ? all_gflops / core_gflops : 0;
  if (cores < 2 || runs_like * 2 >= cores) return "";
  return fmt::format("says {} cores; its calibration runs like {:.1f}", cores, runs_like);
}

double calibrated_ceiling_gflops(const WorkerInfo& w, int run_threads, double multiple,
                                 int vector_lanes) {
  const double m = std::max(multiple, 1.0);
  if (w.core_gflops <= 0 || w.all_gflops <= 0 || w.emulated)
    return peak_ceiling_gflops(run_threads == 1 ? 1 : w.cores, vector_lanes) * m;
  const double peak = run_threads == 1 ? w.core_gflops : std::max(w.core_gflops, w.all_gflops);
  return peak * kCalibrationSlack * m;
}

size_t first_control(std::string_view text) {
  const auto it = std::find_if(text.begin(), text.end(),
                               [](char c) { return is_control(static_cast<unsigned char>(c)); });
  return it == text.end() ? std::string_view::npos : static_cast<size_t>(it - text.begin());
}

std::string clean_text(std::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  size_t keep = text.size();
  if (cut) {
    constexpr size_t kEllipsis = 3;
    keep = max_bytes > kEllipsis ? max_bytes - kEllipsis : 0;
    // Back to the first byte of a UTF-8 character (continuation bytes are 10xxxxxx).
    while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  }
  std::string out(text.substr(0, keep));
  for (char& c : out)
    if (is_control(static_cast<unsigned char>(c))) c = ' ';
  if (cut) out += std::string("...").substr(0, max_bytes - keep);
  return out;
}

std::string check_hello(const rpc::WorkerHello& h) {
  if (h.key().empty() || h.key().size() > kMaxKeyBytes || !printable(h.key()))
    return fmt::format("the device key must be 1 to {} printable characters (got {} bytes)",
                       kMaxKeyBytes, h.key().size());
  if (h.target().empty() || h.target().size() > kMaxTargetBytes || !printable(h.target()))
    return fmt::format("the target must be 1 to {} printable characters (got {} bytes)",
                       kMaxTargetBytes, h.target().size());
  if (h.cores() < 0 || h.cores() > kMaxCores)
    return fmt::format("cores {} is outside 0..{}", h.cores(), kMaxCores);
  const int bits = h.vector_bits();
  if (bits != 0 && bits != 32 && bits != 128 && bits != 256 && bits != 512)
    return fmt::format("vector bits {} is none of 32, 128, 256, 512 (0 = the target's)", bits);
  if (h.slots() < 0 || h.slots() > kMaxSlots)
    return fmt::format("slots {} is outside 0..{}", h.slots(), kMaxSlots);
  if (!std::isfinite(h.peak_gflops()) || h.peak_gflops() < 0)
    return fmt::format("a stated peak of {} GFLOP/s", h.peak_gflops());
  return "";
}

ResultLimits result_limits(const tuner::MeasureOptions& measure, double flop,
                           double ceiling_gflops) {
  ResultLimits limits;
  limits.max_costs = std::max(measure.repeat, 1);
  limits.max_cost_s = measure.run_timeout_s;
  limits.min_cost_s = flop > 0 && ceiling_gflops > 0 ? flop / (ceiling_gflops * 1e9) : 0;
  limits.max_build_s = measure.build_timeout_s + kTimeSlackS;
  limits.max_run_s = measure.run_timeout_s + kTimeSlackS;
  return limits;
}

CheckedResult check_result(const rpc::CandidateResult& r, const ResultLimits& limits) {
  const bool build_ok = time_in_range(r.build_s(), limits.max_build_s);
  const bool run_ok = time_in_range(r.run_s(), limits.max_run_s);
  std::string why;
  if (!build_ok)
    why = fmt::format("a build time of {:.4g} s (0 to {:g} s)", r.build_s(), limits.max_build_s);
  else if (!run_ok)
    why = fmt::format("a run time of {:.4g} s (0 to {:g} s)", r.run_s(), limits.max_run_s);
  else if (r.error_kind().empty())
    why = check_costs(r, limits);
  CheckedResult out;
  if (!why.empty()) {
    out.refusal = why;
    out.result = tuner::make_error_result(ErrorKind::kUnknown, "refused: " + why,
                                          build_ok ? r.build_s() : 0, run_ok ? r.run_s() : 0);
    return out;
  }
  out.result = from_proto(r);
  out.result.error_message = clean_text(out.result.error_message, kMaxErrorTextBytes);
  if (out.result.error && !measurement_kind(*out.result.error))
    out.result.error = ErrorKind::kUnknown;
  return out;
}

}  // namespace ktune::rpc_runner
