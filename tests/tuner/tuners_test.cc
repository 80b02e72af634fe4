// Tests of the model-free tuners (random, grid, GA) on config spaces with constraints.
#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "schedule_space/config_space.h"
#include "tuner/basic_tuners.h"

namespace ktune::tuner {
namespace {

using schedule_space::Config;
using schedule_space::ConfigSpace;

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// 10 x 10 configs; a + b == 5 is invalid (6 configs), so 94 valid ones.
ConfigSpace small_space() {
  ConfigSpace space("test");
  space.define_knob("a", range(10));
  space.define_knob("b", range(10));
  space.add_constraint("a+b!=5", [](const schedule_space::EntityView& v) {
    return v["a"].values[0] + v["b"].values[0] != 5;
  });
  return space;
}

std::vector<uint64_t> drain(Tuner& tuner, size_t batch) {
  std::vector<uint64_t> all;
  while (tuner.has_next()) {
    auto configs = tuner.next_batch(batch);
    if (configs.empty()) break;
    std::vector<MeasureInput> inputs;
    std::vector<MeasureResult> results;
    for (auto& c : configs) {
      all.push_back(c.index());
      inputs.push_back({nullptr, c});
      results.push_back(make_ok_result({1e-3}));
    }
    tuner.update(inputs, results);
  }
  return all;
}

TEST(RandomTuner, ProposesEveryValidConfigOnceThenStops) {
  ConfigSpace space = small_space();
  RandomTuner tuner(space, 7);
  std::vector<uint64_t> all = drain(tuner, 7);
  std::set<uint64_t> distinct(all.begin(), all.end());
  EXPECT_EQ(all.size(), 94u);
  EXPECT_EQ(distinct.size(), 94u);
  for (uint64_t i : all) EXPECT_TRUE(space.is_valid(i)) << i;
  EXPECT_FALSE(tuner.has_next());
}

TEST(RandomTuner, SameSeedSameSequenceOtherSeedOther) {
  ConfigSpace space = small_space();
  RandomTuner a(space, 1), b(space, 1), c(space, 2);
  auto sa = drain(a, 10), sb = drain(b, 10), sc = drain(c, 10);
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(RandomTuner, SkipsConfigsReportedBeforeTheFirstBatch) {
  ConfigSpace space = small_space();
  RandomTuner tuner(space, 3);
  std::vector<MeasureInput> past;
  std::vector<MeasureResult> results;
  for (uint64_t i = 0; i < 50; ++i) {
    if (!space.is_valid(i)) continue;
    past.push_back({nullptr, space.get(i)});
    results.push_back(make_error_result(ErrorKind::kRun, "crash"));
  }
  tuner.update(past, results);
  auto rest = drain(tuner, 16);
  EXPECT_EQ(rest.size(), 94u - past.size());
  for (uint64_t i : rest) EXPECT_GE(i, 50u);
}

TEST(GridSearchTuner, WalksValidConfigsInIndexOrder) {
  ConfigSpace space = small_space();
  GridSearchTuner tuner(space);
  auto all = drain(tuner, 9);
  ASSERT_EQ(all.size(), 94u);
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  for (uint64_t i : all) EXPECT_TRUE(space.is_valid(i));
}

// A smooth landscape over 3 knobs of 32 values with its peak at (21, 9, 27); cost = 1/score.
double landscape(const std::vector<uint64_t>& d) {
  auto sq = [](double x) { return x * x; };
  return 1000.0 / (1.0 + sq(double(d[0]) - 21) + sq(double(d[1]) - 9) + sq(double(d[2]) - 27));
}

struct Search {
  double best = 0;
  std::set<uint64_t> seen;
  size_t duplicates = 0;
  size_t invalid = 0;
};

Search run(Tuner& tuner, const ConfigSpace& space, size_t trials, size_t batch) {
  Search s;
  size_t done = 0;
  while (done < trials && tuner.has_next()) {
    auto configs = tuner.next_batch(std::min(batch, trials - done));
    if (configs.empty()) break;
    std::vector<MeasureInput> inputs;
    std::vector<MeasureResult> results;
    for (auto& c : configs) {
      if (!s.seen.insert(c.index()).second) ++s.duplicates;
      if (!space.is_valid(c.index())) ++s.invalid;
      double score = landscape(space.knob_indices(c.index()));
      s.best = std::max(s.best, score);
      inputs.push_back({nullptr, c});
      results.push_back(make_ok_result({1.0 / score}));
    }
    done += configs.size();
    tuner.update(inputs, results);
  }
  return s;
}

ConfigSpace cube_space() {
  ConfigSpace space("cube");
  space.define_knob("x", range(32));
  space.define_knob("y", range(32));
  space.define_knob("z", range(32));
  // Forbid a slab that contains no optimum, so validity is exercised.
  space.add_constraint("x!=3",
                       [](const schedule_space::EntityView& v) { return v["x"].values[0] != 3; });
  return space;
}

TEST(GATuner, ConvergesOnASmoothLandscapeAndBeatsRandom) {
  ConfigSpace space = cube_space();
  double ga_total = 0, random_total = 0;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    GATuner ga(space, 1.0,
               GAOptions{.pop_size = 32, .elite_num = 3, .mutation_prob = 0.1, .seed = seed});
    Search s = run(ga, space, 480, 16);
    EXPECT_EQ(s.duplicates, 0u);
    EXPECT_EQ(s.invalid, 0u);
    EXPECT_EQ(s.seen.size(), 480u);
    EXPECT_GE(ga.generation(), 10u);
    ga_total += s.best;
    RandomTuner random(space, seed);
    random_total += run(random, space, 480, 16).best;
  }
  // The peak scores 1000; a distance of 1 knob step scores 500.
  EXPECT_GE(ga_total / 5, 500.0);
  EXPECT_GT(ga_total, random_total);
}

TEST(GATuner, SeededSearchIsReproducible) {
  ConfigSpace space = cube_space();
  GATuner a(space, 1.0, GAOptions{.pop_size = 16, .seed = 9});
  GATuner b(space, 1.0, GAOptions{.pop_size = 16, .seed = 9});
  Search sa = run(a, space, 100, 10), sb = run(b, space, 100, 10);
  EXPECT_EQ(sa.seen, sb.seen);
}

TEST(GATuner, ExhaustsASmallSpaceWithoutRepeats) {
  ConfigSpace space = small_space();
  GATuner ga(space, 1.0, GAOptions{.pop_size = 10, .seed = 4});
  auto all = drain(ga, 8);
  std::set<uint64_t> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), all.size());
  EXPECT_EQ(all.size(), 94u);
}

}  // namespace
}  // namespace ktune::tuner
