// Defines the tuning server's checks of what a device worker sends (its hello, its calibration,
// its results): the limits, the ceilings, and one function per message.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "rpc_runner/protocol/job_types.h"
#include "rpc_runner/protocol/ktune.pb.h"
#include "tuner/measure.h"

namespace ktune::rpc_runner {

// A worker holds a valid token, yet whatever it sends may be broken or a lie: every field is
// checked here before the server uses it. Identity fields (key, target) that break a limit
// refuse the hello; free text (description, error messages) is cleaned and cut instead.
inline constexpr size_t kMaxKeyBytes = 128;
inline constexpr size_t kMaxTargetBytes = 512;
inline constexpr size_t kMaxDescriptionBytes = 512;
// An error message (a compiler's diagnostic, a crash report) is kept up to this size; a record
// stays small enough that an export chunk of many records fits a message.
inline constexpr size_t kMaxErrorTextBytes = 4096;
inline constexpr int kMaxCores = 1024;
inline constexpr int kMaxSlots = 64;

// The plausibility ceiling of a device, in f32 GFLOP/s: cores x lanes x kFmaPortsCeiling x 2
// flops per FMA x kClockGhzCeiling. No core issues more than four vector FMAs per cycle (Apple
// M-series and Neoverse V1/V2 issue four 128-bit FMAs; x86 cores two at full width), and none
// runs faster than 6.5 GHz. Lanes come from the server's own view of the canonical target,
// never from the worker's claim; only the core count is the worker's, bounded by kMaxCores.
inline constexpr double kFmaPortsCeiling = 4;
inline constexpr double kClockGhzCeiling = 6.5;
double peak_ceiling_gflops(int cores, int vector_lanes);

// The calibration every worker runs at attach: the fma_peak kernel (schedule_space), on one
// thread with one copy and on all its threads with one copy per core it declares, timed by the
// device. Its figures are the worker's own word too, so they are held to the declared target
// (no core faster than peak_ceiling_gflops(1, lanes)) and to the declared cores, then proved on
// the server's clock (rpc_runner/server/calibration_proof.h); what they then bound is every
// later result, which no longer rests on the core count alone.

// fma_peak's arguments for a target of `lanes` fp32 lanes and `copies` copies.
std::map<std::string, std::string> calibration_args(int lanes, int copies);
// How a calibration run is timed: each timing at least 20 ms, five of them, on `run_threads`
// threads (0 = all), no reference check (its output is never used).
tuner::MeasureOptions calibration_measure(int run_threads);
// A result may run this much above its device's calibrated peak (times its template's
// peak_multiple): fma_peak runs at 99% of a hand-written FMA loop, and the calibration keeps its
// fastest timing; the rest covers a calibration slowed by load at attach (a worker attached while
// a tune-model ran on the same 2-vCPU AMD EPYC VM calibrated at 92.9 GFLOP/s on one core, 211
// when idle),
// timing noise and a core's turbo when others idle. A flattering device under this ceiling is
// left to the cross-device check of re-timing (tuning_db::Record::disputed).
inline constexpr double kCalibrationSlack = 4;
// The all-core calibration may pass the declared cores times the one-core figure by this much.
inline constexpr double kCoresSlack = 1.25;
// Why a calibration (GFLOP/s on one thread and on all) of a worker declaring `cores` cores of
// `lanes` fp32 lanes is refused, one line, or "" when it is accepted: figures that are not finite
// and positive, one core above what a core of the target can do, or all cores above the declared
// count of cores at the one-core figure.
std::string check_calibration(double core_gflops, double all_gflops, int cores, int lanes);
// What the server notes about an accepted calibration ("" = nothing): all cores running like less
// than half the cores declared ("says 1024 cores; its calibration runs like 2.0").
std::string calibration_note(double core_gflops, double all_gflops, int cores);
// The ceiling of a result of worker `w` measured on `run_threads` threads (0 = all) of a task of
// template peak_multiple `multiple`: its calibrated peak there times kCalibrationSlack; the
// declared ceiling (peak_ceiling_gflops) while it is not calibrated, and for an emulated device
// (an emulator runs kernels at speeds unrelated to the FMA loop's; its records are marked emulated
// and never served as the device's).
double calibrated_ceiling_gflops(const WorkerInfo& w, int run_threads, double multiple,
                                 int vector_lanes);

// A build or run time may exceed its timeout by this much (the child is killed at the timeout,
// then reaped and reported): beyond that, the worker's clock is not believed.
inline constexpr double kTimeSlackS = 60;

// The index of the first control character (C0, line breaks included, or DEL) of `text`, or npos:
// what a peer's identity text (a worker's key, a job's owner) may not hold.
size_t first_control(std::string_view text);

// `text` with every control character (line breaks included) replaced by a space, cut to at most
// max_bytes bytes on a UTF-8 character boundary; a cut text ends in "...".
std::string clean_text(std::string_view text, size_t max_bytes);

// Returns why the hello is refused (one line that does not repeat the bad field), or "" when it
// is acceptable: protocol version aside, a key of 1..kMaxKeyBytes printable characters, a target
// of 1..kMaxTargetBytes printable characters, cores 0 (unknown: 1) to kMaxCores, vector bits 0
// (unknown: the target's) or one of 32, 128, 256, 512, slots 0..kMaxSlots, a finite peak >= 0.
std::string check_hello(const rpc::WorkerHello& hello);

// What a result of one candidate may say, from the candidate's own measurement settings.
struct ResultLimits {
  int max_costs = 1;       // the setting's repeat: one cost per timing
  double max_cost_s = 0;   // the run timeout: no single run lasts longer
  double min_cost_s = 0;   // the task's flop at the device's ceiling: no run is faster
  double max_build_s = 0;  // the build timeout plus kTimeSlackS
  double max_run_s = 0;    // the run timeout plus kTimeSlackS
};

// The limits of a candidate measured with `measure` of a task of `flop` on a device whose
// ceiling is ceiling_gflops.
ResultLimits result_limits(const tuner::MeasureOptions& measure, double flop,
                           double ceiling_gflops);

// A worker's result after the checks: `refusal` says why it was refused ("" = accepted).
struct CheckedResult {
  tuner::MeasureResult result;
  std::string refusal;
};

// Checks a worker's result against the limits of its candidate. An accepted result keeps its
// costs and times, its error text cleaned (clean_text, kMaxErrorTextBytes) and an error kind
// outside the measurement kinds (and kUnsupported) read as kUnknown. A refused one (costs that
// are missing, too many, not finite, not positive, slower than the run timeout or faster than
// the ceiling; build or run times that are not finite, negative or over their limit) becomes
// an error result of kind kUnknown whose message begins "refused: " and names the field; its
// times are kept only when they are themselves in range.
CheckedResult check_result(const rpc::CandidateResult& result, const ResultLimits& limits);

}  // namespace ktune::rpc_runner
