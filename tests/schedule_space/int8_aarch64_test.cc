// Tests matmul_u8s8s32 on AArch64: the traits name the dot instruction of each CPU and -mattr;
// the objects hold sdot (Cortex-A76, Neoverse N1: dotprod), usdot (Neoverse V1: i8mm) or neither
// (Cortex-A72); and every kernel (odd shapes, K a multiple of 4 and padded, with and without the
// requantize epilogue, fallback and sampled configs) equals te's integer reference bit-exactly
// under qemu-aarch64-static, its output pre-filled with a byte pattern. conv2d_nchwc_u8s8s32
// likewise: sdot on Cortex-A76, usdot on Neoverse V1, odd shapes, pads, strides, zero points.
// depthwise_conv2d_nchwc_u8s8s32's dot_taps configs (an AVX-512 VNNI space's) on Cortex-A76.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "schedule_space/task.h"
#include "tests/schedule_space/reference_util.h"
#include "tests/schedule_space/template_cases.h"

namespace ktune::schedule_space {
namespace {

const char* const kA76 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76";
const char* const kN1 = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1";
const char* const kA72 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
const char* const kV1 = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1";

TargetTraits traits(const char* target) {
  return testing::traits_of(codegen::Target::parse(target));
}

TEST(MatmulInt8Aarch64, TraitsNameTheDotInstruction) {
  EXPECT_EQ(traits(kA76).int8_dot_insn, "sdot");
  EXPECT_TRUE(traits(kA76).int8_dot);
  EXPECT_EQ(traits(kN1).int8_dot_insn, "sdot");
  EXPECT_EQ(traits(kV1).int8_dot_insn, "usdot");
  EXPECT_EQ(traits(kA72).int8_dot_insn, "");
  EXPECT_FALSE(traits(kA72).int8_dot);
  EXPECT_EQ(
      traits("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+dotprod").int8_dot_insn,
      "sdot");
  EXPECT_EQ(
      traits("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -mattr=-dotprod").int8_dot_insn, "");
  EXPECT_EQ(traits("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1 -mattr=-i8mm").int8_dot_insn,
            "sdot");
  EXPECT_EQ(traits("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4").int8_dot_insn, "vpdpbusd");
  EXPECT_EQ(traits("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3").int8_dot_insn, "");
}

struct Workload {
  int64_t M, N, K;
  std::string out;  // s32 (no epilogue), u8, s8
  bool per_channel = false, relu = false;
};

// M and N off the register tile and the 16-column block, K a multiple of 4 and padded ones.
const Workload kWorkloads[] = {{8, 64, 64, "s32"},
                               {5, 50, 12, "s32"},
                               {1, 17, 3, "s32"},
                               {33, 48, 20, "s32"},
                               {7, 33, 7, "u8", true, true},
                               {6, 40, 16, "s8"},
                               {3, 20, 9, "u8", false, false}};

Task task_of(const Workload& w, const char* target) {
  std::map<std::string, std::string> args = {{"M", std::to_string(w.M)},
                                             {"N", std::to_string(w.N)},
                                             {"K", std::to_string(w.K)},
                                             {"out", w.out}};
  if (w.out != "s32") {
    args["scale"] = w.per_channel ? "per_channel" : "per_tensor";
    args["relu"] = w.relu ? "1" : "0";
  }
  return Task::create("matmul_u8s8s32", args, traits(target));
}

// Inputs over the whole byte range (and a realistic epilogue), outputs from te's interpreter.
std::shared_ptr<const testing::Reference> reference(const Task& task, uint64_t seed) {
  const ComputeDef def = task.template_def().compute(task.args());
  auto ref = std::make_shared<testing::Reference>();
  const size_t n_in = def.args.size() - def.outputs.size();
  const double lo[] = {0, -128, -20000, 0.0005, 0}, hi[] = {255, 127, 20000, 0.004, 10};
  std::vector<std::pair<te::Tensor, const te::HostBuffer*>> in;
  ref->inputs.reserve(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    ref->inputs.emplace_back(def.args[i].shape(), def.args[i].dtype());
    ref->inputs.back().fill_random(seed + i, lo[i], hi[i]);
  }
  for (size_t i = 0; i < n_in; ++i) in.emplace_back(def.args[i], &ref->inputs[i]);
  ref->outputs = te::evaluate(def.outputs, in);
  ref->output_tensors = def.outputs;
  return ref;
}

const std::regex kSdot(R"(\bsdot\s+v\d+\.4s)");
const std::regex kUsdot(R"(\busdot\s+v\d+\.4s)");
// A 128-bit register stored to or loaded from the stack: a spilled vector.
const std::regex kVectorSpill(R"(\b(str|ldr|stp|ldp|stur|ldur)\s+q\d+,( q\d+,)? \[sp)");

int count(const std::string& text, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// The fallback's assembly holds the target's dot instruction (and no other).
void check_assembly(const char* target, int want_sdot, int want_usdot) {
  const codegen::Target t = codegen::Target::parse(target);
  for (const Workload& w : kWorkloads) {
    const Task task = task_of(w, target);
    const Instantiated inst = task.instantiate(task.fallback_config());
    const std::string text = codegen::emit_assembly(te::lower(inst.schedule, inst.args, "k"), t);
    const std::string what = std::string(target) + " " + task.workload_key();
    EXPECT_EQ(count(text, kSdot) > 0, want_sdot > 0) << what;
    EXPECT_EQ(count(text, kUsdot) > 0, want_usdot > 0) << what;
  }
}

TEST(MatmulInt8Aarch64, ObjectsHoldTheTargetsDotInstruction) {
  check_assembly(kA76, 1, 0);
  check_assembly(kN1, 1, 0);
  check_assembly(kV1, 0, 1);
  check_assembly(kA72, 0, 0);
  // The fallback's tile, 4 rows x 16 columns, takes 4 sdot per row and 4 for the compensation of
  // B, which the rows share: 20 in its k loop (not 32), with no vector spilled to the stack.
  const Task task = task_of({8, 64, 64, "s32"}, kA76);
  const Config fb = task.fallback_config();
  ASSERT_EQ(fb["tile_m"].values.back(), 4);
  ASSERT_EQ(fb["tile_nb"].values.back(), 1);
  ASSERT_EQ(fb["unroll_k"].as_int(), 0);
  const Instantiated inst = task.instantiate(fb);
  const std::string text = codegen::emit_assembly(te::lower(inst.schedule, inst.args, "k"),
                                                  codegen::Target::parse(kA76));
  EXPECT_EQ(count(text, kSdot), 20) << text;
  EXPECT_EQ(count(text, kVectorSpill), 0) << text;
}

// Builds the fallback and sampled configs of every task (for `target`; each through `adjust` when
// given), runs them under qemu and compares each output with the reference byte for byte.
void check_under_qemu(const char* target, const std::vector<Task>& tasks, uint64_t seed,
                      const std::function<Config(const Task&, const Config&)>& adjust = {}) {
  const codegen::Target t = codegen::Target::parse(target);
  std::mt19937_64 rng(seed);
  std::vector<testing::Case> cases;
  std::vector<codegen::Artifact> artifacts;
  for (const Task& each : tasks) {
    auto task = std::make_shared<const Task>(each);
    const auto ref = reference(*task, seed++);
    std::vector<Config> configs = {task->fallback_config()};
    for (uint64_t i : task->space().sample(2, rng)) configs.push_back(task->space().get(i));
    for (const Config& c : configs) {
      cases.push_back({task, ref, adjust ? adjust(*task, c) : c});
      artifacts.push_back(
          testing::build_case(cases.back(), t, "int8_" + std::to_string(cases.size())));
    }
  }
  if (!codegen::testing::cross_tools_available())
    GTEST_SKIP() << "no aarch64-linux-gnu-g++ or qemu-aarch64-static: not run";
  std::vector<codegen::testing::Aarch64Case> batch;
  for (size_t i = 0; i < cases.size(); ++i) {
    codegen::testing::Aarch64Case ac{artifacts[i], {}};
    for (const auto& b : testing::fresh_buffers(*cases[i].ref)) {
      const auto* p = static_cast<const uint8_t*>(b.data());
      ac.buffers.emplace_back(p, p + b.bytes());
    }
    batch.push_back(std::move(ac));
  }
  const auto results = codegen::testing::run_batch_on_aarch64(batch);
  for (size_t i = 0; i < cases.size(); ++i) {
    const testing::Reference& ref = *cases[i].ref;
    const te::HostBuffer& want = ref.outputs[0];
    const std::vector<uint8_t>& got = results[i][ref.inputs.size()];
    ASSERT_EQ(got.size(), want.bytes());
    const size_t elem = want.bytes() / static_cast<size_t>(want.num_elements());
    for (size_t b = 0; b < got.size(); ++b) {
      ASSERT_EQ(got[b], static_cast<const uint8_t*>(want.data())[b])
          << target << " " << cases[i].task->workload_key() << " config "
          << cases[i].config.to_json_string() << " element " << b / elem;
    }
  }
  std::printf("%s: %zu kernels equal the reference under qemu\n", target, cases.size());
}

std::vector<Task> matmul_tasks(const char* target) {
  std::vector<Task> tasks;
  for (const Workload& w : kWorkloads) tasks.push_back(task_of(w, target));
  return tasks;
}

TEST(MatmulInt8Aarch64, SdotKernelsMatchReferenceUnderQemu) {
  check_under_qemu(kA76, matmul_tasks(kA76), 100);
}

TEST(MatmulInt8Aarch64, UsdotKernelsMatchReferenceUnderQemu) {
  check_under_qemu(kV1, matmul_tasks(kV1), 200);
}

TEST(MatmulInt8Aarch64, WideningKernelsWithoutDotprodMatchReferenceUnderQemu) {
  check_under_qemu(kA72, matmul_tasks(kA72), 300);
}

// conv2d_nchwc_u8s8s32 on odd shapes (H, W odd, pad 0-2, stride 1-2, K not a multiple of 16, a
// data zero point as padding, requantized or not).
std::vector<Task> conv_tasks(const char* target) {
  const std::vector<std::map<std::string, std::string>> workloads = {
      {{"C", "8"}, {"H", "9"}, {"W", "7"}, {"K", "16"}, {"pad", "1"}},
      {{"C", "4"},
       {"H", "7"},
       {"W", "9"},
       {"K", "20"},
       {"stride", "2"},
       {"pad", "2"},
       {"data_zero_point", "3"}},
      {{"C", "24"},
       {"H", "11"},
       {"W", "9"},
       {"K", "16"},
       {"stride", "2"},
       {"pad", "1"},
       {"data_zero_point", "128"}},
      {{"C", "16"}, {"H", "6"}, {"W", "5"}, {"K", "48"}},
      {{"C", "8"},
       {"H", "7"},
       {"W", "5"},
       {"K", "24"},
       {"pad", "1"},
       {"data_zero_point", "9"},
       {"out", "u8"},
       {"scale", "per_channel"},
       {"relu", "1"}},
      {{"C", "12"},
       {"H", "5"},
       {"W", "9"},
       {"K", "16"},
       {"stride", "2"},
       {"pad", "2"},
       {"out", "s8"}}};
  std::vector<Task> tasks;
  for (const auto& w : workloads)
    tasks.push_back(Task::create("conv2d_nchwc_u8s8s32", w, traits(target)));
  return tasks;
}

TEST(Conv2dNchwcInt8Aarch64, ObjectsHoldTheTargetsDotInstruction) {
  for (const char* target : {kA76, kV1, kA72}) {
    const std::string text = testing::fallback_assembly(
        "conv2d_nchwc_u8s8s32", {{"C", "64"}, {"H", "14"}, {"W", "14"}, {"K", "64"}, {"pad", "1"}},
        target);
    EXPECT_EQ(count(text, kSdot) > 0, target == kA76) << target;
    EXPECT_EQ(count(text, kUsdot) > 0, target == kV1) << target;
  }
}

TEST(Conv2dNchwcInt8Aarch64, SdotKernelsMatchReferenceUnderQemu) {
  check_under_qemu(kA76, conv_tasks(kA76), 400);
}

TEST(Conv2dNchwcInt8Aarch64, UsdotKernelsMatchReferenceUnderQemu) {
  check_under_qemu(kV1, conv_tasks(kV1), 500);
}

// depthwise_conv2d_nchwc_u8s8s32 with dot_taps 1, its space taken on an AVX-512 VNNI target (the
// only one that offers it: a config tuned there, built here), windows 2 to 4 wide, pads, strides,
// zero points: dot_u8s8's rows form, which becomes widening NEON code even where sdot exists.
std::vector<Task> depthwise_dot_tasks() {
  const std::vector<std::map<std::string, std::string>> workloads = {
      {{"C", "20"}, {"H", "9"}, {"W", "7"}, {"pad", "1"}},
      {{"C", "16"},
       {"H", "7"},
       {"W", "6"},
       {"R", "2"},
       {"S", "2"},
       {"stride", "2"},
       {"pad", "1"},
       {"data_zero_point", "3"}},
      {{"C", "24"},
       {"H", "9"},
       {"W", "8"},
       {"R", "4"},
       {"S", "4"},
       {"pad", "1"},
       {"data_zero_point", "5"},
       {"out", "u8"},
       {"scale", "per_channel"}}};
  std::vector<Task> tasks;
  for (const auto& w : workloads)
    tasks.push_back(Task::create("depthwise_conv2d_nchwc_u8s8s32", w,
                                 traits("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4")));
  return tasks;
}

TEST(DepthwiseNchwcInt8Aarch64, DotTapsKernelsMatchReferenceUnderQemu) {
  // dot_taps 1 takes unroll_s 0.
  check_under_qemu(kA76, depthwise_dot_tasks(), 600, [](const Task& task, const Config& cfg) {
    return testing::with_knobs(task, cfg, {{"dot_taps", 1}, {"unroll_s", 0}});
  });
}

}  // namespace
}  // namespace ktune::schedule_space
