// Defines SimulatedAnnealing: persistent lockstep chains finding the top-k configs under a score.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <unordered_set>
#include <vector>

namespace ktune::schedule_space {
class ConfigSpace;
}

namespace ktune::tuner {

// The moves annealing needs from a space of indices. space_moves(ConfigSpace) provides them;
// tests may use a plain mixed-radix space.
struct SpaceMoves {
  // Up to n distinct valid random indices.
  std::function<std::vector<uint64_t>(size_t n, std::mt19937_64& rng)> sample;
  // A valid index next to `index` (one knob changed), or `index` when there is none.
  std::function<uint64_t(uint64_t index, std::mt19937_64& rng)> neighbour;
};

// Returns the moves of a ConfigSpace (sample and neighbour respect its constraints). The space
// must outlive the result.
SpaceMoves space_moves(const schedule_space::ConfigSpace& space);

// Scores a batch of indices; higher is better. Must return one finite score per index.
using BatchScore = std::function<std::vector<float>(const std::vector<uint64_t>&)>;

// Defaults are AutoTVM's: 128 chains, 500 steps, early stop after 50 steps without a change of
// the top set, temperature linear from 1 to 0.
struct AnnealingParams {
  size_t chains = 128;
  int steps = 500;
  int early_stop = 50;
  double temperature_start = 1.0;
  double temperature_end = 0.0;
  bool persistent = true;  // the next search resumes from where the chains stopped
  uint64_t seed = 0;
};

struct ScoredIndex {
  uint64_t index = 0;
  float score = 0;
};

// What the last search did, for tests and telemetry.
struct AnnealingReport {
  int steps = 0;      // annealing steps run (<= params.steps)
  size_t scored = 0;  // indices passed to the scoring function
};

// The chains step in lockstep: each step proposes one neighbour per chain and scores the whole
// batch in one call, so the scoring function can vectorize or parallelize (model prediction).
// Acceptance is AutoTVM's: accept when exp(min((new - old) / (t + 1e-5), 1)) > U(0, 1).
// Not thread-safe; one search at a time.
class SimulatedAnnealing {
 public:
  SimulatedAnnealing(SpaceMoves moves, AnnealingParams params = {});

  // Returns up to top_k distinct indices, none in `exclude`, best score first (ties: smaller
  // index first): the best points that the chains visited. Throws Error(kInvalidArgument) when
  // the scoring function returns a wrong number of scores; whatever it throws passes through.
  std::vector<ScoredIndex> find_maximums(size_t top_k, const BatchScore& score,
                                         const std::unordered_set<uint64_t>& exclude);

  const AnnealingParams& params() const { return params_; }
  const AnnealingReport& last_report() const { return report_; }
  // Forgets the persistent chain positions (the next search starts from random points).
  void reset() { points_.clear(); }

 private:
  SpaceMoves moves_;
  AnnealingParams params_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> points_;  // chain positions kept between searches
  AnnealingReport report_;
};

}  // namespace ktune::tuner
