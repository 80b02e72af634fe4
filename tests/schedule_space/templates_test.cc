// Every config of a small instance of every built-in template lowers and interprets to the
// reference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "support/error.h"
#include "te/lower.h"
#include "tests/schedule_space/template_cases.h"

namespace ktune::schedule_space {
namespace {

using testing::Oracle;
using testing::TemplateCase;

class EveryConfig : public ::testing::TestWithParam<TemplateCase> {};

TEST_P(EveryConfig, MatchesReferenceInInterpreter) {
  const TemplateCase& c = GetParam();
  const Task task = Task::create(c.template_name, c.args, testing::small_target());
  const ConfigSpace& space = task.space();
  // Bounds on the test's time: the product of the knobs (every index is looked at) and, below, the
  // configs the constraints keep (each one is lowered and interpreted).
  ASSERT_LE(space.size(), 8000u) << task.workload_key();
  ASSERT_GE(space.size(), 8u) << task.workload_key();
  const Oracle oracle(task, 42);
  uint64_t valid = 0;
  for (uint64_t i = 0; i < space.size(); ++i) {
    const Config cfg = space.get(i);
    if (!space.is_valid(i)) {
      try {
        task.instantiate(cfg);
        ADD_FAILURE() << "instantiated a config its constraints reject: " << cfg.to_json_string();
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInstantiation);
      }
      continue;
    }
    ++valid;
    te::LoweredFunc f;
    try {
      const Instantiated inst = task.instantiate(cfg);
      f = te::lower(inst.schedule, inst.args, c.template_name);
    } catch (const Error& e) {
      ADD_FAILURE() << task.workload_key() << " config " << cfg.to_json_string() << ": "
                    << e.what();
      continue;
    }
    const double err =
        oracle.check([&](const std::vector<void*>& args) { te::interpret(f, args); });
    EXPECT_LT(err, 1e-4) << task.workload_key() << " config " << cfg.to_json_string();
    if (::testing::Test::HasFailure()) break;  // one failing config says enough
  }
  EXPECT_GT(valid, 0u);
  EXPECT_LE(valid, 2000u) << task.workload_key();
  std::printf("%s: %llu configs, %llu valid, all checked\n", task.workload_key().c_str(),
              static_cast<unsigned long long>(space.size()),
              static_cast<unsigned long long>(valid));
  // The oracle itself notices a kernel that writes nothing.
  EXPECT_GT(oracle.check([](const std::vector<void*>&) {}), 1.0);
  // The fallback is valid and correct too.
  const Instantiated inst = task.instantiate(task.fallback_config());
  const te::LoweredFunc f = te::lower(inst.schedule, inst.args, c.template_name);
  EXPECT_LT(oracle.check([&](const std::vector<void*>& args) { te::interpret(f, args); }), 1e-4);
}

// The dot form's register tiles of several rows of X (dot_rows 2 to 4) need more registers than
// the small target's 16, so the every-config test above only sees 1 row: check each row count on
// a 32-register AVX-512 target, with tails everywhere (M not a multiple of the rows, N of the W
// block, K of the 16 lanes), in the interpreter.
TEST(DotRows, EveryRowCountMatchesReferenceOn32Registers) {
  TargetTraits avx512;
  avx512.key = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
  avx512.vector_bits = 512;
  avx512.cores = 1;
  const std::vector<TemplateCase> cases = {
      {"dense", "dense_bias_relu", {{"M", "5"}, {"N", "9"}, {"K", "37"}}},
      {"matmul_nt",
       "matmul",
       {{"M", "7"}, {"N", "5"}, {"K", "33"}, {"layout", "nt"}, {"epilogue", "bias_gelu"}}},
  };
  for (const TemplateCase& c : cases) {
    const Task task = Task::create(c.template_name, c.args, avx512);
    const ConfigSpace& space = task.space();
    const Oracle oracle(task, 7);
    std::vector<uint64_t> digits = space.knob_indices(space.index_of(task.fallback_config()));
    const int64_t lanes_at = space.knob_position("dot_lanes"),
                  rows_at = space.knob_position("dot_rows");
    ASSERT_GE(lanes_at, 0);
    ASSERT_GE(rows_at, 0);
    auto int_entity = [](const char* name, int64_t v) {
      return Entity{name, KnobKind::kOther, {v}, "", false};
    };
    digits[lanes_at] = space.knob(lanes_at).find(int_entity("dot_lanes", 16));
    for (int64_t rows = 1; rows <= 4; ++rows) {
      digits[rows_at] = space.knob(rows_at).find(int_entity("dot_rows", rows));
      const uint64_t index = space.index_of(digits);
      ASSERT_TRUE(space.is_valid(index)) << c.name << " rows " << rows;
      const Instantiated inst = task.instantiate(space.get(index));
      const te::LoweredFunc f = te::lower(inst.schedule, inst.args, c.template_name);
      EXPECT_LT(oracle.check([&](const std::vector<void*>& args) { te::interpret(f, args); }), 1e-4)
          << c.name << " rows " << rows;
    }
  }
}

// What batch_matmul's heads layouts mean, against loops written here (the every-config test
// checks the schedules against the compute, this the compute): A stored [M, a_heads, K] with
// matrix q in slot a_head + q, B [N, b_heads, K] likewise, C written [M, batch, N].
TEST(BatchMatmulHeads, ComputeReadsAndWritesTheSlots) {
  const int64_t batch = 2, M = 3, N = 4, K = 5, AH = 5, BH = 3;
  const Task task = Task::create("batch_matmul",
                                 {{"batch", "2"},
                                  {"M", "3"},
                                  {"N", "4"},
                                  {"K", "5"},
                                  {"layout", "nt"},
                                  {"a_heads", "5"},
                                  {"a_head", "2"},
                                  {"b_heads", "3"},
                                  {"b_head", "1"},
                                  {"c_heads", "2"}},
                                 testing::small_target());
  const ComputeDef def = task.template_def().compute(task.args());
  ASSERT_EQ(def.args.size(), 3u);
  EXPECT_EQ(def.args[0].shape(), (std::vector<int64_t>{M, AH, K}));
  EXPECT_EQ(def.args[1].shape(), (std::vector<int64_t>{N, BH, K}));
  EXPECT_EQ(def.outputs[0].shape(), (std::vector<int64_t>{M, batch, N}));
  te::HostBuffer a(def.args[0].shape(), def.args[0].dtype()),
      b(def.args[1].shape(), def.args[1].dtype());
  a.fill_random(1);
  b.fill_random(2);
  const std::vector<te::HostBuffer> out =
      te::evaluate(def.outputs, {{def.args[0], &a}, {def.args[1], &b}});
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k)
          want += a.get((i * AH + 2 + q) * K + k) * b.get((j * BH + 1 + q) * K + k);
        EXPECT_NEAR(out[0].get((i * batch + q) * N + j), want, 1e-5) << q << " " << i << " " << j;
      }
  // A slot range past the row is refused.
  try {
    Task::create(
        "batch_matmul",
        {{"batch", "2"}, {"M", "3"}, {"N", "4"}, {"K", "5"}, {"a_heads", "2"}, {"a_head", "1"}},
        testing::small_target());
    ADD_FAILURE() << "a_head + batch > a_heads accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

// What a_softmax means, against loops written here: C = softmax(a_scale * A over K) * B, the
// scale in its shortest float32 form in the key; a_scale without a_softmax, a zero scale and a
// softmax of an operand read from heads are refused.
TEST(BatchMatmulSoftmax, ComputeIsTheSoftmaxOfTheScoresTimesB) {
  const int64_t batch = 2, M = 3, N = 4, K = 37;
  const Task task = Task::create("batch_matmul",
                                 {{"batch", "2"},
                                  {"M", "3"},
                                  {"N", "4"},
                                  {"K", "37"},
                                  {"a_softmax", "1"},
                                  {"a_scale", "0.1250"}},
                                 testing::small_target());
  EXPECT_NE(task.workload_key().find("a_softmax=1,a_scale=0.125)"), std::string::npos)
      << task.workload_key();
  const ComputeDef def = task.template_def().compute(task.args());
  ASSERT_EQ(def.args.size(), 3u);
  te::HostBuffer a(def.args[0].shape(), def.args[0].dtype()),
      b(def.args[1].shape(), def.args[1].dtype());
  a.fill_random(3);
  b.fill_random(4);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.set(i, 40 * a.get(i));  // exp needs the max
  const std::vector<te::HostBuffer> out =
      te::evaluate(def.outputs, {{def.args[0], &a}, {def.args[1], &b}});
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < M; ++i) {
      const int64_t row = (q * M + i) * K;
      double top = -INFINITY, total = 0;
      for (int64_t k = 0; k < K; ++k) top = std::max(top, 0.125 * a.get(row + k));
      for (int64_t k = 0; k < K; ++k) total += std::exp(0.125 * a.get(row + k) - top);
      for (int64_t j = 0; j < N; ++j) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k)
          want += std::exp(0.125 * a.get(row + k) - top) / total * b.get((q * K + k) * N + j);
        EXPECT_NEAR(out[0].get((q * M + i) * N + j), want, 1e-5) << q << " " << i << " " << j;
      }
    }
  const std::map<std::string, std::string> bad[] = {
      {{"a_scale", "0.5"}},
      {{"a_softmax", "1"}, {"a_scale", "0"}},
      {{"a_softmax", "1"}, {"a_scale", "x"}},
      {{"a_softmax", "1"}, {"a_heads", "4"}},
  };
  for (auto args : bad) {
    args.insert({{"batch", "2"}, {"M", "3"}, {"N", "4"}, {"K", "5"}});
    try {
      Task::create("batch_matmul", args, testing::small_target());
      ADD_FAILURE() << "accepted " << args.begin()->first;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, EveryConfig, ::testing::ValuesIn(testing::small_cases()),
                         [](const ::testing::TestParamInfo<TemplateCase>& info) {
                           return info.param.name;
                         });

// No workload is refused for its numbers alone: every extent from 1 to 70 (primes, odd sizes,
// sizes below and just past 4- and 16-lane vectors) in every size argument of every template
// gives a task with a valid fallback, on a 4-lane and a 16-lane target.
TEST(AnyExtent, EveryTemplateAcceptsEveryExtent) {
  TargetTraits avx512;
  avx512.vector_bits = 512;
  avx512.cores = 2;
  for (const TargetTraits& target : {testing::small_target(), avx512}) {
    for (int64_t e = 1; e <= 70; ++e) {
      const std::string v = std::to_string(e);
      const std::vector<std::pair<std::string, std::map<std::string, std::string>>> workloads = {
          {"matmul", {{"M", v}, {"N", "7"}, {"K", "9"}}},
          {"matmul", {{"M", "3"}, {"N", v}, {"K", v}, {"layout", "nt"}}},
          {"dense_bias_relu", {{"M", "1"}, {"N", v}, {"K", "5"}, {"epilogue", "bias_gelu"}}},
          {"batch_matmul", {{"batch", "2"}, {"M", v}, {"N", v}, {"K", "3"}}},
          {"conv2d", {{"C", v}, {"H", "5"}, {"W", v == "1" ? "3" : v}, {"K", v}, {"pad", "1"}}},
          {"depthwise_conv2d",
           {{"C", v}, {"H", v == "1" ? "3" : v}, {"W", "4"}, {"stride", "2"}, {"pad", "1"}}},
          {"depthwise_conv2d_nchwc",
           {{"C", v}, {"H", v == "1" ? "3" : v}, {"W", "4"}, {"stride", "2"}, {"pad", "1"}}},
          {"max_pool2d", {{"C", "2"}, {"H", v}, {"W", v}, {"R", "1"}, {"S", "1"}, {"stride", "1"}}},
          {"avg_pool2d", {{"C", v}, {"H", "4"}, {"W", "4"}}},
          {"conv2d_nchwc",
           {{"C", v}, {"H", "3"}, {"W", v == "1" ? "3" : v}, {"K", v}, {"pad", "1"}}},
          {"conv2d_nchwc",
           {{"C", v},
            {"H", "3"},
            {"W", "3"},
            {"K", "5"},
            {"ic_block", "16"},
            {"oc_block", "16"},
            {"epilogue", "bias_add_relu"}}},
      };
      for (const auto& [name, args] : workloads) {
        try {
          const Task t = Task::create(name, args, target);
          EXPECT_TRUE(t.space().is_valid(t.space().index_of(t.fallback_config())))
              << t.workload_key();
        } catch (const Error& err) {
          ADD_FAILURE() << name << " extent " << e << " on " << target.vector_bits
                        << " bits: " << err.what();
        }
      }
    }
  }
}

}  // namespace
}  // namespace ktune::schedule_space
