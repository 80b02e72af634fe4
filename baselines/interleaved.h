// Defines time_interleaved and RoundStats: callables timed alternately over rounds, so that load
// from other processes falls on all of them alike, with each one's median and spread.
#pragma once

#include <functional>
#include <vector>

namespace ktune::baselines {

// One callable's seconds per call over the rounds.
struct RoundStats {
  int rounds = 0;
  double median_s = 0, min_s = 0, max_s = 0;
  // Half the range relative to the median: 0.05 reads "±5%".
  double spread() const { return median_s > 0 ? (max_s - min_s) / (2 * median_s) : 0; }
};

// How long the rounds of a race at `threads` threads last and how long each side rests before
// its round (see time_interleaved).
struct RoundPacing {
  double settle_s = 0;
  double min_round_s = 200e-6;
};
RoundPacing race_pacing(int threads);

// One warm-up call each, then `rounds` interleaved rounds of at least min_round_s each (short
// calls are repeated within a round), so that load from other processes drifts over all callables
// alike; returns each callable's seconds per call over the rounds. settle_s > 0: before each round
// of a callable, sleep that long (the previous callable's thread pool goes idle), then run it
// untimed for as long as a round (its own pool wakes). rounds >= 1.
std::vector<RoundStats> time_interleaved(const std::vector<std::function<void()>>& fns, int rounds,
                                         RoundPacing pacing = {});

}  // namespace ktune::baselines
