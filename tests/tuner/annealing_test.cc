// Tests of SimulatedAnnealing on a synthetic score over a space of 8^10 (> 10^9) configs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "support/error.h"
#include "tuner/simulated_annealing.h"

namespace ktune::tuner {
namespace {

constexpr int kKnobs = 10;
constexpr uint64_t kRadix = 8;  // 8^10 = 1,073,741,824 configs

uint64_t digit(uint64_t index, int knob) {
  for (int i = 0; i < knob; ++i) index /= kRadix;
  return index % kRadix;
}

uint64_t with_digit(uint64_t index, int knob, uint64_t value) {
  uint64_t place = 1;
  for (int i = 0; i < knob; ++i) place *= kRadix;
  return index - digit(index, knob) * place + value * place;
}

uint64_t space_size() {
  uint64_t s = 1;
  for (int i = 0; i < kKnobs; ++i) s *= kRadix;
  return s;
}

SpaceMoves mixed_radix_moves() {
  return SpaceMoves{
      .sample =
          [](size_t n, std::mt19937_64& rng) {
            std::uniform_int_distribution<uint64_t> u(0, space_size() - 1);
            std::vector<uint64_t> out(n);
            for (auto& v : out) v = u(rng);
            return out;
          },
      .neighbour =
          [](uint64_t index, std::mt19937_64& rng) {
            std::uniform_int_distribution<int> knob(0, kKnobs - 1);
            std::uniform_int_distribution<uint64_t> value(0, kRadix - 2);
            int k = knob(rng);
            uint64_t v = value(rng);
            if (v >= digit(index, k)) ++v;  // a different value
            return with_digit(index, k, v);
          },
  };
}

// Per knob a target digit; the score is 0 at the target and falls with the distance, with a
// decoy local optimum two steps away from the target (a plateau hill-climbing can stall on).
uint64_t target(int knob) { return (3 * static_cast<uint64_t>(knob) + 1) % kRadix; }

float synthetic_score(uint64_t index) {
  float s = 0;
  for (int k = 0; k < kKnobs; ++k) {
    auto d = static_cast<int>(digit(index, k)) - static_cast<int>(target(k));
    s -= static_cast<float>(std::abs(d) == 2 ? 0.5 : std::abs(d));
  }
  return s;
}

uint64_t argmax() {
  uint64_t index = 0;
  for (int k = 0; k < kKnobs; ++k) index = with_digit(index, k, target(k));
  return index;
}

BatchScore score_fn(size_t* calls = nullptr) {
  return [calls](const std::vector<uint64_t>& points) {
    if (calls != nullptr) ++*calls;
    std::vector<float> s(points.size());
    for (size_t i = 0; i < points.size(); ++i) s[i] = synthetic_score(points[i]);
    return s;
  };
}

TEST(Annealing, FindsTheMaximumOfAHugeSpace) {
  ASSERT_GE(space_size(), 1'000'000'000u);
  SimulatedAnnealing sa(mixed_radix_moves(), AnnealingParams{.seed = 1});
  size_t calls = 0;
  std::vector<ScoredIndex> top = sa.find_maximums(16, score_fn(&calls), {});
  ASSERT_EQ(top.size(), 16u);
  EXPECT_EQ(top[0].index, argmax());
  EXPECT_FLOAT_EQ(top[0].score, 0.0f);
  // Sorted best first, distinct, and the scores are the real ones.
  std::unordered_set<uint64_t> seen;
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_TRUE(seen.insert(top[i].index).second);
    EXPECT_FLOAT_EQ(top[i].score, synthetic_score(top[i].index));
    if (i > 0) {
      EXPECT_GE(top[i - 1].score, top[i].score);
    }
  }
  // Batch scoring: one call per step plus the initial one; far fewer points than the space.
  EXPECT_EQ(calls, static_cast<size_t>(sa.last_report().steps) + 1);
  EXPECT_LE(sa.last_report().scored, 128u * 501u);
}

TEST(Annealing, SkipsExcludedConfigs) {
  SimulatedAnnealing sa(mixed_radix_moves(), AnnealingParams{.seed = 2});
  std::unordered_set<uint64_t> exclude = {argmax()};
  std::vector<ScoredIndex> top = sa.find_maximums(8, score_fn(), exclude);
  ASSERT_FALSE(top.empty());
  for (const auto& p : top) EXPECT_EQ(exclude.count(p.index), 0u);
  // The next best configs sit on a decoy: one knob two steps off the target, score -0.5.
  EXPECT_FLOAT_EQ(top[0].score, -0.5f);
  int differing = 0;
  for (int k = 0; k < kKnobs; ++k) differing += digit(top[0].index, k) != target(k) ? 1 : 0;
  EXPECT_EQ(differing, 1);
}

TEST(Annealing, SameSeedSameResultAndChainsPersist) {
  SimulatedAnnealing a(mixed_radix_moves(), AnnealingParams{.steps = 40, .seed = 5});
  SimulatedAnnealing b(mixed_radix_moves(), AnnealingParams{.steps = 40, .seed = 5});
  auto ra = a.find_maximums(10, score_fn(), {});
  auto rb = b.find_maximums(10, score_fn(), {});
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) EXPECT_EQ(ra[i].index, rb[i].index);
  // A second short search resumes from the first one's chains, so it does better than a fresh
  // short search; with 40 + 40 steps the chains are near the optimum.
  auto again = a.find_maximums(10, score_fn(), {});
  SimulatedAnnealing fresh(mixed_radix_moves(), AnnealingParams{.steps = 40, .seed = 77});
  auto cold = fresh.find_maximums(10, score_fn(), {});
  EXPECT_GE(again[0].score, ra[0].score);
  EXPECT_GE(again[0].score, cold[0].score);
}

TEST(Annealing, RejectsAScoringFunctionOfTheWrongLength) {
  SimulatedAnnealing sa(mixed_radix_moves(), AnnealingParams{.seed = 3});
  BatchScore broken = [](const std::vector<uint64_t>& p) {
    return std::vector<float>(p.size() / 2);
  };
  try {
    sa.find_maximums(4, broken, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ktune::tuner
