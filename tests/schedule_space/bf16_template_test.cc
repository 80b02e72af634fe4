// Tests bfloat16 end to end: te's conversions (interpreter and codegen agree bit for bit), and
// matmul_bf16 on odd shapes (K odd: padded), tensorized with vdpbf16ps on an AVX-512 BF16 host,
// with the intrinsic's float32 fallback and in plain vector code on x86-64-v3, against the
// compute's reference (float32 sums in k order; outputs start as NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>

#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "te/bfloat16.h"
#include "tests/schedule_space/reference_util.h"

namespace ktune::schedule_space {
namespace {

using testing::Reference;

struct Shape {
  int64_t M, N, K;
};

const Shape kShapes[] = {{8, 64, 64}, {5, 50, 11}, {1, 17, 3}, {33, 48, 20}, {16, 32, 1}};

TEST(Bfloat16Test, ConversionRoundsToNearestEven) {
  EXPECT_EQ(te::float_to_bfloat16(1.0f), 0x3F80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to the even one, 1.
  EXPECT_EQ(te::float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(te::float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(te::float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -9)), 0x3F81);  // above half
  EXPECT_EQ(te::float_to_bfloat16(-2.0f), 0xC000);
  // Rounds up into the next binade, and to infinity past the largest bfloat16.
  EXPECT_EQ(te::float_to_bfloat16(std::nextafter(2.0f, 0.0f)), 0x4000);
  EXPECT_EQ(te::float_to_bfloat16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_TRUE(std::isnan(
      te::bfloat16_to_float(te::float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lies in the low half only stays a NaN.
  uint32_t low_nan = 0x7F800001u;
  float f;
  std::memcpy(&f, &low_nan, 4);
  EXPECT_TRUE(std::isnan(te::bfloat16_to_float(te::float_to_bfloat16(f))));
  EXPECT_EQ(te::bfloat16_to_float(0x4049), 3.140625f);
}

// The host kernel of `out` = cast(to, in(i)) over n elements, vectorized by 16 or scalar.
codegen::Kernel conversion_kernel(const te::Tensor& in, te::DataType to, bool vector) {
  const te::Tensor out = te::compute(
      in.shape(), [&](te::Var i) { return te::cast(to, in(i)); }, "out");
  te::Schedule s = te::create_schedule({out});
  if (vector) {
    auto [o, v] = s[out].split(s[out].axis(0), 16);
    s[out].vectorize(v);
  }
  return codegen::Kernel::load(
      codegen::build(te::lower(s, {in, out}, "convert"), codegen::Target::host()));
}

// float32 -> bfloat16 -> float32 compiled for the host matches te's interpreter bit for bit, on
// ties, NaN and infinities too.
TEST(Bfloat16Test, CodegenConvertsAsTheInterpreter) {
  const int64_t n = 64;
  const te::Tensor x = te::placeholder({n}, te::Float(32), "X");
  const te::Tensor y = te::placeholder({n}, te::BFloat16(), "Y");
  te::HostBuffer in({n}, te::Float(32));
  in.fill_random(3, -3, 3);
  const float specials[] = {1.0f + std::ldexp(1.0f, -8),
                            1.0f + 3 * std::ldexp(1.0f, -8),
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max(),
                            -0.0f};
  for (size_t i = 0; i < std::size(specials); ++i) in.as<float>()[i] = specials[i];
  const te::Tensor to_bf16 = te::compute(
      {n}, [&](te::Var i) { return te::cast(te::BFloat16(), x(i)); }, "Y");
  te::HostBuffer want_y = std::move(te::evaluate({to_bf16}, {{x, &in}})[0]);
  const te::Tensor to_f32 = te::compute(
      {n}, [&](te::Var i) { return te::cast(te::Float(32), y(i)); }, "Z");
  const te::HostBuffer want_z = std::move(te::evaluate({to_f32}, {{y, &want_y}})[0]);
  for (bool vector : {false, true}) {
    te::HostBuffer got_y({n}, te::BFloat16()), got_z({n}, te::Float(32));
    std::memset(got_y.data(), 0xFF, got_y.bytes());
    std::memset(got_z.data(), 0xFF, got_z.bytes());
    ASSERT_EQ(conversion_kernel(x, te::BFloat16(), vector).run({in.data(), got_y.data()}), 0);
    ASSERT_EQ(conversion_kernel(y, te::Float(32), vector).run({want_y.data(), got_z.data()}), 0);
    EXPECT_EQ(std::memcmp(got_y.data(), want_y.data(), got_y.bytes()), 0) << "vector " << vector;
    EXPECT_EQ(std::memcmp(got_z.data(), want_z.data(), got_z.bytes()), 0) << "vector " << vector;
    // Widening is exact: the float32 values are the bfloat16 bits shifted up.
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &got_z.as<float>()[i], 4);
      EXPECT_EQ(bits, uint32_t{want_y.as<uint16_t>()[i]} << 16) << "element " << i;
    }
  }
  EXPECT_EQ(want_y.as<uint16_t>()[0], 0x3F80);
  EXPECT_EQ(want_y.as<uint16_t>()[1], 0x3F82);
}

TEST(Bfloat16Test, ArithmeticOnBfloat16IsRefused) {
  const te::Tensor a = te::placeholder({4}, te::BFloat16(), "A");
  try {
    te::compute(
        {4}, [&](te::Var i) { return a(i) + a(i); }, "B");
    FAIL() << "bfloat16 addition accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cast the operands to float32"), std::string::npos);
  }
}

// The reference's inputs (uniform in [-1, 1), rounded to bfloat16 by the buffers) and its output.
Reference bf16_reference(const Task& task) { return testing::reference_of(task, 11); }

// The bound on |kernel - reference| for element (i, j): both sum the same exact products in
// float32, in different orders, so each is within gamma_K * sum_k |a_k b_k| of the exact sum
// (gamma_K = K u / (1 - K u), u = 2^-24); the bias adds one rounding to each.
double tolerance(const Reference& ref, const Shape& s, int64_t i, int64_t j) {
  const te::HostBuffer& a = ref.inputs[0];
  const te::HostBuffer& b = ref.inputs[1];
  const int64_t kb = (s.K + 1) / 2;
  double abs_sum = 0;
  for (int64_t k = 0; k < s.K; ++k)
    abs_sum +=
        std::fabs(a.get(i * s.K + k) * b.get((((j / 16) * kb + k / 2) * 16 + j % 16) * 2 + k % 2));
  if (ref.inputs.size() > 2) abs_sum += std::fabs(ref.inputs[2].get(j));
  const double u = std::ldexp(1.0, -24), gamma = (s.K + 1) * u / (1 - (s.K + 1) * u);
  return 2 * gamma * abs_sum + 1e-30;
}

// Runs config `cfg` of `task` built for `target` on this host (one and two threads) and compares
// every element within its bound.
void check(const Task& task, const Shape& s, const Reference& ref, const Config& cfg,
           const codegen::Target& target, const std::string& what) {
  const Instantiated inst = task.instantiate(cfg);
  codegen::Kernel k =
      codegen::Kernel::load(codegen::build(te::lower(inst.schedule, inst.args, "k"), target));
  for (int threads : {1, 2}) {
    codegen::set_num_threads(threads);
    std::vector<te::HostBuffer> bufs = testing::fresh_buffers(ref);
    std::vector<void*> ptrs;
    for (auto& b : bufs) ptrs.push_back(b.data());
    ASSERT_EQ(k.run(ptrs), 0);
    const te::HostBuffer& got = bufs.back();
    const te::HostBuffer& want = ref.outputs[0];
    for (int64_t e = 0; e < want.num_elements(); ++e) {
      const double g = got.get(e), r = want.get(e);
      ASSERT_LE(std::fabs(g - r), tolerance(ref, s, e / s.N, e % s.N))
          << what << " " << cfg.to_json_string() << " element " << e << ": got " << g
          << ", expected " << r;
    }
  }
}

void check_target(const codegen::Target& target, const TargetTraits& traits,
                  const std::string& epilogue = "none") {
  std::mt19937_64 rng(5);
  for (const Shape& s : kShapes) {
    const Task task = Task::create("matmul_bf16",
                                   {{"M", std::to_string(s.M)},
                                    {"N", std::to_string(s.N)},
                                    {"K", std::to_string(s.K)},
                                    {"epilogue", epilogue}},
                                   traits);
    const Reference ref = bf16_reference(task);
    const std::string what = target.str() + " " + task.workload_key();
    check(task, s, ref, task.fallback_config(), target, what);
    for (uint64_t i : task.space().sample(3, rng))
      check(task, s, ref, task.space().get(i), target, what);
  }
}

bool host_has_bf16() { return testing::traits_of(codegen::Target::host()).bf16_dot; }

TEST(MatmulBf16Test, TensorizedOnTheHostMatchesTheReference) {
  if (!host_has_bf16()) GTEST_SKIP() << "the host has no AVX-512 BF16";
  const codegen::Target host = codegen::Target::host();
  check_target(host, testing::traits_of(host));
}

TEST(MatmulBf16Test, BiasAndReluEpilogues) {
  const codegen::Target host = codegen::Target::host();
  for (const char* e : {"bias", "bias_relu"}) check_target(host, testing::traits_of(host), e);
}

TEST(MatmulBf16Test, VectorCodeOnX86V3MatchesTheReference) {
  const codegen::Target v3 =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3");
  ASSERT_FALSE(testing::traits_of(v3).bf16_dot);
  check_target(v3, testing::traits_of(v3));
}

// Tensorized for a target without AVX-512 BF16: codegen's float32 form of the intrinsic.
TEST(MatmulBf16Test, IntrinsicFallbackOnX86V3MatchesTheReference) {
  const codegen::Target v3 =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3");
  TargetTraits traits = testing::traits_of(v3);
  traits.bf16_dot = true;
  check_target(v3, traits);
}

TEST(MatmulBf16Test, ObjectHoldsVdpbf16psOnlyWithAvx512Bf16) {
  const auto asm_of = [](const codegen::Target& target) {
    const Task task = Task::create("matmul_bf16", {{"M", "16"}, {"N", "64"}, {"K", "64"}},
                                   testing::traits_of(target));
    const Instantiated inst = task.instantiate(task.fallback_config());
    return codegen::emit_assembly(te::lower(inst.schedule, inst.args, "k"), target);
  };
  const std::string zen4 =
      asm_of(codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"));
  EXPECT_NE(zen4.find("vdpbf16ps"), std::string::npos);
  const std::string v3 =
      asm_of(codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"));
  EXPECT_EQ(v3.find("vdpbf16ps"), std::string::npos);
  EXPECT_NE(v3.find("vfmadd"), std::string::npos) << v3.substr(0, 4000);
}

TEST(MatmulBf16Test, TraitsFollowTheTargetString) {
  const auto bf16 = [](const std::string& key, const std::string& triple) {
    return make_target_traits(key, triple, 512, 1).bf16_dot;
  };
  const std::string x86 = "x86_64-linux-gnu";
  EXPECT_TRUE(bf16("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", x86));
  EXPECT_TRUE(bf16("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids", x86));
  EXPECT_TRUE(bf16("llvm -mtriple=x86_64-linux-gnu -mcpu=cooperlake", x86));
  EXPECT_FALSE(bf16("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server", x86));
  EXPECT_FALSE(bf16("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mattr=-avx512bf16", x86));
  EXPECT_FALSE(bf16("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mattr=-avx512f", x86));
  EXPECT_TRUE(bf16("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -mattr=+avx512bf16", x86));
  EXPECT_FALSE(bf16("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "aarch64-linux-gnu"));
  // The VNNI knowledge is unchanged by the shared parsing.
  EXPECT_TRUE(make_target_traits("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server", x86, 512, 1)
                  .int8_dot);
}

}  // namespace
}  // namespace ktune::schedule_space
