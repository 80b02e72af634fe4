// Tests of the knob kinds: candidate lists per policy, entity JSON, features.
#include "schedule_space/knob.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "support/error.h"

namespace ktune::schedule_space {
namespace {

int64_t product_of_inner(const Entity& e) {
  int64_t p = 1;
  for (size_t i = 1; i < e.values.size(); ++i) p *= e.values[i];
  return p;
}

TEST(SplitKnob, FactorsNoTailListsEveryDivisorChain) {
  SplitKnob k("t", {.extent = 12, .num_outputs = 2});
  // Divisors of 12: 1 2 3 4 6 12.
  ASSERT_EQ(k.size(), 6u);
  std::vector<int64_t> inner;
  for (const auto& e : k.entities()) {
    EXPECT_EQ(e.values.size(), 2u);
    EXPECT_EQ(e.values[0], -1);
    inner.push_back(e.values[1]);
  }
  EXPECT_EQ(inner, (std::vector<int64_t>{1, 2, 3, 4, 6, 12}));
}

TEST(SplitKnob, ThreeOutputsProductsDivideExtent) {
  SplitKnob k("t", {.extent = 16, .num_outputs = 3});
  // Pairs (a, b) of powers of two with a * b <= 16: sum over a of (#b) = 5+4+3+2+1 = 15.
  EXPECT_EQ(k.size(), 15u);
  for (const auto& e : k.entities()) EXPECT_EQ(16 % product_of_inner(e), 0) << e.to_json().dump();
}

TEST(SplitKnob, PowerOfTwoWithTailAndMaxFactor) {
  SplitKnob k("t", {.extent = 100,
                    .num_outputs = 2,
                    .policy = SplitPolicy::kPowerOfTwo,
                    .max_factor = 32,
                    .allow_tail = true});
  std::vector<int64_t> inner;
  for (const auto& e : k.entities()) inner.push_back(e.values[1]);
  EXPECT_EQ(inner, (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  // Without tails only the powers of two dividing 100 remain.
  SplitKnob nt("t", {.extent = 100, .num_outputs = 2, .policy = SplitPolicy::kPowerOfTwo});
  EXPECT_EQ(nt.size(), 3u);  // 1, 2, 4
}

TEST(SplitKnob, InnermostMultipleKeepsWholeVectors) {
  SplitKnob k("t", {.extent = 64, .num_outputs = 3, .innermost_multiple = 16});
  ASSERT_GT(k.size(), 0u);
  for (const auto& e : k.entities()) EXPECT_EQ(e.values.back() % 16, 0);
  // An extent below the multiple falls back to the extent itself.
  SplitKnob small("s", {.extent = 8, .num_outputs = 2, .innermost_multiple = 16});
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small.entity(0).values[1], 8);
}

// An extent with too few divisors for the innermost factor (1000 has no multiple of 16, 97 is
// prime) gets the powers of two with a tail beside its divisors; a power of two or an extent rich
// in divisors keeps exactly its dividing tuples.
TEST(SplitKnob, FewDivisorsAddPowerOfTwoTails) {
  SplitKnob vec("x",
                {.extent = 1000, .num_outputs = 3, .innermost_multiple = 16, .max_innermost = 64});
  std::set<int64_t> inner;
  for (const auto& e : vec.entities()) inner.insert(e.values.back());
  EXPECT_EQ(inner, (std::set<int64_t>{16, 32, 64}));
  for (const auto& e : vec.entities()) EXPECT_LE(product_of_inner(e), 1000) << e.to_json().dump();
  EXPECT_NE(vec.describe().find("tail(+power2)"), std::string::npos) << vec.describe();

  SplitKnob prime("p", {.extent = 97, .num_outputs = 2, .max_innermost = 16});
  std::vector<int64_t> p;
  for (const auto& e : prime.entities()) p.push_back(e.values[1]);
  EXPECT_EQ(p, (std::vector<int64_t>{1, 2, 4, 8, 16}));
  // Resolving the remainder rounds up: 97 = 6 x 16 + 1.
  EXPECT_EQ(prime.entity(4).split_factors(97), (std::vector<int64_t>{7, 16}));

  SplitKnob off(
      "o", {.extent = 97, .num_outputs = 2, .max_innermost = 16, .tail_when_few_divisors = false});
  EXPECT_EQ(off.size(), 1u);
  SplitKnob pow2("q", {.extent = 512, .num_outputs = 3});
  for (const auto& e : pow2.entities()) EXPECT_EQ(512 % product_of_inner(e), 0);
  SplitKnob rich("r", {.extent = 56, .num_outputs = 2, .max_innermost = 32});
  EXPECT_EQ(rich.size(), 7u);  // 1 2 4 7 8 14 28: as many as the powers of two up to 32
}

TEST(SplitKnob, CandidatesFilteredByTailRule) {
  SplitKnob k("t", {.extent = 24,
                    .num_outputs = 3,
                    .policy = SplitPolicy::kCandidates,
                    .candidates = {{2, 4}, {5, 1}, {3, 8}, {4, 8}}});
  ASSERT_EQ(k.size(), 2u);  // 5 does not divide 24; 4*8 > 24
  EXPECT_EQ(k.entity(1).values, (std::vector<int64_t>{-1, 3, 8}));
}

TEST(SplitKnob, RejectsBadParameters) {
  auto kind_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kUnknown;
  };
  EXPECT_EQ(kind_of([] { SplitKnob("t", {.extent = 0}); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([] { SplitKnob("t", {.extent = -4}); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([] { SplitKnob("t", {.extent = 8, .num_outputs = 1}); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([] {
              SplitKnob("t",
                        {.extent = 8, .policy = SplitPolicy::kCandidates, .candidates = {{3}}});
            }),
            ErrorKind::kInvalidArgument);
}

TEST(SplitKnob, FactorsResolveRemainderWithCeil) {
  SplitKnob k(
      "t",
      {.extent = 100, .num_outputs = 3, .policy = SplitPolicy::kPowerOfTwo, .allow_tail = true});
  Entity e;
  e.name = "t";
  e.kind = KnobKind::kSplit;
  e.values = {-1, 4, 8};
  EXPECT_EQ(e.split_factors(100), (std::vector<int64_t>{4, 4, 8}));  // ceil(100 / 32) = 4
  ASSERT_GE(k.find(e), 0);
  std::vector<float> f;
  k.append_features(static_cast<uint64_t>(k.find(e)), f);
  ASSERT_EQ(f.size(), k.feature_length());
  EXPECT_FLOAT_EQ(f[2], std::log2(9.0f));
}

TEST(ReorderKnob, AllPermutationsAndCandidates) {
  ReorderKnob all("r", {.num_axes = 4});
  EXPECT_EQ(all.size(), 24u);
  std::set<std::vector<int64_t>> seen;
  for (const auto& e : all.entities()) seen.insert(e.values);
  EXPECT_EQ(seen.size(), 24u);
  ReorderKnob some("r", {.num_axes = 3, .candidates = {{0, 1, 2}, {2, 0, 1}}});
  EXPECT_EQ(some.size(), 2u);
  EXPECT_THROW(ReorderKnob("r", {.num_axes = 3, .candidates = {{0, 0, 1}}}), Error);
  EXPECT_THROW(ReorderKnob("r", {.num_axes = 9}), Error);
}

TEST(AnnotateKnob, AtMostOneVectorAndUnrollLimit) {
  // Axis extents 4, 32, 16: axis 1 is too long to unroll; only the last may be vectorized.
  AnnotateKnob k("a", {.extents = {4, 32, 16}, .max_unroll = 16});
  // Options: axis0 {none, unroll}, axis1 {none}, axis2 {none, unroll, vec} -> 6.
  EXPECT_EQ(k.size(), 6u);
  AnnotateKnob free_vec("a", {.extents = {8, 8}, .vectorize_innermost_only = false});
  for (const auto& e : free_vec.entities())
    EXPECT_LE(
        std::count(e.values.begin(), e.values.end(), static_cast<int64_t>(Annotation::kVectorize)),
        1);
  // 3*3 minus (vec, vec) = 8.
  EXPECT_EQ(free_vec.size(), 8u);
}

TEST(OtherKnob, IntsAndStrings) {
  OtherKnob ints("u", std::vector<int64_t>{0, 16, 64});
  EXPECT_EQ(ints.size(), 3u);
  EXPECT_EQ(ints.entity(2).as_int(), 64);
  OtherKnob strs("layout", std::vector<std::string>{"nn", "nt"});
  EXPECT_EQ(strs.entity(1).as_string(), "nt");
  EXPECT_THROW(strs.entity(1).as_int(), Error);
  EXPECT_THROW(OtherKnob("e", std::vector<int64_t>{}), Error);
}

TEST(Entity, JsonRoundTripForEveryKind) {
  SplitKnob s("tile_x", {.extent = 64, .num_outputs = 3});
  ReorderKnob r("order", {.num_axes = 3});
  AnnotateKnob a("ann", {.extents = {2, 8}});
  OtherKnob o("unroll", std::vector<int64_t>{0, 8});
  OtherKnob t("layout", std::vector<std::string>{"nn", "nt"});
  for (const Knob* k : std::vector<const Knob*>{&s, &r, &a, &o, &t}) {
    for (const auto& e : k->entities()) {
      const auto j = e.to_json();
      const Entity back = Entity::from_json(nlohmann::json::parse(j.dump()));
      EXPECT_EQ(back, e) << j.dump();
    }
  }
  EXPECT_EQ(a.entity(a.size() - 1).to_json()[2], (nlohmann::json{"unroll", "vec"}));
}

TEST(Entity, MalformedJsonIsInvalidArgument) {
  for (const char* text : {R"(["t"])", R"(["t", "xx", [1]])", R"(["t", "sp", [1.5]])",
                           R"(["t", "an", [3]])", R"(["t", "an", ["fast"]])", R"(["t", "ot", [1]])",
                           R"([1, "sp", [1]])", R"(["t","sp",[]])"}) {
    try {
      Entity::from_json(nlohmann::json::parse(text));
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << text;
    }
  }
}

}  // namespace
}  // namespace ktune::schedule_space
