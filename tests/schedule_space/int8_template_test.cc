// Tests matmul_u8s8s32: odd and even shapes (K a multiple of 4 and padded), its fallback and
// sampled configs, tensorized with vpdpbusd on an AVX-512 VNNI host and in widening vector code on
// x86-64-v3, against the compute's integer reference bit-exactly (outputs start as a sentinel).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "schedule_space/task.h"
#include "tests/schedule_space/reference_util.h"

namespace ktune::schedule_space {
namespace {

using testing::Reference;

struct Shape {
  int64_t M, N, K;
};

const Shape kShapes[] = {{8, 64, 64}, {5, 50, 10}, {1, 17, 3}, {33, 48, 20}, {16, 32, 7}};

// Inputs over the whole byte range, the reference from te's interpreter.
Reference int8_reference(const Task& task) {
  const ComputeDef def = task.template_def().compute(task.args());
  Reference ref;
  ref.inputs.emplace_back(def.args[0].shape(), def.args[0].dtype());
  ref.inputs.back().fill_random(7, 0, 255);
  ref.inputs.emplace_back(def.args[1].shape(), def.args[1].dtype());
  ref.inputs.back().fill_random(8, -128, 127);
  ref.outputs =
      te::evaluate(def.outputs, {{def.args[0], &ref.inputs[0]}, {def.args[1], &ref.inputs[1]}});
  return ref;
}

// Runs config `cfg` of `task` built for `target` on this host and compares bit-exactly.
void check(const Task& task, const Reference& ref, const Config& cfg, const codegen::Target& target,
           const std::string& what) {
  const Instantiated inst = task.instantiate(cfg);
  const te::LoweredFunc f = te::lower(inst.schedule, inst.args, "k");
  codegen::Kernel k = codegen::Kernel::load(codegen::build(f, target));
  std::vector<te::HostBuffer> bufs;
  for (const auto& in : ref.inputs) {
    bufs.emplace_back(in.shape(), in.dtype());
    std::memcpy(bufs.back().data(), in.data(), in.bytes());
  }
  bufs.emplace_back(ref.outputs[0].shape(), ref.outputs[0].dtype());
  std::memset(bufs.back().data(), 0x5A, bufs.back().bytes());
  std::vector<void*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.data());
  for (int threads : {1, 2}) {
    codegen::set_num_threads(threads);
    std::memset(bufs.back().data(), 0x5A, bufs.back().bytes());
    ASSERT_EQ(k.run(ptrs), 0);
    const int32_t* got = bufs.back().as<int32_t>();
    const int32_t* want = ref.outputs[0].as<int32_t>();
    for (int64_t i = 0; i < ref.outputs[0].num_elements(); ++i)
      ASSERT_EQ(got[i], want[i]) << what << " " << cfg.to_json_string() << " element " << i;
  }
}

void check_target(const codegen::Target& target, bool expect_vnni) {
  const TargetTraits traits = testing::traits_of(target);
  ASSERT_EQ(traits.int8_dot, expect_vnni) << target.str();
  std::mt19937_64 rng(5);
  for (const Shape& s : kShapes) {
    const Task task = Task::create(
        "matmul_u8s8s32",
        {{"M", std::to_string(s.M)}, {"N", std::to_string(s.N)}, {"K", std::to_string(s.K)}},
        traits);
    const Reference ref = int8_reference(task);
    const std::string what = target.str() + " " + task.workload_key();
    check(task, ref, task.fallback_config(), target, what);
    for (uint64_t i : task.space().sample(4, rng))
      check(task, ref, task.space().get(i), target, what);
  }
}

bool host_has_vnni() { return testing::traits_of(codegen::Target::host()).int8_dot; }

TEST(MatmulInt8Test, TensorizedOnTheHostIsExact) {
  if (!host_has_vnni()) GTEST_SKIP() << "the host has no AVX-512 VNNI";
  check_target(codegen::Target::host(), true);
}

TEST(MatmulInt8Test, WideningFallbackOnX86V3IsExact) {
  check_target(codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"), false);
}

TEST(MatmulInt8Test, ObjectHoldsVpdpbusdOnlyWithVnni) {
  const auto asm_of = [](const codegen::Target& target) {
    const Task task = Task::create("matmul_u8s8s32", {{"M", "16"}, {"N", "64"}, {"K", "64"}},
                                   testing::traits_of(target));
    const Instantiated inst = task.instantiate(task.fallback_config());
    return codegen::emit_assembly(te::lower(inst.schedule, inst.args, "k"), target);
  };
  const std::string vnni =
      asm_of(codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"));
  EXPECT_NE(vnni.find("vpdpbusd"), std::string::npos);
  const std::string v3 =
      asm_of(codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"));
  EXPECT_EQ(v3.find("vpdpbusd"), std::string::npos);
  // Widened multiply-adds: int32 products, or int16 ones summed in pairs (both exact here).
  EXPECT_TRUE(v3.find("vpmulld") != std::string::npos || v3.find("vpmaddwd") != std::string::npos)
      << v3.substr(0, 4000);
}

// The tile's epilogue reads each 16-lane accumulator block as one vector: with several blocks
// per tile, a vector over all their columns indexed the accumulator through j/16 and j%16, and
// LLVM gathered it (measured ~10% of the BERT products' time).
TEST(MatmulInt8Test, EpilogueReadsTheAccumulatorWithoutGathers) {
  const codegen::Target target =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  const Task task = Task::create("matmul_u8s8s32", {{"M", "32"}, {"N", "128"}, {"K", "64"}},
                                 testing::traits_of(target));
  Config cfg = task.fallback_config();
  ASSERT_GT(cfg["tile_nb"].values.back(), 1) << cfg.to_json_string();
  const Instantiated inst = task.instantiate(cfg);
  const std::string s = codegen::emit_assembly(te::lower(inst.schedule, inst.args, "k"), target);
  EXPECT_NE(s.find("vpdpbusd"), std::string::npos);
  EXPECT_EQ(s.find("gather"), std::string::npos) << s.substr(0, 6000);
}

TEST(MatmulInt8Test, TraitsFollowTheTargetString) {
  EXPECT_TRUE(
      make_target_traits("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", "x86_64-linux-gnu", 512, 1)
          .int8_dot);
  EXPECT_FALSE(make_target_traits("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mattr=-avx512vnni",
                                  "x86_64-linux-gnu", 512, 1)
                   .int8_dot);
  EXPECT_TRUE(make_target_traits("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 "
                                 "-mattr=+avx512vnni",
                                 "x86_64-linux-gnu", 512, 1)
                  .int8_dot);
  EXPECT_FALSE(make_target_traits("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
                                  "aarch64-linux-gnu", 128, 1)
                   .int8_dot);
}

}  // namespace
}  // namespace ktune::schedule_space
