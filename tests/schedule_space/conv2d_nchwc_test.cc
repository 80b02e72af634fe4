// conv2d_nchwc: argument checks, FLOPs, its space on AVX-512, and the fallback of ResNet-50's 3x3
// layer compiled for the host: correct and much faster than the plain schedule.
#include <chrono>
#include <cstdio>

#include <gtest/gtest.h>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "te/host_buffer.h"
#include "te/interpreter.h"
#include "te/lower.h"
#include "tests/schedule_space/template_cases.h"

namespace ktune::schedule_space {
namespace {

using testing::best_seconds;

const std::vector<std::string> kResnetArgs = {"C=64", "H=56", "W=56", "K=64", "pad=1"};

TargetTraits avx512_traits(int cores) {
  TargetTraits t;
  t.key = "test-avx512";
  t.vector_bits = 512;
  t.cores = cores;
  t.arch = "x86_64";
  return t;
}

ErrorKind create_error(const std::vector<std::string>& words) {
  try {
    Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", words), avx512_traits(1));
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kUnknown;
}

TEST(Conv2dNchwc, BadArgumentsAreInvalid) {
  EXPECT_EQ(create_error({"C=24", "H=8", "W=8", "K=16"}), ErrorKind::kInvalidArgument);  // C % 16
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=20"}), ErrorKind::kInvalidArgument);  // K % 16
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "ic_block=3"}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=16", "H=2", "W=8", "K=16"}), ErrorKind::kInvalidArgument);  // 3x3 > 2 rows
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "dilation=4"}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "oc_block=0"}), ErrorKind::kInvalidArgument);
  try {
    Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", {"C=24", "H=8", "W=8", "K=16"}),
                 avx512_traits(1));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ic_block"), std::string::npos) << e.what();
  }
}

TEST(Conv2dNchwc, FlopsTensorsAndSpace) {
  const Task task = Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", kResnetArgs), avx512_traits(2));
  EXPECT_EQ(task.workload_key(),
            "conv2d_nchwc(N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,dilation=1,ic_block=16,oc_block=16,"
            "dtype=float32)");
  EXPECT_DOUBLE_EQ(task.flop(), 2.0 * 64 * 56 * 56 * 64 * 9);
  const ComputeDef def = task.template_def().compute(task.args());
  ASSERT_EQ(def.args.size(), 3u);
  EXPECT_EQ(def.args[0].shape(), (std::vector<int64_t>{1, 4, 56, 56, 16}));
  EXPECT_EQ(def.args[1].shape(), (std::vector<int64_t>{4, 4, 3, 3, 16, 16}));
  EXPECT_EQ(def.args[2].shape(), (std::vector<int64_t>{1, 4, 56, 56, 16}));
  EXPECT_EQ(def.args[2].name(), "conv");
  // 3 ko x 3 oh x 7 ow x 3 ci tiles, 3 orders, 2^4 flags.
  EXPECT_EQ(task.space().size(), 3u * 3 * 7 * 3 * 3 * 16);
  // The fallback: 2 oc blocks x 2 rows x 7 columns = 28 accumulators, all input channels in
  // one pass, in parallel.
  const Config& fb = task.fallback_config();
  EXPECT_EQ(fb["tile_ko"].values.back(), 2);
  EXPECT_EQ(fb["tile_oh"].values.back(), 2);
  EXPECT_EQ(fb["tile_ow"].values.back(), 7);
  EXPECT_EQ(fb["unroll_cb"].as_int(), 0);
  EXPECT_EQ(fb["tile_ci"].values.back(), 4);
  EXPECT_EQ(fb["parallel"].as_int(), 1);
  // The accumulators (oc blocks x rows x columns) must leave 2 of the 32 registers free.
  std::vector<uint64_t> digits = task.space().knob_indices(task.space().index_of(fb));
  const Knob& ko = task.space().knob(0);
  const Knob& ow = task.space().knob(2);
  for (uint64_t i = 0; i < ko.size(); ++i) {
    for (uint64_t j = 0; j < ow.size(); ++j) {
      digits[0] = i, digits[2] = j;
      const int64_t accumulators = ko.entity(i).values.back() * 2 * ow.entity(j).values.back();
      EXPECT_EQ(task.space().is_valid(task.space().index_of(digits)), accumulators <= 30) << accumulators;
    }
  }
}

// NEON: an oc block of 16 is 4 vectors, so the fallback fills the 32 registers with columns.
TEST(Conv2dNchwc, NeonFallbackFillsRegistersWithColumns) {
  TargetTraits neon;
  neon.key = "test-neon";
  neon.vector_bits = 128;
  neon.cores = 1;
  neon.arch = "aarch64";
  const Task task = Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", kResnetArgs), neon);
  const Config& fb = task.fallback_config();
  EXPECT_EQ(fb["tile_ko"].values.back(), 1);
  EXPECT_EQ(fb["tile_oh"].values.back(), 1);
  EXPECT_EQ(fb["tile_ow"].values.back(), 7);  // 7 columns x 4 vectors = 28 accumulators
  EXPECT_EQ(fb["parallel"].as_int(), 0);
  EXPECT_TRUE(task.space().is_valid(task.space().index_of(fb)));
}

TargetTraits host_traits(const codegen::Target& t) {
  return make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores());
}

codegen::Kernel compile(const Instantiated& inst, const codegen::Target& target) {
  return codegen::Kernel::load(codegen::build(te::lower(inst.schedule, inst.args, "conv2d_nchwc"), target));
}

struct Buffers {
  explicit Buffers(const ComputeDef& def) {
    for (size_t i = 0; i < def.args.size(); ++i) {
      bufs.emplace_back(def.args[i].shape(), def.args[i].dtype());
      bufs.back().fill_random(100 + i);
    }
    for (auto& b : bufs) ptrs.push_back(b.data());
  }
  const te::HostBuffer& out() const { return bufs.back(); }
  std::vector<te::HostBuffer> bufs;
  std::vector<void*> ptrs;
};

// ResNet-50's 3x3 layer in NCHW16c: the fallback (and its single-thread variant) match the plain
// schedule's output and beat it by a wide margin.
TEST(Conv2dNchwc, HostFallbackIsCorrectAndFast) {
  const codegen::Target target = codegen::Target::host();
  const Task task = Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", kResnetArgs), host_traits(target));
  const ComputeDef def = task.template_def().compute(task.args());
  Buffers ref(def);
  const double t_plain = best_seconds(compile(task.reference(), target), ref.ptrs, 1);

  std::vector<Config> configs = {task.fallback_config()};
  const int64_t par = task.space().knob_position("parallel");
  std::vector<uint64_t> digits = task.space().knob_indices(task.space().index_of(task.fallback_config()));
  if (digits[par] != 0) {
    digits[par] = 0;
    configs.push_back(task.space().get(task.space().index_of(digits)));
  }
  std::vector<double> times;
  for (const Config& cfg : configs) {
    Buffers b(def);
    const double t = best_seconds(compile(task.instantiate(cfg), target), b.ptrs, 5);
    EXPECT_LT(te::max_relative_error(b.out(), ref.out()), 1e-4) << cfg.to_json_string();
    times.push_back(t);
    std::printf("%s on %s (%d cores): %.1f GFLOP/s (plain %.1f GFLOP/s) config %s\n", task.workload_key().c_str(),
                target.cpu().c_str(), target.cores(), task.flop() * 1e-9 / t, task.flop() * 1e-9 / t_plain,
                cfg.to_json_string().c_str());
  }
  for (double t : times) EXPECT_LT(t * 2, t_plain);
}

}  // namespace
}  // namespace ktune::schedule_space
