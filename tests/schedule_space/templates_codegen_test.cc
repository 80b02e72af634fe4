// Configs of every built-in template compiled with codegen for the host run and match the
// reference; the matmul fallback is much faster than the plain reference schedule.
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/target.h"
#include "support/error.h"
#include "support/thread_pool.h"
#include "te/lower.h"
#include "tests/schedule_space/template_cases.h"

namespace ktune::schedule_space {
namespace {

using testing::best_seconds;
using testing::Oracle;
using testing::TemplateCase;

TargetTraits host_traits(const codegen::Target& t) {
  return make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores());
}

codegen::Kernel compile(const Instantiated& inst, const std::string& name,
                        const codegen::Target& target) {
  const te::LoweredFunc f = te::lower(inst.schedule, inst.args, name);
  return codegen::Kernel::load(codegen::build(f, target));
}

class EveryConfigCompiled : public ::testing::TestWithParam<TemplateCase> {};

// Every valid config of the small instance is compiled for the host, run, and checked against the
// reference (the interpreter test checks the same configs through te alone). LLVM builds take
// milliseconds each, so they run in a pool of all cores; loading and running stay on this thread.
TEST_P(EveryConfigCompiled, KernelsMatchReference) {
  const TemplateCase& c = GetParam();
  const codegen::Target target = codegen::Target::host();
  const Task task = Task::create(c.template_name, c.args, host_traits(target));
  const Oracle oracle(task, 7);
  ThreadPool pool;
  std::vector<std::pair<uint64_t, std::future<codegen::Artifact>>> builds;
  for (uint64_t i = 0; i < task.space().size(); ++i) {
    if (!task.space().is_valid(i)) continue;
    builds.emplace_back(i, pool.submit([&task, &target, &c, i] {
      const Instantiated inst = task.instantiate(task.space().get(i));
      return codegen::build(te::lower(inst.schedule, inst.args, c.template_name), target);
    }));
  }
  ASSERT_FALSE(builds.empty());
  size_t failures = 0;
  for (auto& [index, artifact] : builds) {
    const Config cfg = task.space().get(index);
    try {
      const codegen::Kernel k = codegen::Kernel::load(artifact.get());
      const double err =
          oracle.check([&](const std::vector<void*>& args) { EXPECT_EQ(k.run(args), 0); });
      if (err >= 1e-4) {
        ++failures;
        ADD_FAILURE() << task.workload_key() << " config " << cfg.to_json_string()
                      << ": relative error " << err;
      }
    } catch (const Error& e) {
      ++failures;
      ADD_FAILURE() << task.workload_key() << " config " << cfg.to_json_string() << ": "
                    << e.what();
    }
    if (failures >= 3) break;  // the first few say enough
  }
  RecordProperty("configs", static_cast<int>(builds.size()));
}

INSTANTIATE_TEST_SUITE_P(Templates, EveryConfigCompiled,
                         ::testing::ValuesIn(testing::small_cases()),
                         [](const ::testing::TestParamInfo<TemplateCase>& info) {
                           return info.param.name;
                         });

// Padded convolutions and pools on odd shapes, pads 0-3, strides 1-2, with and without epilogues:
// the fallback and sampled configs, the padding inlined (its taps skipped, interior tiles
// unguarded: te's skip_padding_taps) and padded once, compiled for the host and checked against
// the reference with NaN-filled outputs.
TEST(PaddingTaps, OddShapesPadsAndStridesMatchReference) {
  const codegen::Target target = codegen::Target::host();
  const char* epilogues[] = {"none", "bias_relu", "bias_add_relu"};
  std::vector<TemplateCase> cases;
  int variant = 0;
  for (int pad = 0; pad <= 3; ++pad) {
    for (int stride = 1; stride <= 2; ++stride, ++variant) {
      const std::string p = std::to_string(pad), st = std::to_string(stride);
      const std::string window = pad == 3 ? "5" : "3";
      const std::string tag = "_pad" + p + "_stride" + st;
      const std::string epilogue = epilogues[variant % 3];
      cases.push_back({"conv2d_nchwc" + tag,
                       "conv2d_nchwc",
                       {{"C", "5"},
                        {"H", "7"},
                        {"W", "9"},
                        {"K", "6"},
                        {"R", window},
                        {"S", "3"},
                        {"stride", st},
                        {"pad", p},
                        {"ic_block", "4"},
                        {"oc_block", "4"},
                        {"epilogue", epilogue}}});
      std::map<std::string, std::string> dw = {{"C", "5"}, {"H", "7"},    {"W", "6"},
                                               {"R", "3"}, {"S", window}, {"stride", st},
                                               {"pad", p}, {"block", "4"}};
      if (variant % 2) dw["epilogue"] = "bias_add_relu";
      cases.push_back({"depthwise_nchwc" + tag, "depthwise_conv2d_nchwc", dw});
      cases.push_back({"conv2d" + tag,
                       "conv2d",
                       {{"C", "3"},
                        {"H", "7"},
                        {"W", "5"},
                        {"K", "3"},
                        {"R", window},
                        {"S", "3"},
                        {"stride", st},
                        {"pad", p}}});
      const std::string pool_window = std::to_string(pad + 2);
      for (const char* pool : {"max_pool2d", "avg_pool2d"})
        cases.push_back({std::string(pool) + tag,
                         pool,
                         {{"C", "3"},
                          {"H", "7"},
                          {"W", "9"},
                          {"R", pool_window},
                          {"S", pool_window},
                          {"stride", st},
                          {"pad", p}}});
    }
  }
  int inlined = 0;
  for (const TemplateCase& c : cases) {
    const Task task = Task::create(c.template_name, c.args, host_traits(target));
    const Oracle oracle(task, 11);
    std::vector<Config> configs = {task.fallback_config()};
    std::mt19937_64 rng(5);
    int want_inline = 2, want_once = 1;
    for (uint64_t i : task.space().sample(32, rng)) {
      const Config cfg = task.space().get(i);
      int& want = cfg["pad_inline"].as_int() != 0 ? want_inline : want_once;
      if (want > 0) --want, configs.push_back(cfg);
    }
    for (const Config& cfg : configs) {
      SCOPED_TRACE(task.workload_key() + " config " + cfg.to_json_string());
      const codegen::Kernel k = compile(task.instantiate(cfg), c.name, target);
      const double err =
          oracle.check([&](const std::vector<void*>& args) { EXPECT_EQ(k.run(args), 0); });
      EXPECT_LT(err, 1e-4);
      inlined += cfg["pad_inline"].as_int() != 0 && task.args().get_int("pad") > 0;
    }
  }
  EXPECT_EQ(cases.size(), 40u);
  EXPECT_GE(inlined, 60);  // the path that skips taps ran on most padded cases
}

// NCHW conv2d with stride 2, dilation 2 and padding 2 under a scalar register tile of 3 rows (the
// whole output height) and one column: every tile is a border tile. Cut by tap into unguarded
// versions, their unrolled scalar taps were miscompiled by LLVM 19's SLP vectorizer at O3
// (relative error 1.14), which is why te cuts only tiles of vectors.
TEST(PaddingTaps, StrideDilationBorderTilesMatchReference) {
  const codegen::Target target = codegen::Target::host();
  std::map<std::string, std::string> workload;
  for (const TemplateCase& c : testing::small_cases())
    if (c.name == "conv2d_stride_dilation") workload = c.args;
  ASSERT_EQ(workload["pad"], "2");
  const Task task = Task::create("conv2d", workload, host_traits(target));
  const Oracle oracle(task, 7);
  int checked = 0;
  for (uint64_t i = 0; i < task.space().size(); ++i) {
    if (!task.space().is_valid(i)) continue;
    const Config cfg = task.space().get(i);
    auto inner = [&](const char* split) { return cfg[split].values.back(); };
    if (inner("tile_oh") != 3 || inner("tile_ow") != 1 || inner("tile_k") != 1 ||
        cfg["unroll_rs"].as_int() != 1 || cfg["pad_inline"].as_int() != 1 ||
        cfg["skip_taps"].as_int() != 1)
      continue;
    SCOPED_TRACE(cfg.to_json_string());
    const codegen::Kernel k = compile(task.instantiate(cfg), "conv2d", target);
    const double err =
        oracle.check([&](const std::vector<void*>& args) { EXPECT_EQ(k.run(args), 0); });
    EXPECT_LT(err, 1e-4);
    ++checked;
  }
  EXPECT_GE(checked, 6);  // the six that were wrong among tile_c, reduce_order, parallel
}

// Times the fallback, `n_random` seeded random configs and the plain schedule of a task on the
// host; every output is checked against the plain kernel's (DESIGN.md's correctness rule). Prints
// the figures; returns {fallback, best random, plain} seconds.
std::vector<double> race(const Task& task, const codegen::Target& target, size_t n_random) {
  const ComputeDef def = task.template_def().compute(task.args());
  const size_t n_out = def.outputs.size();
  auto fresh = [&] {
    std::vector<te::HostBuffer> bufs;
    for (size_t i = 0; i < def.args.size(); ++i) {
      bufs.emplace_back(def.args[i].shape(), def.args[i].dtype());
      bufs.back().fill_random(100 + i);
    }
    return bufs;
  };
  auto ptrs = [](std::vector<te::HostBuffer>& bufs) {
    std::vector<void*> p;
    for (auto& b : bufs) p.push_back(b.data());
    return p;
  };
  std::vector<te::HostBuffer> ref = fresh();
  const double t_plain = best_seconds(compile(task.reference(), "plain", target), ptrs(ref), 1);
  auto time_config = [&](const Config& cfg) {
    std::vector<te::HostBuffer> bufs = fresh();
    const double t = best_seconds(compile(task.instantiate(cfg), "cand", target), ptrs(bufs), 3);
    EXPECT_LT(te::max_relative_error(bufs[bufs.size() - n_out], ref[ref.size() - n_out]), 1e-4)
        << cfg.to_json_string();
    return t;
  };
  const double t_fallback = time_config(task.fallback_config());
  std::mt19937_64 rng(2024);
  double t_best = 1e30;
  std::string best;
  for (uint64_t i : task.space().sample(n_random, rng)) {
    const double t = time_config(task.space().get(i));
    if (t < t_best) t_best = t, best = task.space().get(i).to_json_string();
  }
  const double g = task.flop() * 1e-9;
  std::printf(
      "%s on %s (%d cores): fallback %.1f GFLOP/s, best of %zu random %.1f GFLOP/s, plain %.1f "
      "GFLOP/s\n"
      "  best random config %s\n",
      task.workload_key().c_str(), target.cpu().c_str(), target.cores(), g / t_fallback, n_random,
      g / t_best, g / t_plain, best.c_str());
  return {t_fallback, t_best, t_plain};
}

TEST(Fallback, MatmulFallbackBeatsPlainSchedule) {
  const codegen::Target target = codegen::Target::host();
  const Task task =
      Task::create("matmul", {{"M", "512"}, {"N", "512"}, {"K", "512"}}, host_traits(target));
  const auto t = race(task, target, 12);
  EXPECT_LT(t[0] * 2, t[2]);
}

// ResNet-50's 3x3 layer.
TEST(Fallback, Conv2dFallbackBeatsPlainSchedule) {
  const codegen::Target target = codegen::Target::host();
  const Task task = Task::create(
      "conv2d", parse_workload_args("conv2d", {"C=64", "H=56", "W=56", "K=64", "pad=1"}),
      host_traits(target));
  const auto t = race(task, target, 12);
  EXPECT_LT(t[0] * 2, t[2]);
}

}  // namespace
}  // namespace ktune::schedule_space
