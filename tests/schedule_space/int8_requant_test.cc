// Tests matmul_u8s8s32's requantize epilogue (out=u8|s8, per-tensor and per-channel scale, relu)
// on the VNNI host and on x86-64-v3 against a plain C++ reference in double with std::nearbyint:
// exact except where float32 rounding of the product may cross a half (then within one), exact
// on exact ties (scale 0.5, odd sums) that check half-to-even, and bit-exact with te's interpreter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "tests/schedule_space/reference_util.h"

namespace ktune::schedule_space {
namespace {

struct Case {
  int64_t M, N, K;
  std::string out;  // u8 | s8
  bool per_channel;
  bool relu;
  bool ties;  // small odd sums, scale 0.5: every product is an exact half
};

Task task_of(const Case& c, const TargetTraits& traits) {
  return Task::create("matmul_u8s8s32",
                      {{"M", std::to_string(c.M)},
                       {"N", std::to_string(c.N)},
                       {"K", std::to_string(c.K)},
                       {"out", c.out},
                       {"scale", c.per_channel ? "per_channel" : "per_tensor"},
                       {"relu", c.relu ? "1" : "0"}},
                      traits);
}

// A, B (packed), bias, scale, zero_point in kernel ABI order.
std::vector<te::HostBuffer> inputs_of(const Task& task, const Case& c) {
  const ComputeDef def = task.template_def().compute(task.args());
  std::vector<te::HostBuffer> in;
  for (size_t i = 0; i + 1 < def.args.size(); ++i)
    in.emplace_back(def.args[i].shape(), def.args[i].dtype());
  const bool u8 = c.out == "u8";
  if (c.ties) {
    // Odd sums: A's column 0 and B's row 0 odd, every other B entry even, bias even. Small
    // values keep the halves inside the output range.
    in[0].fill_random(11, 0, 3);
    in[1].fill_random(12, -1, 1);
    for (int64_t i = 0; i < c.M; ++i)
      in[0].set(i * c.K, 2 * std::floor(in[0].get(i * c.K) / 2) + 1);
    for (int64_t e = 0; e < in[1].num_elements(); ++e) {
      const bool row0 = e % 4 == 0 && (e / 64) % (in[1].shape()[1]) == 0;  // k == 0
      in[1].set(e, row0 ? 1 - 2 * (e / 4 % 2) : 2 * in[1].get(e));
    }
    in[2].fill_random(13, -10, 10);
    for (int64_t j = 0; j < c.N; ++j) in[2].set(j, 2 * std::floor(in[2].get(j) / 2));
    for (int64_t j = 0; j < in[3].num_elements(); ++j) in[3].set(j, 0.5);
    in[4].set(0, u8 ? 100 : -3);
  } else {
    in[0].fill_random(21, 0, 255);
    in[1].fill_random(22, -128, 127);
    in[2].fill_random(23, -20000, 20000);
    in[3].fill_random(24, 0.0005, 0.004);
    in[4].set(0, u8 ? 120 : -7);
  }
  return in;
}

struct Expected {
  std::vector<int> value;
  std::vector<bool> near_half;  // float32 rounding of the product may land on either side
  int ties_to_even_down = 0, ties_to_even_up = 0;
};

Expected reference(const Case& c, const std::vector<te::HostBuffer>& in) {
  const int64_t KB = in[1].shape()[1];
  const int lo0 = c.out == "u8" ? 0 : -128, hi = c.out == "u8" ? 255 : 127;
  const int zp = static_cast<int>(in[4].get(0));
  const int lo = c.relu ? std::max(lo0, zp) : lo0;
  Expected e;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      int64_t acc = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const int64_t b = ((j / 16 * KB + k / 4) * 16 + j % 16) * 4 + k % 4;
        acc += static_cast<int64_t>(in[0].get(i * c.K + k)) * static_cast<int64_t>(in[1].get(b));
      }
      const double v = static_cast<double>(acc + static_cast<int64_t>(in[2].get(j))) *
                       in[3].get(c.per_channel ? j : 0);
      const double r = std::nearbyint(v);
      const double frac = v - std::floor(v);
      if (frac == 0.5) ++(r < v ? e.ties_to_even_down : e.ties_to_even_up);
      e.near_half.push_back(std::fabs(frac - 0.5) <= std::fabs(v) * 0x1p-22 && frac != 0.5);
      e.value.push_back(std::clamp(static_cast<int>(r) + zp, lo, hi));
    }
  }
  return e;
}

int element(const te::HostBuffer& b, int64_t i) { return static_cast<int>(b.get(i)); }

void check_case(const Case& c, const codegen::Target& target) {
  const Task task = task_of(c, testing::traits_of(target));
  const std::string what = target.str() + " " + task.workload_key();
  const std::vector<te::HostBuffer> in = inputs_of(task, c);
  const Expected want = reference(c, in);
  if (c.ties) {
    ASSERT_GT(want.ties_to_even_down, 0) << what;
    ASSERT_GT(want.ties_to_even_up, 0) << what;
  }
  // te's interpreter computes the same float32 operations as the kernel.
  const ComputeDef def = task.template_def().compute(task.args());
  std::vector<std::pair<te::Tensor, const te::HostBuffer*>> bound;
  for (size_t i = 0; i < in.size(); ++i) bound.emplace_back(def.args[i], &in[i]);
  const std::vector<te::HostBuffer> evaluated = te::evaluate(def.outputs, bound);
  const te::HostBuffer& interp = evaluated[0];

  for (const Config& cfg : testing::fallback_and_sampled(task, 3, 3)) {
    const Instantiated inst = task.instantiate(cfg);
    codegen::Kernel k =
        codegen::Kernel::load(codegen::build(te::lower(inst.schedule, inst.args, "k"), target));
    std::vector<te::HostBuffer> bufs;
    for (const auto& b : in) {
      bufs.emplace_back(b.shape(), b.dtype());
      std::memcpy(bufs.back().data(), b.data(), b.bytes());
    }
    bufs.emplace_back(interp.shape(), interp.dtype());
    std::vector<void*> ptrs;
    for (auto& b : bufs) ptrs.push_back(b.data());
    te::HostBuffer& out = bufs.back();
    // Two sentinels: an element the kernel leaves unwritten cannot match both times.
    for (int sentinel : {0x5A, 0xA5}) {
      codegen::set_num_threads(sentinel == 0x5A ? 1 : 2);
      std::memset(out.data(), sentinel, out.bytes());
      ASSERT_EQ(k.run(ptrs), 0);
      for (int64_t i = 0; i < out.num_elements(); ++i) {
        const int got = element(out, i);
        const std::string where =
            what + " " + cfg.to_json_string() + " element " + std::to_string(i);
        ASSERT_EQ(got, element(interp, i)) << where << " (interpreter)";
        if (want.near_half[i])
          ASSERT_LE(std::abs(got - want.value[i]), 1) << where;
        else
          ASSERT_EQ(got, want.value[i]) << where;
      }
    }
  }
}

const Case kCases[] = {
    {8, 64, 64, "u8", false, false, false}, {5, 50, 10, "u8", true, false, false},
    {7, 33, 13, "s8", false, true, false},  {33, 48, 20, "s8", true, true, false},
    {3, 17, 7, "u8", false, true, false},   {9, 40, 21, "u8", false, false, true},
    {5, 31, 9, "s8", true, false, true},    {4, 20, 6, "u8", true, true, true},
};

void check_target(const codegen::Target& target) {
  for (const Case& c : kCases) check_case(c, target);
}

TEST(MatmulInt8RequantTest, OnTheVnniHost) {
  if (!testing::traits_of(codegen::Target::host()).int8_dot)
    GTEST_SKIP() << "the host has no AVX-512 VNNI";
  check_target(codegen::Target::host());
}

TEST(MatmulInt8RequantTest, OnX86V3) {
  check_target(codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"));
}

TEST(MatmulInt8RequantTest, DefaultsKeepTheKeyAndOptionsNeedAnOutput) {
  const TargetTraits traits = testing::traits_of(codegen::Target::host());
  const Task plain = Task::create("matmul_u8s8s32", {{"M", "4"}, {"N", "16"}, {"K", "8"}}, traits);
  EXPECT_EQ(plain.workload_key(), "matmul_u8s8s32(M=4,N=16,K=8)");
  EXPECT_EQ(plain.template_def().compute(plain.args()).args.size(), 3u);
  const Task q = task_of({4, 16, 8, "u8", true, true, false}, traits);
  EXPECT_EQ(q.workload_key(), "matmul_u8s8s32(M=4,N=16,K=8,out=u8,scale=per_channel,relu=1)");
  const ComputeDef def = q.template_def().compute(q.args());
  ASSERT_EQ(def.args.size(), 6u);
  EXPECT_EQ(def.args[3].shape(), std::vector<int64_t>{16});  // per-channel scale
  EXPECT_EQ(def.args[5].dtype(), te::UInt(8));
  for (const auto& bad :
       std::vector<std::pair<std::string, std::string>>{{"relu", "1"}, {"scale", "per_channel"}}) {
    try {
      Task::create("matmul_u8s8s32", {{"M", "4"}, {"N", "16"}, {"K", "8"}, bad}, traits);
      ADD_FAILURE() << bad.first << " accepted with out=s32";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("only to out=u8 or out=s8"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace ktune::schedule_space
