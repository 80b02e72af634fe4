// Tests of submodular_pick: diversity is respected, and the score really counts.
#include "tuner/submodular_pick.h"

#include <gtest/gtest.h>

#include "support/error.h"

namespace ktune::tuner {
namespace {

TEST(SubmodularPick, PrefersHighScoresWhenDiversityIsEqual) {
  // Every candidate differs from every other in every knob: only the score decides.
  std::vector<float> scores = {0.1f, 0.9f, 0.5f, 0.7f, 0.3f};
  std::vector<std::vector<uint64_t>> knobs = {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}};
  EXPECT_EQ(submodular_pick(scores, knobs, 3), (std::vector<size_t>{1, 3, 2}));
}

TEST(SubmodularPick, RespectsDiversity) {
  // Candidates 0..3 are near-duplicates of the best (same value in 3 of 4 knobs); 4 and 5 are
  // different everywhere but scored a bit lower. After the best, the diverse ones come first.
  std::vector<float> scores = {10.0f, 9.9f, 9.8f, 9.7f, 9.0f, 8.0f, 1.0f};
  std::vector<std::vector<uint64_t>> knobs = {{0, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 0, 2},
                                              {0, 0, 0, 3}, {1, 1, 1, 4}, {2, 2, 2, 5},
                                              {3, 3, 3, 6}};
  PickParams params{.knob_weight = 0.25};
  std::vector<size_t> picked = submodular_pick(scores, knobs, 3, params);
  EXPECT_EQ(picked, (std::vector<size_t>{0, 4, 5}));
  // Without the diversity term it is the plain top 3.
  EXPECT_EQ(submodular_pick(scores, knobs, 3, PickParams{.knob_weight = 0.0}),
            (std::vector<size_t>{0, 1, 2}));
}

TEST(SubmodularPick, ScoreBreaksDiversityTiesAndOverrulesSmallDiversity) {
  // 1 and 2 are equally new to the batch after 0: the higher score (2) wins. Candidate 3 is new
  // in one more knob but scored far lower: with a small weight, the score wins.
  std::vector<float> scores = {5.0f, 3.0f, 4.0f, -100.0f};
  std::vector<std::vector<uint64_t>> knobs = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 1, 0}};
  EXPECT_EQ(submodular_pick(scores, knobs, 2, PickParams{.knob_weight = 0.1}),
            (std::vector<size_t>{0, 2}));
  // A big weight buys diversity even at a low score.
  EXPECT_EQ(submodular_pick(scores, knobs, 2, PickParams{.knob_weight = 2.0}),
            (std::vector<size_t>{0, 3}));
}

TEST(SubmodularPick, EdgeCasesAndErrors) {
  std::vector<float> scores = {1.0f, 2.0f};
  std::vector<std::vector<uint64_t>> knobs = {{0}, {1}};
  EXPECT_EQ(submodular_pick(scores, knobs, 10), (std::vector<size_t>{1, 0}));
  EXPECT_TRUE(submodular_pick({}, {}, 4).empty());
  std::vector<std::vector<uint64_t>> ragged = {{0}, {1, 2}};
  EXPECT_THROW(submodular_pick(scores, ragged, 1), Error);
  std::vector<std::vector<uint64_t>> one = {{0}};
  EXPECT_THROW(submodular_pick(scores, one, 1), Error);
}

}  // namespace
}  // namespace ktune::tuner
