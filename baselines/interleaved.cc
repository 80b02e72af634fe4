// time_interleaved: rounds of each callable in turn, and the pacing of a race against a library.
#include "baselines/interleaved.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "support/error.h"
#include "support/seconds_since.h"

namespace ktune::baselines {
namespace {

using Clock = std::chrono::steady_clock;

RoundStats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {static_cast<int>(n), median, v.front(), v.back()};
}

}  // namespace

RoundPacing race_pacing(int threads) {
  // Several threads: rounds of 20 ms, so that waking the pool's threads (on a VM an idle vCPU can
  // take long to be scheduled again) is a small part of each; one thread: 2 ms rounds, long
  // enough that the clock's resolution and a burst of neighbours do not decide a short kernel.
  // Each side's pool must be idle while the other runs: OpenBLAS's workers spin for 2^28 cycles
  // (~70 ms) after a call and libgomp's (oneDNN's) for a while too, and a kernel timed right after
  // one shares its cores with them; a pause before each round lets them sleep. One thread: a
  // 50 ms pause too, so that the rounds spread over bursts of noisy neighbours (about a second)
  // instead of sitting inside one.
  if (threads > 1) return {0.15, 20e-3};
  return {0.05, 2e-3};
}

std::vector<RoundStats> time_interleaved(const std::vector<std::function<void()>>& fns, int rounds,
                                         RoundPacing pacing) {
  if (rounds < 1) throw Error(ErrorKind::kInvalidArgument, "time_interleaved: rounds must be >= 1");
  std::vector<int> reps;
  for (const auto& fn : fns) {
    const auto start = Clock::now();
    fn();
    reps.push_back(static_cast<int>(std::clamp(
        std::ceil(pacing.min_round_s / std::max(seconds_since(start), 1e-9)), 1.0, 1e5)));
  }
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < fns.size(); ++i) {
      if (pacing.settle_s > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(pacing.settle_s));
        // Untimed, as long as a round: this callable's pool wakes (and the VM's idle vCPUs with
        // it), as an application's previous calls would have woken them.
        for (int n = 0; n < reps[i]; ++n) fns[i]();
      }
      const auto start = Clock::now();
      for (int n = 0; n < reps[i]; ++n) fns[i]();
      t[i].push_back(seconds_since(start) / reps[i]);
    }
  }
  std::vector<RoundStats> out;
  for (auto& v : t) out.push_back(stats_of(std::move(v)));
  return out;
}

}  // namespace ktune::baselines
