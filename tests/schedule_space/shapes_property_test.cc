// Property test over shapes: random workloads of every built-in template (primes, 1, extents just
// below and above the vector width) with random configs of their spaces, compiled for the host
// (and a sample for AArch64 under qemu), match the reference; outputs start as NaN so an element
// a kernel never writes fails.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "schedule_space/template_registry.h"
#include "support/error.h"
#include "support/thread_pool.h"
#include "te/host_buffer.h"
#include "te/interpreter.h"
#include "te/lower.h"
#include "tests/codegen/test_util.h"
#include "tests/schedule_space/reference_util.h"

namespace ktune::schedule_space {
namespace {

constexpr int kShapesPerTemplate = 8;
constexpr int kConfigsPerShape = 3;
constexpr int kAarch64Sample = 24;  // kernels of the whole run, one qemu start

using Args = std::map<std::string, std::string>;

// Extents that break divisibility assumptions: 1, primes, and the neighbours of the 16-lane
// (AVX-512 f32) and 4-lane (NEON) vector widths.
int64_t odd_extent(std::mt19937_64& rng, int64_t cap) {
  static const int64_t kPool[] = {1,  2,  3,  4,  5,  7,  11, 13, 15, 16,
                                  17, 19, 23, 31, 32, 33, 37, 47, 48, 49};
  for (;;) {
    const int64_t v = kPool[rng() % std::size(kPool)];
    if (v <= cap) return v;
  }
}

std::string str(int64_t v) { return std::to_string(v); }

// A random workload of `tmpl` small enough for the reference to run in milliseconds.
Args random_args(const std::string& tmpl, std::mt19937_64& rng) {
  auto e = [&](int64_t cap) { return str(odd_extent(rng, cap)); };
  auto pick = [&](std::initializer_list<const char*> v) {
    return std::string(v.begin()[rng() % v.size()]);
  };
  if (tmpl == "fma_peak")  // the calibration kernel: lanes and rows of any count too
    return {
        {"lanes", e(17)}, {"rows", e(13)}, {"depth", e(33)}, {"sweeps", e(3)}, {"copies", e(3)}};
  if (tmpl == "matmul")
    return {{"M", e(49)},
            {"N", e(49)},
            {"K", e(33)},
            {"layout", pick({"nn", "nt"})},
            {"epilogue", pick({"none", "none", "bias", "bias_relu", "bias_gelu", "bias_silu",
                               "add_relu6", "bias_add_hardswish", "bias_gelu_erf"})}};
  if (tmpl == "matmul_u8s8s32") return {{"M", e(49)}, {"N", e(49)}, {"K", e(33)}};
  if (tmpl == "matmul_bf16")
    return {{"M", e(49)}, {"N", e(49)}, {"K", e(33)}, {"epilogue", pick({"none", "bias_relu"})}};
  if (tmpl == "dense_bias_relu")
    return {{"M", e(17)},
            {"N", e(49)},
            {"K", e(33)},
            {"epilogue", pick({"bias_relu", "bias_gelu", "bias_relu6", "bias_add_silu"})}};
  if (tmpl == "batch_matmul")
    return {
        {"batch", e(3)}, {"M", e(17)}, {"N", e(33)}, {"K", e(17)}, {"layout", pick({"nn", "nt"})}};
  if (tmpl == "conv2d_winograd_nchwc") {  // 3x3 at stride 1 only; any tile size
    const int64_t pad = static_cast<int64_t>(rng() % 2);
    Args a = {{"C", e(33)},
              {"H", str(std::max<int64_t>(3, odd_extent(rng, 19)))},
              {"W", str(std::max<int64_t>(3, odd_extent(rng, 33)))},
              {"K", e(33)},
              {"pad", str(pad)},
              {"m", pick({"2", "4", "6"})},
              {"epilogue", pick({"none", "bias_relu", "bias_add_relu"})}};
    if (rng() % 2)
      a["ic_block"] = pick({"2", "4", "8", "16"}), a["oc_block"] = pick({"4", "8", "16"});
    return a;
  }
  // Windows: R, S in {1, 3}; the input at least as large as the (dilated) window.
  const int64_t r = rng() % 2 ? 3 : 1, s = rng() % 2 ? 3 : 1;
  const int64_t stride = 1 + static_cast<int64_t>(rng() % 2),
                pad = r == 3 ? static_cast<int64_t>(rng() % 2) : 0;
  const int64_t h = std::max<int64_t>(r, odd_extent(rng, 19)),
                w = std::max<int64_t>(s, odd_extent(rng, 33));
  Args a = {{"C", e(tmpl == "conv2d_nchwc" || tmpl == "conv2d" ? 33 : 19)},
            {"H", str(h)},
            {"W", str(w)},
            {"R", str(r)},
            {"S", str(s)},
            {"stride", str(stride)}};
  if (tmpl == "max_pool2d" || tmpl == "avg_pool2d") {
    a["pad"] = str(std::min<int64_t>(pad, std::min(r, s) - 1));
    return a;
  }
  a["pad"] = str(pad);
  if (tmpl == "depthwise_conv2d") return a;
  if (tmpl == "depthwise_conv2d_nchwc_u8s8s32") {  // 16-channel blocks, mostly not dividing C
    if (rng() % 2) a["data_zero_point"] = pick({"1", "128", "255"});
    return a;
  }
  if (tmpl == "depthwise_conv2d_nchwc") {
    if (rng() % 2) a["block"] = pick({"4", "8", "16"});  // mostly not dividing C
    a["epilogue"] = pick({"none", "bias_relu6", "bias_silu", "bias_add_hardswish"});
    return a;
  }
  a["K"] = e(33);
  if (tmpl == "conv2d_nchwc_u8s8s32") {  // whole groups of 4 input channels
    a["C"] = pick({"4", "8", "12", "20", "24", "32"});
    if (rng() % 2) a["data_zero_point"] = pick({"1", "128", "255"});
  }
  if (tmpl == "conv2d_nchwc_bf16") {  // whole pairs of input channels
    a["C"] = pick({"2", "6", "10", "12", "18", "24"});
    a["epilogue"] = pick({"none", "bias", "bias_relu", "bias_add_relu"});
  }
  if (tmpl == "conv2d_nchwc") {
    // Blocks chosen from the shape (default), or given and then mostly not dividing C and K.
    if (rng() % 2)
      a["ic_block"] = pick({"2", "4", "8", "16"}), a["oc_block"] = pick({"4", "8", "16"});
    a["epilogue"] = pick({"none", "bias_relu", "bias_add_relu", "bias_relu6", "bias_hardswish",
                          "add_silu", "bias_clip", "bias_max_relu"});
    if (a["epilogue"] == "bias_clip") a["clip_min"] = "-0.5", a["clip_max"] = "0.5";
  }
  return a;
}

using testing::aarch64_errors;
using testing::build_case;
using testing::Case;
using testing::fresh_buffers;
using testing::max_error;
using testing::Reference;
using testing::reference_of;
using testing::traits_of;

// Winograd F(6, 3) on random (untransformed) U: A^T's entries up to 32 amplify fp32 rounding,
// and the interpreter rounds differently from the kernel (measured 1.2e-4 on the host, 5.7e-4
// under qemu for Cortex-A72).
double tolerance(const Task& task) {
  const bool f6 =
      task.template_def().name == "conv2d_winograd_nchwc" && task.args().get_int("m") == 6;
  return f6 ? 1e-3 : 1e-4;
}

uint64_t seed_from_env() {
  const char* s = std::getenv("KTUNE_SHAPES_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 20261124;
}

// Every built-in template: random shapes x random valid configs, built in a pool, run on this
// thread, checked; then a sample of the same cases built for AArch64 and run under qemu.
TEST(ShapesProperty, RandomShapesAndConfigsMatchReference) {
  const uint64_t seed = seed_from_env();
  std::printf("seed %llu (set KTUNE_SHAPES_SEED to vary)\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const codegen::Target host = codegen::Target::host();
  const codegen::Target arm =
      codegen::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon");
  std::vector<Case> cases, arm_cases;
  std::map<std::string, int> per_template;
  for (const auto& def : TemplateRegistry::global().list()) {
    for (int n = 0; n < kShapesPerTemplate; ++n) {
      const Args args = random_args(def->name, rng);
      std::shared_ptr<const Task> task;
      try {
        task = std::make_shared<const Task>(Task::create(def->name, args, traits_of(host)));
      } catch (const Error& e) {
        ADD_FAILURE() << def->name << " refused a workload for its numbers: " << e.what();
        continue;
      }
      auto ref = std::make_shared<const Reference>(reference_of(*task, seed + n));
      std::vector<Config> configs = {task->fallback_config()};
      for (uint64_t i : task->space().sample(kConfigsPerShape - 1, rng))
        configs.push_back(task->space().get(i));
      for (const Config& c : configs) cases.push_back({task, ref, c});
      ++per_template[def->name];
      // The AArch64 space differs (4 lanes): its own task and a config from it.
      if (arm_cases.size() < kAarch64Sample && n % 2 == 0) {
        auto arm_task = std::make_shared<const Task>(Task::create(def->name, args, traits_of(arm)));
        const auto pick = arm_task->space().sample(1, rng);
        arm_cases.push_back({arm_task, ref, arm_task->space().get(pick.at(0))});
      }
    }
  }
  ASSERT_GE(per_template.size(), 8u);

  ThreadPool pool;
  std::vector<std::future<codegen::Artifact>> builds;
  for (const Case& c : cases)
    builds.push_back(pool.submit([&c, &host] {
      const Instantiated inst = c.task->instantiate(c.config);
      return codegen::build(te::lower(inst.schedule, inst.args, "k"), host);
    }));
  size_t failures = 0;
  for (size_t i = 0; i < cases.size() && failures < 5; ++i) {
    const Case& c = cases[i];
    try {
      const codegen::Kernel k = codegen::Kernel::load(builds[i].get());
      std::vector<te::HostBuffer> bufs = fresh_buffers(*c.ref);
      std::vector<void*> ptrs;
      for (auto& b : bufs) ptrs.push_back(b.data());
      ASSERT_EQ(k.run(ptrs), 0);
      const double err = max_error(bufs, *c.ref);
      if (!(err < tolerance(*c.task))) {
        ++failures;
        ADD_FAILURE() << c.task->workload_key() << " config " << c.config.to_json_string()
                      << ": error " << err;
      }
    } catch (const Error& e) {
      ++failures;
      ADD_FAILURE() << c.task->workload_key() << " config " << c.config.to_json_string() << ": "
                    << e.what();
    }
  }
  for (auto& b : builds)  // nothing outlives the cases
    if (b.valid()) b.wait();
  std::printf("host: %zu kernels of %zu templates checked\n", cases.size(), per_template.size());

  if (!codegen::testing::cross_tools_available()) {
    std::printf("AArch64 sample skipped: no aarch64-linux-gnu-g++ or qemu-aarch64-static\n");
    return;
  }
  std::vector<codegen::Artifact> arm_artifacts;
  for (size_t i = 0; i < arm_cases.size(); ++i)
    arm_artifacts.push_back(build_case(arm_cases[i], arm, "k" + std::to_string(i)));
  const std::vector<double> errors = aarch64_errors(arm_cases, arm_artifacts);
  for (size_t i = 0; i < arm_cases.size(); ++i)
    EXPECT_LT(errors[i], tolerance(*arm_cases[i].task))
        << "aarch64 " << arm_cases[i].task->workload_key() << " config "
        << arm_cases[i].config.to_json_string();
  std::printf("aarch64: %zu kernels checked under qemu\n", arm_cases.size());
}

}  // namespace
}  // namespace ktune::schedule_space
