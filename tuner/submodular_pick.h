// Defines submodular_pick: the greedy diversity-aware choice of a measurement batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ktune::tuner {

struct PickParams {
  // Bonus per knob dimension whose value is new to the batch, in units of the normalized score
  // (the best candidate scores 1, the worst 0). With 10 knobs, a candidate new in every
  // dimension gains 0.5: diversity can overturn moderate score gaps, never large ones.
  double knob_weight = 0.05;
};

// Greedily picks up to n positions of candidates: each step takes the candidate maximizing
// normalized_score + knob_weight * (number of knob dimensions whose value no picked candidate
// has). Scores are normalized to their rank in [0, 1] (best 1) so the trade-off does not
// depend on the model's scale. Unlike AutoTVM's shipped code, the score really counts.
// knob_values[i] holds candidate i's value index per knob (all of one length).
// Returns positions into the candidates, in pick order. Ties go to the earlier position.
// Throws Error(kInvalidArgument) when sizes disagree.
std::vector<size_t> submodular_pick(std::span<const float> scores,
                                    const std::vector<std::vector<uint64_t>>& knob_values, size_t n,
                                    const PickParams& params = {});

}  // namespace ktune::tuner
