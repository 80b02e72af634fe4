// ModelTiming's judgements of its own figures: noisy (the middle half of the end-to-end runs
// spreads) and apart (the end-to-end median far from the sum of the steps timed one at a time).
#include <gtest/gtest.h>

#include "deploy/model_timing.h"

namespace ktune::deploy {
namespace {

ModelTiming timing(double median_s, std::vector<double> steps) {
  ModelTiming t;
  t.runs = 5;
  t.median_s = t.min_s = t.max_s = t.q1_s = t.q3_s = median_s;
  t.step_s = std::move(steps);
  return t;
}

TEST(ModelTiming, ApartWhenTheMedianAndTheLayersSumDifferByHalf) {
  // ResNet-18 on a busy machine: 22.85 ms end to end against layers summing to 9.71 ms.
  EXPECT_TRUE(timing(22.85e-3, {4.0e-3, 5.71e-3}).apart());
  EXPECT_TRUE(timing(1e-3, {1.6e-3}).apart());  // the other way
  EXPECT_FALSE(timing(9.8e-3, {4.0e-3, 5.71e-3}).apart());
  EXPECT_FALSE(timing(1.49e-3, {1e-3}).apart());
  EXPECT_FALSE(timing(1e-3, {}).apart());  // nothing to compare with
  EXPECT_FALSE(timing(1e-3, {1e-3}).noisy());
}

}  // namespace
}  // namespace ktune::deploy
