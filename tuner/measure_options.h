// Defines MeasureOptions, the one description of how a candidate kernel is timed and checked.
#pragma once

#include <cstdint>

namespace ktune::tuner {

// The shortest timing by default: a kernel of tens of nanoseconds timed over `number` runs alone
// lasts less than a microsecond, where the clock's resolution and one interrupt decide the figure;
// at a millisecond they are noise of a few parts in 10^4,
// and a kernel of 0.25 ms or more is not run more often than `number` says.
inline constexpr double kDefaultMinRepeatMs = 1;

// How a candidate kernel is timed and checked. Defaults follow AutoTVM's (number 4, repeat 3,
// 10 s timeouts) except min_repeat_ms (above), cooldown (0: the tuner does not sleep by default)
// and check_correctness (on: a wrong kernel must never be recorded as fast). The same settings
// travel to devices (rpc_runner/protocol: MeasureSpec), to the runner child (runner.proto:
// RunnerTiming, without the timeouts its parent enforces) and into job specs (JSON, without
// return_outputs, which only a server's calibration sets), each by one converter; this header has
// no other dependency so that the device-side runner can include it.
struct MeasureOptions {
  int number = 4;  // kernel runs per timing; the timing is their mean
  int repeat = 3;  // timings per candidate; MeasureResult::costs has this many
  double min_repeat_ms = kDefaultMinRepeatMs;  // grow `number` until a timing lasts this long
  double build_timeout_s = 10;  // the candidate's own lower+codegen time, never queue time
  double run_timeout_s = 10;    // the candidate's own run time (incl. its check), never queue time
  double cooldown_s = 0;        // sleep between repeats
  bool flush_cache = false;     // evict the caches (write a large buffer) before each run
  bool check_correctness = true;  // compare outputs with the task's reference schedule
  // |out - ref| <= atol + rtol * (|ref| + rms(ref)) element-wise: the rms term lets a reduction
  // summed in another order round differently without failing where the output is near zero.
  double rtol = 1e-4, atol = 1e-5;
  int run_threads = 0;     // threads of the kernels' parallel loops; 0 = the runtime's default
  uint64_t data_seed = 0;  // seeds the generated inputs (the same for reference and candidate)
  // Run the kernel once, timed, and return its outputs (MeasureResult::outputs): a tuning
  // server's calibration proof, whose outputs it checks (number, repeat, min_repeat_ms unused).
  bool return_outputs = false;
};

// The bounds validate() holds every MeasureOptions to, from flags or from a job a peer sent: a
// deadline is the candidate's timeouts plus a margin, so an unbounded one would never expire.
inline constexpr int kMaxNumber = 1'000'000;
inline constexpr int kMaxRepeat = 1000;
inline constexpr double kMaxMinRepeatMs = 60'000;
inline constexpr double kMinTimeoutS = 0.001, kMaxTimeoutS = 86'400;
inline constexpr double kMaxCooldownS = 3600;
inline constexpr int kMaxRunThreads = 256;

// Throws Error(kInvalidArgument), one line naming the field and its range, for any field outside
// the bounds above, or rtol/atol not finite in [0, 1] (tuner/measure.cc).
void validate(const MeasureOptions& options);

}  // namespace ktune::tuner
