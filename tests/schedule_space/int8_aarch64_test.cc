// Tests matmul_u8s8s32 on AArch64: the traits name the dot instruction of each CPU and -mattr;
// the objects hold sdot (Cortex-A76, Neoverse N1: dotprod), usdot (Neoverse V1: i8mm) or neither
// (Cortex-A72); and every kernel (odd shapes, K a multiple of 4 and padded, with and without the
// requantize epilogue, fallback and sampled configs) equals te's integer reference bit-exactly
// under qemu-aarch64-static, its output pre-filled with a byte pattern. conv2d_nchwc_u8s8s32
// likewise: sdot on Cortex-A76, usdot on Neoverse V1, odd shapes, pads, strides, zero points.
// With shift_data (the products read the data less 128) both take sdot without the compensation
// sdot on Cortex-A76 and Neoverse N1. depthwise_conv2d_nchwc_u8s8s32's dot_taps (a window row's
// taps per dot): offered with shift_data on dotprod (sdot, no compensation), its configs in
// sdot, bit-exact on Cortex-A76 and Neoverse N1, and bit-exact without sdot on Cortex-A53 and
// Cortex-A72; an AVX-512 VNNI space's dot_taps configs (unshifted) bit-exact on Cortex-A76. Its
// int16 weights (weights=s16, over [-255, 255]): widening code of as many mla as int8 weights
// take, bit-exact on Cortex-A76 and Cortex-A72.
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
#include "te/ir_printer.h"
#include "tests/schedule_space/reference_util.h"
#include "tests/schedule_space/template_cases.h"

namespace ktune::schedule_space {
namespace {

const char* const kA76 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76";
const char* const kN1 = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1";
const char* const kA72 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
const char* const kV1 = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1";
const char* const kA53 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53";

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
  bool shift = false;  // shift_data
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
  if (w.shift) args["shift_data"] = "1";
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
    // int16 weights (depthwise weights=s16) hold uint8 weights less their zero point.
    const bool s16 = def.args[i].dtype() == te::Int(16);
    ref->inputs.back().fill_random(seed + i, s16 ? -255 : lo[i], s16 ? 255 : hi[i]);
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
void check_assembly(const char* target, int want_sdot, int want_usdot, bool shift = false) {
  const codegen::Target t = codegen::Target::parse(target);
  for (Workload w : kWorkloads) {
    w.shift = shift;
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

// With shift_data the sdot kernels have no compensation: the fallback's 4 x 16 tile takes 16
// sdot in its k loop, one per row and NEON register of the block.
TEST(MatmulInt8Aarch64, ShiftedDataTakesSdotWithoutCompensation) {
  check_assembly(kA76, 1, 0, true);
  check_assembly(kN1, 1, 0, true);
  check_assembly(kV1, 1, 0, true);  // i8mm has dotprod's sdot too
  check_assembly(kA72, 0, 0, true);
  const Task task = task_of({8, 64, 64, "s32", false, false, true}, kA76);
  const Config fb = task.fallback_config();
  ASSERT_EQ(fb["tile_m"].values.back(), 4);
  ASSERT_EQ(fb["tile_nb"].values.back(), 1);
  ASSERT_EQ(fb["unroll_k"].as_int(), 0);
  const Instantiated inst = task.instantiate(fb);
  const std::string text = codegen::emit_assembly(te::lower(inst.schedule, inst.args, "k"),
                                                  codegen::Target::parse(kA76));
  EXPECT_EQ(count(text, kSdot), 16) << text;
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

std::vector<Task> matmul_tasks(const char* target, bool shift = false) {
  std::vector<Task> tasks;
  for (Workload w : kWorkloads) {
    w.shift = shift;
    tasks.push_back(task_of(w, target));
  }
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

TEST(MatmulInt8Aarch64, ShiftedSdotKernelsMatchReferenceUnderQemu) {
  check_under_qemu(kA76, matmul_tasks(kA76, true), 700);
  check_under_qemu(kN1, matmul_tasks(kN1, true), 710);
  check_under_qemu(kA72, matmul_tasks(kA72, true), 720);
}

// conv2d_nchwc_u8s8s32 on odd shapes (H, W odd, pad 0-2, stride 1-2, K not a multiple of 16, a
// data zero point as padding, requantized or not).
std::vector<Task> conv_tasks(const char* target, bool shift = false) {
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
  for (auto w : workloads) {
    if (shift) w["shift_data"] = "1";
    tasks.push_back(Task::create("conv2d_nchwc_u8s8s32", w, traits(target)));
  }
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

// shift_data: sdot without compensation (fewer sdot than the unshifted kernel's), bit-exact.
TEST(Conv2dNchwcInt8Aarch64, ShiftedSdotKernelsMatchReferenceUnderQemu) {
  const std::map<std::string, std::string> args = {
      {"C", "64"}, {"H", "14"}, {"W", "14"}, {"K", "64"}, {"pad", "1"}};
  std::map<std::string, std::string> shifted = args;
  shifted["shift_data"] = "1";
  for (const char* target : {kA76, kN1}) {
    const int plain =
        count(testing::fallback_assembly("conv2d_nchwc_u8s8s32", args, target), kSdot);
    const int shifted_sdot =
        count(testing::fallback_assembly("conv2d_nchwc_u8s8s32", shifted, target), kSdot);
    EXPECT_GT(shifted_sdot, 0) << target;
    EXPECT_LT(shifted_sdot, plain) << target;
  }
  check_under_qemu(kA76, conv_tasks(kA76, true), 800);
  check_under_qemu(kN1, conv_tasks(kN1, true), 810);
}

// depthwise_conv2d_nchwc_u8s8s32 workloads for a window row per dot: windows 2 to 4 wide, odd
// shapes, pads, stride 2, data zero points, C not a multiple of the 16-channel block, the
// accumulator or a requantized output; with shift_data when `shift`.
std::vector<std::map<std::string, std::string>> depthwise_dot_workloads(bool shift) {
  std::vector<std::map<std::string, std::string>> workloads = {
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
       {"scale", "per_channel"}},
      {{"C", "40"},
       {"H", "11"},
       {"W", "9"},
       {"stride", "2"},
       {"pad", "1"},
       {"data_zero_point", "200"},
       {"out", "s8"},
       {"relu", "1"}},
      {{"C", "12"}, {"H", "5"}, {"W", "7"}, {"R", "3"}, {"S", "3"}}};
  if (shift)
    for (auto& w : workloads) w["shift_data"] = "1";
  return workloads;
}

std::vector<Task> depthwise_tasks(const char* space_target, bool shift) {
  std::vector<Task> tasks;
  for (const auto& w : depthwise_dot_workloads(shift))
    tasks.push_back(Task::create("depthwise_conv2d_nchwc_u8s8s32", w, traits(space_target)));
  return tasks;
}

// cfg with dot_taps 1, which takes unroll_s 0.
Config with_dot_taps(const Task& task, const Config& cfg) {
  return testing::with_knobs(task, cfg, {{"dot_taps", 1}, {"unroll_s", 0}});
}

// dot_taps is offered where an instruction multiplies the data as the products read it:
// vpdpbusd and usdot the uint8 data, sdot the shifted data; never for a window of 5.
TEST(DepthwiseNchwcInt8Aarch64, DotTapsOfferedWhereTheInstructionMultipliesTheData) {
  const auto offers = [](const char* target, bool shift, const char* s = "3") {
    std::map<std::string, std::string> w = {{"C", "32"}, {"H", "9"}, {"W", "9"}, {"S", s}};
    if (shift) w["shift_data"] = "1";
    const Task task = Task::create("depthwise_conv2d_nchwc_u8s8s32", w, traits(target));
    const int64_t at = task.space().knob_position("dot_taps");
    return at >= 0 && task.space().knob_sizes()[at] == 2;
  };
  const char* const kZen4 = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
  EXPECT_TRUE(offers(kA76, true));
  EXPECT_TRUE(offers(kN1, true));
  EXPECT_FALSE(offers(kA76, false));
  EXPECT_TRUE(offers(kV1, false));
  EXPECT_TRUE(offers(kV1, true));
  EXPECT_FALSE(offers(kA72, true));
  EXPECT_FALSE(offers(kA53, true));
  EXPECT_TRUE(offers(kZen4, false));
  EXPECT_FALSE(offers(kZen4, true));
  EXPECT_FALSE(offers(kA76, true, "5"));
}

// The dot_s8s8 calls of a lowered kernel (each four sdot where the target has dotprod).
int dot_calls(const std::string& ir) { return count(ir, std::regex(R"(\bdot_s8s8\()")); }

// Shifted dot_taps kernels on dotprod: 4 sdot per dot call of the lowered kernel (no sdot for a
// compensation), none on Cortex-A53 and Cortex-A72; the unshifted rows form on Cortex-A76 takes
// compensation sdots besides.
TEST(DepthwiseNchwcInt8Aarch64, ShiftedDotTapsTakeSdotWithoutCompensation) {
  for (const char* target : {kA76, kN1, kA53, kA72}) {
    const codegen::Target t = codegen::Target::parse(target);
    for (const Task& task : depthwise_tasks(kA76, true)) {
      const Config cfg = with_dot_taps(task, task.fallback_config());
      const Instantiated inst = task.instantiate(cfg);
      const te::LoweredFunc f = te::lower(inst.schedule, inst.args, "k");
      const int dots = dot_calls(te::to_string(f));
      const std::string text = codegen::emit_assembly(f, t);
      const std::string what = std::string(target) + " " + task.workload_key();
      ASSERT_GT(dots, 0) << what;
      const bool dotprod = target == kA76 || target == kN1;
      EXPECT_EQ(count(text, kSdot), dotprod ? 4 * dots : 0) << what;
    }
  }
  const Task plain = depthwise_tasks(kV1, false).front();
  const Instantiated inst = plain.instantiate(with_dot_taps(plain, plain.fallback_config()));
  const te::LoweredFunc f = te::lower(inst.schedule, inst.args, "k");
  const int dots = count(te::to_string(f), std::regex(R"(\bdot_u8s8\()"));
  ASSERT_GT(dots, 0);
  // The compensations depend on the weights alone: LLVM shares them between the tile's pixels.
  EXPECT_GT(count(codegen::emit_assembly(f, codegen::Target::parse(kA76)), kSdot), 4 * dots);
}

// Every depthwise config with dot_taps forced (the fallback and two sampled, each a window row
// per dot) equals the reference bit-exactly: shifted with sdot on Cortex-A76 and Neoverse N1,
// with widening NEON code on Cortex-A53 and Cortex-A72 (the space taken on Cortex-A76).
TEST(DepthwiseNchwcInt8Aarch64, ShiftedDotTapsKernelsMatchReferenceUnderQemu) {
  uint64_t seed = 900;
  for (const char* target : {kA76, kN1, kA53, kA72})
    check_under_qemu(target, depthwise_tasks(kA76, true), seed += 10, with_dot_taps);
}

// The unshifted rows form: an AVX-512 VNNI space's dot_taps configs (tuned there, built here):
// sdot with its compensation on Cortex-A76, usdot on Neoverse V1.
TEST(DepthwiseNchwcInt8Aarch64, DotTapsKernelsMatchReferenceUnderQemu) {
  const char* const kZen4 = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
  check_under_qemu(kA76, depthwise_tasks(kZen4, false), 600, with_dot_taps);
  check_under_qemu(kV1, depthwise_tasks(kZen4, false), 650, with_dot_taps);
}

// weights=s16, the int16 weights of uint8 weights less their zero point past int8: widening
// NEON code with as many mla as the int8 weights' fallback (no sdot: dot_taps is not offered),
// and every kernel (the dot workloads' shapes, windows 2 to 4, with int16 weights) bit-exact
// under qemu on Cortex-A76 and Cortex-A72.
TEST(DepthwiseNchwcInt8Aarch64, Int16WeightsKernelsMatchReferenceUnderQemu) {
  const std::regex mla(R"(\bmla\s+v\d+\.4s)");
  std::map<std::string, std::string> a = {{"C", "32"},  {"H", "14"},   {"W", "14"},
                                          {"pad", "1"}, {"out", "u8"}, {"scale", "per_channel"}};
  const std::string plain = testing::fallback_assembly("depthwise_conv2d_nchwc_u8s8s32", a, kA76);
  a["weights"] = "s16";
  const std::string wide = testing::fallback_assembly("depthwise_conv2d_nchwc_u8s8s32", a, kA76);
  EXPECT_GT(count(wide, mla), 0);
  EXPECT_EQ(count(wide, mla), count(plain, mla));
  EXPECT_EQ(count(wide, kSdot), 0);
  uint64_t seed = 1000;
  for (const char* target : {kA76, kA72}) {
    std::vector<Task> tasks;
    for (auto w : depthwise_dot_workloads(false)) {
      w["weights"] = "s16";
      tasks.push_back(Task::create("depthwise_conv2d_nchwc_u8s8s32", w, traits(target)));
    }
    check_under_qemu(target, tasks, seed += 10);
  }
}

}  // namespace
}  // namespace ktune::schedule_space
