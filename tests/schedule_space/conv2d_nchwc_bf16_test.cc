// Tests conv2d_nchwc_bf16 on odd shapes (H, W odd, C not a multiple of 16, K not a multiple of
// 16, pad 0-2, stride 1-2, the bias and bias_relu epilogues), its fallback and sampled configs,
// tensorized with vdpbf16ps on an AVX-512 BF16 host and in float32 vector code on x86-64-v3:
// every output element against the exact sum (in double) of the bfloat16 products, within the
// bound of any float32 summation order; lanes past K zero. Outputs start as NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "schedule_space/task.h"
#include "support/error.h"
#include "tests/schedule_space/reference_util.h"

namespace ktune::schedule_space {
namespace {

struct Case {
  int64_t n, c, h, w, k, r, stride, pad;
  std::string epilogue = "none";
};

const Case kCases[] = {
    {1, 8, 9, 7, 16, 3, 1, 1},
    {1, 6, 7, 9, 20, 3, 2, 2, "bias"},
    {2, 12, 5, 5, 32, 1, 1, 0},
    {1, 24, 11, 9, 16, 3, 2, 1, "bias_relu"},
    {1, 2, 6, 5, 40, 3, 1, 0, "bias_relu"},
};

Task task_of(const Case& c, const TargetTraits& traits) {
  return Task::create("conv2d_nchwc_bf16",
                      {{"N", std::to_string(c.n)},
                       {"C", std::to_string(c.c)},
                       {"H", std::to_string(c.h)},
                       {"W", std::to_string(c.w)},
                       {"K", std::to_string(c.k)},
                       {"R", std::to_string(c.r)},
                       {"S", std::to_string(c.r)},
                       {"stride", std::to_string(c.stride)},
                       {"pad", std::to_string(c.pad)},
                       {"epilogue", c.epilogue}},
                      traits);
}

// The exact output (in double) and its bound per element, from the layouts' definitions.
struct Expected {
  std::vector<double> value, bound;
};

Expected expected(const Case& c, int64_t icb, const std::vector<te::HostBuffer>& in) {
  const int64_t cb = c.c / icb, kb = (c.k + 15) / 16;
  const int64_t oh = (c.h + 2 * c.pad - c.r) / c.stride + 1;
  const int64_t ow = (c.w + 2 * c.pad - c.r) / c.stride + 1;
  const bool bias = c.epilogue != "none", relu = c.epilogue == "bias_relu";
  // Any order of n float32 additions is within gamma_n * sum |terms| of the exact sum; relu does
  // not widen a difference.
  const int64_t terms = c.c * c.r * c.r + 1;
  const double u = std::ldexp(1.0, -24), gamma = terms * u / (1 - terms * u);
  Expected e;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t ko = 0; ko < kb; ++ko)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x)
          for (int64_t l = 0; l < 16; ++l) {
            if (ko * 16 + l >= c.k) {
              e.value.push_back(0);
              e.bound.push_back(0);
              continue;
            }
            double sum = 0, abs_sum = 0;
            for (int64_t ch = 0; ch < c.c; ++ch)
              for (int64_t r = 0; r < c.r; ++r)
                for (int64_t s = 0; s < c.r; ++s) {
                  const int64_t iy = y * c.stride + r - c.pad, ix = x * c.stride + s - c.pad;
                  if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                  const int64_t i_at =
                      (((n * cb + ch / icb) * c.h + iy) * c.w + ix) * icb + ch % icb;
                  const int64_t w_at =
                      (((((ko * cb + ch / icb) * c.r + r) * c.r + s) * (icb / 2) + ch % icb / 2) *
                           16 +
                       l) *
                          2 +
                      ch % 2;
                  const double p = in[0].get(i_at) * in[1].get(w_at);
                  sum += p;
                  abs_sum += std::fabs(p);
                }
            if (bias) {
              const double b = in[2].get(ko * 16 + l);
              sum += b;
              abs_sum += std::fabs(b);
            }
            e.value.push_back(relu ? std::max(sum, 0.0) : sum);
            e.bound.push_back(gamma * abs_sum + 1e-30);
          }
  return e;
}

void check_case(const Case& c, const codegen::Target& target) {
  const Task task = task_of(c, testing::traits_of(target));
  const std::string what = target.str() + " " + task.workload_key();
  const testing::Reference ref = testing::reference_of(task, 21);
  const Expected want = expected(c, task.args().get_int("ic_block"), ref.inputs);
  ASSERT_EQ(static_cast<size_t>(ref.outputs[0].num_elements()), want.value.size()) << what;

  const std::vector<Config> configs = testing::fallback_and_sampled(task, 3, 9);
  for (const Config& cfg : configs)
    testing::run_on_host(task, cfg, target, ref, [&](const std::vector<te::HostBuffer>& bufs) {
      const te::HostBuffer& out = bufs.back();
      for (int64_t i = 0; i < out.num_elements(); ++i) {
        const double got = out.get(i);
        ASSERT_LE(std::fabs(got - want.value[i]), want.bound[i])
            << what << " " << cfg.to_json_string() << " element " << i << ": got " << got
            << ", expected " << want.value[i];
      }
    });
}

TEST(Conv2dNchwcBf16Test, TensorizedOnTheHostMatchesTheExactSum) {
  if (!testing::traits_of(codegen::Target::host()).bf16_dot)
    GTEST_SKIP() << "the host has no AVX-512 BF16";
  for (const Case& c : kCases) check_case(c, codegen::Target::host());
}

TEST(Conv2dNchwcBf16Test, VectorCodeOnX86V3MatchesTheExactSum) {
  const codegen::Target v3 =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3");
  ASSERT_FALSE(testing::traits_of(v3).bf16_dot);
  for (const Case& c : kCases) check_case(c, v3);
}

TEST(Conv2dNchwcBf16Test, ObjectHoldsVdpbf16psOnlyWithAvx512Bf16) {
  const std::map<std::string, std::string> args = {
      {"C", "64"}, {"H", "14"}, {"W", "14"}, {"K", "64"}, {"pad", "1"}};
  EXPECT_NE(testing::fallback_assembly("conv2d_nchwc_bf16", args,
                                       "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4")
                .find("vdpbf16ps"),
            std::string::npos);
  EXPECT_EQ(testing::fallback_assembly("conv2d_nchwc_bf16", args,
                                       "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3")
                .find("vdpbf16ps"),
            std::string::npos);
}

TEST(Conv2dNchwcBf16Test, LayoutsAndBadShapes) {
  const TargetTraits traits = testing::traits_of(codegen::Target::host());
  const Task t = task_of({1, 6, 9, 9, 20, 3, 1, 1, "bias"}, traits);
  EXPECT_EQ(t.args().get_int("ic_block"), 6);
  const ComputeDef def = t.template_def().compute(t.args());
  ASSERT_EQ(def.args.size(), 4u);
  EXPECT_EQ(def.args[0].dtype(), te::BFloat16());
  EXPECT_EQ(def.args[1].shape(), (std::vector<int64_t>{2, 1, 3, 3, 3, 16, 2}));
  EXPECT_EQ(def.args[2].shape(), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(def.args[3].shape(), (std::vector<int64_t>{1, 2, 9, 9, 16}));
  EXPECT_EQ(def.args[3].dtype(), te::Float(32));
  const std::vector<std::map<std::string, std::string>> bad = {
      {{"C", "5"}, {"H", "5"}, {"W", "5"}, {"K", "16"}},
      {{"C", "8"}, {"H", "5"}, {"W", "5"}, {"K", "16"}, {"ic_block", "3"}},
      {{"C", "8"}, {"H", "2"}, {"W", "5"}, {"K", "16"}}};
  testing::expect_invalid_workloads("conv2d_nchwc_bf16", bad, traits);
}

}  // namespace
}  // namespace ktune::schedule_space
