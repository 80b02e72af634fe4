// Tests of ConfigSpace (mixed-radix indexing, constraints, sampling, neighbours, features) and
// Config JSON.
#include "schedule_space/config_space.h"

#include <set>

#include <gtest/gtest.h>

#include "support/error.h"

namespace ktune::schedule_space {
namespace {

ConfigSpace small_space() {
  ConfigSpace s("toy");
  s.define_split("tile", {.extent = 8, .num_outputs = 2});        // 4: 1 2 4 8
  s.define_knob("unroll", std::vector<int64_t>{0, 4, 16});        // 3
  s.define_knob("layout", std::vector<std::string>{"nn", "nt"});  // 2
  return s;
}

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kUnknown;
}

TEST(ConfigSpace, MixedRadixFirstKnobLeastSignificant) {
  const ConfigSpace s = small_space();
  EXPECT_EQ(s.size(), 24u);
  EXPECT_EQ(s.knob_sizes(), (std::vector<uint64_t>{4, 3, 2}));
  // index = tile + 4 * (unroll + 3 * layout)
  EXPECT_EQ(s.knob_indices(0), (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(s.knob_indices(1), (std::vector<uint64_t>{1, 0, 0}));
  EXPECT_EQ(s.knob_indices(4), (std::vector<uint64_t>{0, 1, 0}));
  EXPECT_EQ(s.knob_indices(23), (std::vector<uint64_t>{3, 2, 1}));
  for (uint64_t i = 0; i < s.size(); ++i) EXPECT_EQ(s.index_of(s.knob_indices(i)), i);
  const Config c = s.get(4 * (2 + 3 * 1) + 2);
  EXPECT_EQ(c["tile"].values, (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(c["unroll"].as_int(), 16);
  EXPECT_EQ(c["layout"].as_string(), "nt");
  EXPECT_EQ(c.template_name(), "toy");
}

TEST(ConfigSpace, OutOfRangeAndBadVectors) {
  const ConfigSpace s = small_space();
  EXPECT_EQ(kind_of([&] { s.get(24); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { s.knob_indices(1000); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { s.index_of(std::vector<uint64_t>{0, 0}); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              s.index_of(std::vector<uint64_t>{4, 0, 0});
            }),
            ErrorKind::kInvalidArgument);
  EXPECT_FALSE(s.is_valid(24));
}

TEST(ConfigSpace, DuplicateKnobAndOverflow) {
  ConfigSpace s = small_space();
  EXPECT_EQ(kind_of([&] { s.define_knob("unroll", std::vector<int64_t>{1}); }),
            ErrorKind::kInvalidArgument);
  ConfigSpace big;
  std::vector<int64_t> values(1024);
  for (int i = 0; i < 6; ++i) big.define_knob("k" + std::to_string(i), values);  // 2^60
  EXPECT_EQ(big.size(), uint64_t{1} << 60);
  big.define_knob("k6", std::vector<int64_t>(8));  // exactly 2^63
  EXPECT_EQ(big.size(), uint64_t{1} << 63);
  EXPECT_EQ(kind_of([&] { big.define_knob("k7", std::vector<int64_t>(2)); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(big.num_knobs(), 7u);  // the failed knob left no trace
}

TEST(ConfigSpace, ConstraintsRejectPerConfig) {
  ConfigSpace s = small_space();
  // Unrolling 16 only with a tile of at most 2; count the survivors by hand.
  s.add_constraint("unroll16 needs small tile", [](const EntityView& v) {
    return v["unroll"].as_int() != 16 || v["tile"].values[1] <= 2;
  });
  int valid = 0;
  for (uint64_t i = 0; i < s.size(); ++i) {
    const Config c = s.get(i);
    const bool expect = c["unroll"].as_int() != 16 || c["tile"].values[1] <= 2;
    EXPECT_EQ(s.is_valid(i), expect) << i;
    EXPECT_EQ(s.rejecting_constraint(c).empty(), expect);
    valid += expect;
  }
  EXPECT_EQ(valid, 24 - 2 * 2);
}

TEST(ConfigSpace, SampleSmallSpaceIsExhaustiveAndRespectsExclude) {
  ConfigSpace s = small_space();
  s.add_constraint("no nt", [](const EntityView& v) { return v["layout"].as_string() == "nn"; });
  std::mt19937_64 rng(7);
  const std::unordered_set<uint64_t> exclude = {0, 1, 2};
  const auto got = s.sample(100, rng, exclude);
  EXPECT_EQ(got.size(), 12u - 3u);
  std::set<uint64_t> uniq(got.begin(), got.end());
  EXPECT_EQ(uniq.size(), got.size());
  for (uint64_t i : got) {
    EXPECT_TRUE(s.is_valid(i));
    EXPECT_FALSE(exclude.count(i));
  }
}

// What sample() draws in a small space: the valid indices not excluded, ascending, partially
// shuffled (Fisher-Yates) with the same draws. The kept valid set must give exactly this.
std::vector<uint64_t> reference_sample(const ConfigSpace& s, size_t n, std::mt19937_64& rng,
                                       const std::unordered_set<uint64_t>& exclude) {
  std::vector<uint64_t> pool;
  for (uint64_t i = 0; i < s.size(); ++i)
    if (!exclude.count(i) && s.is_valid(i)) pool.push_back(i);
  const size_t take = std::min(n, pool.size());
  for (size_t i = 0; i < take; ++i) {
    std::uniform_int_distribution<size_t> pick(i, pool.size() - 1);
    std::swap(pool[i], pool[pick(rng)]);
  }
  pool.resize(take);
  return pool;
}

TEST(ConfigSpace, SampleSmallSpaceDrawsAsTheEnumeratedShuffle) {
  ConfigSpace s = small_space();
  s.define_knob("vec", std::vector<int64_t>{1, 2, 4, 8, 16});  // 120 configs
  s.add_constraint("unroll16 needs small tile", [](const EntityView& v) {
    return v["unroll"].as_int() != 16 || v["tile"].values[1] <= 2;
  });
  // Excluded: valid and invalid indices, and one outside the space.
  std::unordered_set<uint64_t> exclude = {0, 3, 8, 9, 10, 11, 50, 77, 119, 5000};
  std::mt19937_64 rng(11), ref_rng(11);
  for (size_t n : {1u, 1u, 5u, 30u, 200u}) {
    const auto got = s.sample(n, rng, exclude);
    EXPECT_EQ(got, reference_sample(s, n, ref_rng, exclude)) << n;
    exclude.insert(got.begin(), got.end());
  }
  EXPECT_TRUE(s.sample(1, rng, exclude).empty());  // every valid config is excluded by now
}

// A ConfigSet must draw exactly what the unordered set it holds draws, while both grow.
void expect_config_set_draws_as_unordered(const ConfigSpace& s, ConfigSet& set,
                                          const std::vector<size_t>& sizes, uint64_t seed) {
  std::mt19937_64 rng(seed), ref_rng(seed);
  for (size_t n : sizes) {
    const auto got = s.sample(n, rng, set);
    const std::unordered_set<uint64_t> copy = set.indices();
    ASSERT_EQ(got, s.sample(n, ref_rng, copy)) << n << " drawn with " << set.size() << " excluded";
    for (uint64_t i : got) EXPECT_TRUE(set.insert(i));
  }
}

TEST(ConfigSpace, SampleWithConfigSetDrawsAsWithTheUnorderedSet) {
  ConfigSpace s = small_space();
  s.define_knob("vec", std::vector<int64_t>{1, 2, 4, 8, 16});  // 120 configs
  s.add_constraint("unroll16 needs small tile", [](const EntityView& v) {
    return v["unroll"].as_int() != 16 || v["tile"].values[1] <= 2;
  });
  ConfigSet set(s);
  // Valid and invalid indices, one outside the space, and a repeat.
  for (uint64_t i : {0, 3, 8, 9, 10, 11, 50, 77, 119, 5000}) EXPECT_TRUE(set.insert(i));
  EXPECT_FALSE(set.insert(50));
  EXPECT_TRUE(set.contains(77));
  EXPECT_FALSE(set.contains(78));
  EXPECT_EQ(set.size(), 10u);
  expect_config_set_draws_as_unordered(s, set, {1, 1, 5, 30, 1, 200}, 11);
  std::mt19937_64 rng(1);
  EXPECT_TRUE(s.sample(1, rng, set).empty());  // every valid config is in the set by now
}

TEST(ConfigSpace, SampleWithALargeConfigSetDrawsAsWithTheUnorderedSet) {
  // 2^15 configs, about a third invalid; most of the valid ones excluded one draw at a time,
  // as a tuner's visited set grows.
  ConfigSpace s("wide");
  for (int k = 0; k < 5; ++k) s.define_knob("k" + std::to_string(k), std::vector<int64_t>(8, k));
  s.add_constraint("k0 + k1 < 11",
                   [](const EntityView& v) { return v.index() % 8 + v.index() / 8 % 8 < 11; });
  ASSERT_EQ(s.size(), 32768u);
  ConfigSet set(s);
  std::mt19937_64 fill(3);
  for (uint64_t i : s.sample(20000, fill)) set.insert(i);
  std::vector<size_t> sizes(100, 1);
  sizes.push_back(250);
  expect_config_set_draws_as_unordered(s, set, sizes, 5);
}

TEST(ConfigSpace, ConfigSetOfAnOlderSpaceOrAHugeOneStillExcludes) {
  ConfigSpace s = small_space();
  ConfigSet set(s);  // made before the constraint: its tree counts configs now invalid
  for (uint64_t i : {1, 2, 5}) set.insert(i);
  s.add_constraint("no nt", [](const EntityView& v) { return v["layout"].as_string() == "nn"; });
  expect_config_set_draws_as_unordered(s, set, {1, 3, 100}, 9);
  EXPECT_EQ(set.size(), 12u);  // the three, then the 9 other valid ones

  ConfigSpace huge;
  for (int i = 0; i < 5; ++i)
    huge.define_knob("k" + std::to_string(i), std::vector<int64_t>(1024, i));
  ConfigSet visited(huge);  // rejection sampling: the set is read per draw
  std::mt19937_64 rng(2);
  for (uint64_t i : huge.sample(50, rng)) visited.insert(i);
  expect_config_set_draws_as_unordered(huge, visited, {1, 20, 1}, 4);
}

TEST(ConfigSpace, SmallSpaceChecksEachConfigOnce) {
  ConfigSpace s = small_space();
  int checks = 0;
  s.add_constraint("counted", [&checks](const EntityView& v) {
    ++checks;
    return v["unroll"].as_int() != 16;
  });
  std::mt19937_64 rng(2);
  EXPECT_EQ(s.sample(3, rng).size(), 3u);
  EXPECT_EQ(checks, 24);  // the first sample enumerates the space
  const auto all = s.sample(100, rng, {});
  EXPECT_EQ(all.size(), 16u);
  for (uint64_t i : all)
    for (int t = 0; t < 10; ++t) EXPECT_NE(s.get(s.neighbour(i, rng))["unroll"].as_int(), 16);
  EXPECT_EQ(checks, 24);  // later samples and neighbours ask the kept valid set
}

TEST(ConfigSpace, CopyWithAnotherConstraintDoesNotReuseTheValidSet) {
  ConfigSpace s = small_space();
  std::mt19937_64 rng(5);
  EXPECT_EQ(s.sample(100, rng).size(), 24u);  // fills the kept valid set of s
  ConfigSpace narrower = s;
  narrower.add_constraint("no nt",
                          [](const EntityView& v) { return v["layout"].as_string() == "nn"; });
  const auto got = narrower.sample(100, rng);
  EXPECT_EQ(got.size(), 12u);
  for (uint64_t i : got) EXPECT_EQ(narrower.get(i)["layout"].as_string(), "nn") << i;
  for (int t = 0; t < 50; ++t) {
    const uint64_t n = narrower.neighbour(got[0], rng);
    EXPECT_EQ(narrower.get(n)["layout"].as_string(), "nn");
  }
  EXPECT_EQ(s.sample(100, rng).size(), 24u);  // the original keeps its own
  ConfigSpace wider = narrower;
  wider.define_knob("extra", std::vector<int64_t>{0, 1});  // a new knob: a new valid set
  EXPECT_EQ(wider.sample(100, rng).size(), 24u);
}

TEST(ConfigSpace, SampleHugeSpaceWithConstraint) {
  ConfigSpace s;
  for (int i = 0; i < 5; ++i) s.define_knob("k" + std::to_string(i), std::vector<int64_t>(1024, i));
  s.define_split("tile",
                 {.extent = 1024, .num_outputs = 2, .policy = SplitPolicy::kPowerOfTwo});  // 11
  s.define_knob("k5", std::vector<int64_t>(512, 5));
  ASSERT_GT(s.size(), uint64_t{1} << 62);
  s.add_constraint("tile >= 16", [](const EntityView& v) { return v["tile"].values[1] >= 16; });
  std::mt19937_64 rng(1);
  const auto got = s.sample(500, rng);
  ASSERT_EQ(got.size(), 500u);
  std::set<uint64_t> uniq(got.begin(), got.end());
  EXPECT_EQ(uniq.size(), 500u);
  std::map<int64_t, int> by_tile;
  for (uint64_t i : got) {
    ASSERT_TRUE(s.is_valid(i));
    by_tile[s.get(i)["tile"].values[1]]++;
  }
  // 7 allowed tiles (16..1024), uniform: each near 500/7 ~ 71.
  EXPECT_EQ(by_tile.size(), 7u);
  for (const auto& [tile, n] : by_tile) EXPECT_GT(n, 30) << tile;
  // Same seed, same sample.
  std::mt19937_64 rng2(1);
  EXPECT_EQ(s.sample(500, rng2), got);
}

TEST(ConfigSpace, NeighbourChangesExactlyOneKnobAndStaysValid) {
  ConfigSpace s = small_space();
  s.add_constraint("unroll16 needs small tile", [](const EntityView& v) {
    return v["unroll"].as_int() != 16 || v["tile"].values[1] <= 2;
  });
  std::mt19937_64 rng(3);
  for (uint64_t i = 0; i < s.size(); ++i) {
    if (!s.is_valid(i)) continue;
    for (int t = 0; t < 20; ++t) {
      const uint64_t n = s.neighbour(i, rng);
      ASSERT_TRUE(s.is_valid(n));
      const auto a = s.knob_indices(i), b = s.knob_indices(n);
      int diff = 0;
      for (size_t k = 0; k < a.size(); ++k) diff += a[k] != b[k];
      EXPECT_EQ(diff, 1);
    }
  }
}

TEST(ConfigSpace, KnobFeaturesFixedLength) {
  ConfigSpace s = small_space();
  s.define_reorder("order", {.num_axes = 3});
  s.define_annotate("ann", {.extents = {4, 8}});
  EXPECT_EQ(s.knob_feature_length(), 2u + 1u + 1u + 3u + 4u);
  for (uint64_t i = 0; i < s.size(); i += 7)
    EXPECT_EQ(s.knob_features(i).size(), s.knob_feature_length());
  const auto f = s.knob_features(s.index_of(std::vector<uint64_t>{3, 2, 1, 0, 0}));
  EXPECT_FLOAT_EQ(f[1], std::log2(9.f));  // inner factor 8
  EXPECT_FLOAT_EQ(f[2], 16.f);            // unroll value
  EXPECT_FLOAT_EQ(f[3], 1.f);             // "nt" is candidate 1
}

TEST(Config, JsonRoundTripRebuildsEntitiesWithoutTheSpace) {
  ConfigSpace s = small_space();
  s.define_reorder("order", {.num_axes = 3});
  s.define_annotate("ann", {.extents = {4, 8}});
  for (uint64_t i = 0; i < s.size(); i += 5) {
    const Config c = s.get(i);
    const std::string text = c.to_json_string();
    const Config back = Config::from_json_string(text);
    EXPECT_EQ(back, c);
    EXPECT_EQ(back.to_json_string(), text);  // stable
    EXPECT_EQ(s.index_of(back), i);
  }
  const auto j = s.get(0).to_json();
  EXPECT_EQ(j["entity"][0], (nlohmann::json{"tile", "sp", {-1, 1}}));
}

TEST(Config, MalformedJsonIsInvalidArgument) {
  for (const char* text :
       {"{", "[]", R"({"entity": []})", R"({"index": -1, "entity": []})", R"({"index": 0})",
        R"({"index": 0, "entity": [["a", "ot", 1], ["a", "ot", 2]]})",
        R"({"index": 0, "template": 3, "entity": []})"}) {
    EXPECT_EQ(kind_of([&] { Config::from_json_string(text); }), ErrorKind::kInvalidArgument)
        << text;
  }
  const Config c = Config::from_json_string(R"({"index": 0, "entity": [["a", "ot", 1]]})");
  EXPECT_EQ(kind_of([&] { c["b"]; }), ErrorKind::kInstantiation);
  ConfigSpace s = small_space();
  EXPECT_EQ(kind_of([&] { s.index_of(c); }), ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace ktune::schedule_space
