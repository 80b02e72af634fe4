// conv2d_nchwc: argument checks, FLOPs, its space on AVX-512, and the fallback of ResNet-50's 3x3
// layer compiled for the host: correct and much faster than the plain schedule.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

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
  EXPECT_EQ(create_error({"C=16", "H=2", "W=8", "K=16"}),
            ErrorKind::kInvalidArgument);  // 3x3 > 2 rows
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "dilation=4"}),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "oc_block=-1"}),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=0", "H=8", "W=8", "K=16"}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=1.5", "H=8", "W=8", "K=16"}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=4294967296"}),
            ErrorKind::kInvalidArgument);  // above the cap
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "epilogue=relu_bias"}),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "epilogue=bias_relu", "clip_max=6"}),
            ErrorKind::kInvalidArgument);
}

// Channel counts that are not a block multiple are accepted with the default blocks (chosen from
// the count: the whole count up to 16, else 16 or 8, whichever pads less) and with given ones;
// the key names the blocks chosen, and keeps its old form (no epilogue) for the default epilogue.
TEST(Conv2dNchwc, AnyChannelCountWithBlocksFromTheShape) {
  EXPECT_EQ(create_error({"C=24", "H=8", "W=8", "K=16"}), ErrorKind::kUnknown);
  EXPECT_EQ(create_error({"C=3", "H=8", "W=8", "K=1000", "ic_block=16", "oc_block=16"}),
            ErrorKind::kUnknown);
  auto key = [](const std::vector<std::string>& words) {
    return Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", words),
                        avx512_traits(1))
        .workload_key();
  };
  EXPECT_EQ(key({"C=3", "H=8", "W=8", "K=24"}),
            "conv2d_nchwc(N=1,C=3,H=8,W=8,K=24,R=3,S=3,stride=1,pad=0,dilation=1,ic_block=3,oc_"
            "block=8,dtype=float32)");
  EXPECT_EQ(
      key({"C=17", "H=8", "W=8", "K=48", "epilogue=bias_relu"}),
      "conv2d_nchwc(N=1,C=17,H=8,W=8,K=48,R=3,S=3,stride=1,pad=0,dilation=1,ic_block=8,oc_block=16,"
      "epilogue=bias_relu,dtype=float32)");
  const Task t = Task::create("conv2d_nchwc",
                              parse_workload_args("conv2d_nchwc", {"C=24", "H=8", "W=8", "K=20",
                                                                   "ic_block=16", "oc_block=16"}),
                              avx512_traits(1));
  const ComputeDef def = t.template_def().compute(t.args());
  EXPECT_EQ(def.args[0].shape(), (std::vector<int64_t>{1, 2, 8, 8, 16}));
  EXPECT_EQ(def.args[1].shape(), (std::vector<int64_t>{2, 2, 3, 3, 16, 16}));
  EXPECT_EQ(def.args[2].shape(), (std::vector<int64_t>{1, 2, 6, 6, 16}));
}

TEST(Conv2dNchwc, FlopsTensorsAndSpace) {
  const Task task = Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", kResnetArgs),
                                 avx512_traits(2));
  EXPECT_EQ(task.workload_key(),
            "conv2d_nchwc(N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,dilation=1,ic_block=16,oc_"
            "block=16,"
            "dtype=float32)");
  EXPECT_DOUBLE_EQ(task.flop(), 2.0 * 64 * 56 * 56 * 64 * 9);
  const ComputeDef def = task.template_def().compute(task.args());
  ASSERT_EQ(def.args.size(), 3u);
  EXPECT_EQ(def.args[0].shape(), (std::vector<int64_t>{1, 4, 56, 56, 16}));
  EXPECT_EQ(def.args[1].shape(), (std::vector<int64_t>{4, 4, 3, 3, 16, 16}));
  EXPECT_EQ(def.args[2].shape(), (std::vector<int64_t>{1, 4, 56, 56, 16}));
  EXPECT_EQ(def.args[2].name(), "conv");
  // 3 ko x 3 oh x 7 ow x 3 ci tiles, 3 orders, 2^5 flags (skip_taps: 1 only with pad_inline 1).
  EXPECT_EQ(task.space().size(), 3u * 3 * 7 * 3 * 3 * 32);
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
      EXPECT_EQ(task.space().is_valid(task.space().index_of(digits)), accumulators <= 30)
          << accumulators;
    }
  }
}

// NEON: an oc block of 16 is 4 vectors, all live with the input scalar, so 27 registers are left:
// 4 columns x 4 vectors (7 columns, 28 accumulators, would spill).
TEST(Conv2dNchwc, NeonFallbackFitsRegistersWithColumns) {
  TargetTraits neon;
  neon.key = "test-neon";
  neon.vector_bits = 128;
  neon.cores = 1;
  neon.arch = "aarch64";
  const Task task =
      Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", kResnetArgs), neon);
  const Config& fb = task.fallback_config();
  EXPECT_EQ(fb["tile_ko"].values.back(), 1);
  EXPECT_EQ(fb["tile_oh"].values.back(), 1);
  EXPECT_EQ(fb["tile_ow"].values.back(), 4);  // 4 columns x 4 vectors = 16 accumulators
  EXPECT_EQ(fb["parallel"].as_int(), 0);
  EXPECT_TRUE(task.space().is_valid(task.space().index_of(fb)));
  // In the space: columns x 4 vectors + 4 weight vectors + 1 scalar <= 32, so 6 columns fit and
  // 7 do not (with two oc blocks, 8 weight vectors: 2 columns fit, 3 do not).
  std::vector<uint64_t> digits = task.space().knob_indices(task.space().index_of(fb));
  const Knob& ko = task.space().knob(0);
  const Knob& ow = task.space().knob(2);
  int checked = 0;
  for (uint64_t i = 0; i < ko.size(); ++i) {
    for (uint64_t j = 0; j < ow.size(); ++j) {
      digits[0] = i, digits[2] = j;
      const int64_t weights = ko.entity(i).values.back() * 4;
      const int64_t accumulators = weights * ow.entity(j).values.back();
      EXPECT_EQ(task.space().is_valid(task.space().index_of(digits)),
                accumulators + weights + 1 <= 32)
          << ko.entity(i).values.back() << " blocks x " << ow.entity(j).values.back() << " columns";
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

// Taps inside the input summed over the output pixels (what a convolution multiplies per output
// channel and input channel once the padding is skipped).
int64_t valid_taps(int64_t h, int64_t w, int64_t r, int64_t s, int64_t stride, int64_t pad,
                   int64_t dilation) {
  const int64_t oh = (h + 2 * pad - dilation * (r - 1) - 1) / stride + 1;
  const int64_t ow = (w + 2 * pad - dilation * (s - 1) - 1) / stride + 1;
  int64_t taps = 0;
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x)
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < s; ++j) {
          const int64_t iy = y * stride + i * dilation - pad, ix = x * stride + j * dilation - pad;
          taps += iy >= 0 && iy < h && ix >= 0 && ix < w;
        }
  return taps;
}

// With skip_taps (the padding inlined), the interpreter executes exactly one multiplication per
// valid tap, input channel and output lane (conv2d_nchwc: C channels, every lane of the oc blocks;
// depthwise: every lane of the channel blocks), whatever the tiles; without it (padded once, or
// the guarded select), the nominal count. Results match the reference in both cases.
TEST(Conv2dNchwc, InlinedPaddingMultipliesOnlyValidTaps) {
  struct Case {
    std::string tmpl;
    std::vector<std::string> words;
    int64_t h, w, r, s, stride, pad, dilation, per_tap;  // per_tap: channels x lanes
  };
  const std::vector<Case> cases = {
      {"conv2d_nchwc",
       {"C=5", "H=7", "W=9", "K=8", "pad=1", "ic_block=4", "oc_block=4"},
       7,
       9,
       3,
       3,
       1,
       1,
       1,
       5 * 8},
      {"conv2d_nchwc",
       {"C=3", "H=9", "W=6", "K=4", "R=5", "S=3", "stride=2", "pad=3", "ic_block=3", "oc_block=4",
        "epilogue=bias_relu"},
       9,
       6,
       5,
       3,
       2,
       3,
       1,
       3 * 4},
      {"conv2d_nchwc",
       {"C=4", "H=7", "W=7", "K=4", "pad=2", "dilation=2", "ic_block=4", "oc_block=4"},
       7,
       7,
       3,
       3,
       1,
       2,
       2,
       4 * 4},
      {"depthwise_conv2d_nchwc",
       {"C=5", "H=7", "W=6", "stride=2", "pad=1", "block=4"},
       7,
       6,
       3,
       3,
       2,
       1,
       1,
       8},
      {"depthwise_conv2d_nchwc",
       {"C=8", "H=5", "W=9", "S=5", "pad=2", "block=8", "epilogue=bias_relu"},
       5,
       9,
       3,
       5,
       1,
       2,
       1,
       8},
  };
  const TargetTraits traits = avx512_traits(1);
  for (const Case& c : cases) {
    const Task task = Task::create(c.tmpl, parse_workload_args(c.tmpl, c.words), traits);
    const testing::Oracle oracle(task, 3);
    const int64_t valid = c.per_tap * valid_taps(c.h, c.w, c.r, c.s, c.stride, c.pad, c.dilation);
    const int64_t oh = (c.h + 2 * c.pad - c.dilation * (c.r - 1) - 1) / c.stride + 1;
    const int64_t ow = (c.w + 2 * c.pad - c.dilation * (c.s - 1) - 1) / c.stride + 1;
    const int64_t nominal = c.per_tap * oh * ow * c.r * c.s;
    ASSERT_LT(valid, nominal);
    std::mt19937_64 rng(9);
    int checked[2] = {0, 0};
    for (uint64_t i : task.space().sample(48, rng)) {
      const Config cfg = task.space().get(i);
      // Only a config with skip_taps (the padding inlined) skips; the others multiply the zeros.
      const int inlined = cfg["skip_taps"].as_int() != 0 ? 1 : 0;
      EXPECT_TRUE(!inlined || cfg["pad_inline"].as_int() != 0) << cfg.to_json_string();
      if (checked[inlined] >= 3) continue;
      ++checked[inlined];
      const Instantiated inst = task.instantiate(cfg);
      const te::LoweredFunc f = te::lower(inst.schedule, inst.args, "f");
      te::InterpretCounts counts;
      const double err =
          oracle.check([&](const std::vector<void*>& args) { te::interpret(f, args, &counts); });
      EXPECT_LT(err, 1e-4) << task.workload_key() << " " << cfg.to_json_string();
      EXPECT_EQ(counts.float_muls, inlined ? valid : nominal)
          << task.workload_key() << " " << cfg.to_json_string();
    }
    EXPECT_GT(checked[0], 0) << task.workload_key();
    EXPECT_GT(checked[1], 0) << task.workload_key();
  }
}

TargetTraits host_traits(const codegen::Target& t) {
  return make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores());
}

codegen::Kernel compile(const Instantiated& inst, const codegen::Target& target) {
  return codegen::Kernel::load(
      codegen::build(te::lower(inst.schedule, inst.args, "conv2d_nchwc"), target));
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
  const Task task = Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", kResnetArgs),
                                 host_traits(target));
  const ComputeDef def = task.template_def().compute(task.args());
  Buffers ref(def);
  const double t_plain = best_seconds(compile(task.reference(), target), ref.ptrs, 1);

  std::vector<Config> configs = {task.fallback_config()};
  const int64_t par = task.space().knob_position("parallel");
  std::vector<uint64_t> digits =
      task.space().knob_indices(task.space().index_of(task.fallback_config()));
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
    std::printf("%s on %s (%d cores): %.1f GFLOP/s (plain %.1f GFLOP/s) config %s\n",
                task.workload_key().c_str(), target.cpu().c_str(), target.cores(),
                task.flop() * 1e-9 / t, task.flop() * 1e-9 / t_plain, cfg.to_json_string().c_str());
  }
  for (double t : times) EXPECT_LT(t * 2, t_plain);
}

// The blocked layouts with padding lanes, against a direct NCHW convolution written here (not the
// template's compute): every padding lane of I, W, bias and residual holds NaN, which must never
// reach an output; output padding lanes must be 0. Fallback and random configs, host build. The
// fourth case strides rows by 2 and columns by 1 (stride_w, text recognizers' strides [2, 1]), the
// last two pad their sides differently (pad_left, pad_bottom, pad_right).
TEST(Conv2dNchwc, PaddedBlocksMatchDirectConvolution) {
  struct Case {
    std::vector<std::string> words;
    int64_t c, k, h, w, stride, pad;
    int64_t stride_w = 0;  // 0: stride
    // Top, left, bottom, right when the sides differ (pad_left, pad_bottom, pad_right given).
    std::vector<int64_t> sides = {};
  };
  const std::vector<Case> cases = {
      {{"C=3", "H=9", "W=11", "K=24", "stride=2", "pad=1", "epilogue=bias_relu"},
       3,
       24,
       9,
       11,
       2,
       1},
      {{"C=24", "H=6", "W=7", "K=20", "ic_block=16", "oc_block=16", "epilogue=bias_add_relu"},
       24,
       20,
       6,
       7,
       1,
       0},
      {{"C=17", "H=5", "W=5", "K=5", "pad=1"}, 17, 5, 5, 5, 1, 1},
      {{"C=8", "H=9", "W=10", "K=16", "stride=2", "stride_w=1", "pad=1", "epilogue=bias_relu"},
       8,
       16,
       9,
       10,
       2,
       1,
       1},
      // tf2onnx's SAME padding of a stride-2 conv (the odd unit at the end), and a lifted 1-D
      // conv's (columns only, 3 before and 4 after).
      {{"C=5", "H=8", "W=9", "K=16", "stride=2", "pad=0", "pad_bottom=1", "pad_right=2",
        "epilogue=bias_relu"},
       5,
       16,
       8,
       9,
       2,
       0,
       0,
       {0, 0, 1, 2}},
      {{"C=16", "H=3", "W=12", "K=8", "pad=0", "pad_left=3", "pad_right=4"},
       16,
       8,
       3,
       12,
       1,
       0,
       0,
       {0, 3, 0, 4}},
  };
  const codegen::Target target = codegen::Target::host();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Case& c : cases) {
    const Task task = Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", c.words),
                                   host_traits(target));
    const int64_t icb = task.args().get_int("ic_block"), ocb = task.args().get_int("oc_block");
    const int64_t cbs = (c.c + icb - 1) / icb, kbs = (c.k + ocb - 1) / ocb;
    const int64_t sw = c.stride_w > 0 ? c.stride_w : c.stride;
    // stride_w is in the key only where it is given.
    EXPECT_EQ(task.workload_key().find("stride_w=") != std::string::npos, c.stride_w > 0)
        << task.workload_key();
    const std::vector<int64_t> sides =
        c.sides.empty() ? std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad} : c.sides;
    const int64_t oh = (c.h + sides[0] + sides[2] - 3) / c.stride + 1,
                  ow = (c.w + sides[1] + sides[3] - 3) / sw + 1;
    // The side pads are in the key only where they are given.
    EXPECT_EQ(task.workload_key().find("pad_right=") != std::string::npos, !c.sides.empty())
        << task.workload_key();
    const std::string epilogue = task.args().get("epilogue");
    // Logical tensors, seeded.
    std::mt19937_64 rng(c.c * 100 + c.k);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> in(c.c * c.h * c.w), wt(c.k * c.c * 9), bias(c.k), res(c.k * oh * ow);
    for (auto* v : {&in, &wt, &bias, &res})
      for (double& x : *v) x = u(rng);
    // Expected output, NCHW.
    std::vector<double> expect(c.k * oh * ow);
    for (int64_t k = 0; k < c.k; ++k)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double acc = 0;
          for (int64_t ch = 0; ch < c.c; ++ch)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t q = 0; q < 3; ++q) {
                const int64_t iy = y * c.stride + r - sides[0], ix = x * sw + q - sides[1];
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                acc += in[(ch * c.h + iy) * c.w + ix] * wt[((k * c.c + ch) * 3 + r) * 3 + q];
              }
          if (epilogue != "none") acc += bias[k];
          if (epilogue == "bias_add_relu") acc += res[(k * oh + y) * ow + x];
          if (epilogue != "none") acc = std::max(acc, 0.0);
          expect[(k * oh + y) * ow + x] = acc;
        }
    // Blocked buffers in the template's argument order, padding lanes NaN.
    const ComputeDef def = task.template_def().compute(task.args());
    std::vector<te::HostBuffer> bufs;
    for (const auto& t : def.args) {
      bufs.emplace_back(t.shape(), t.dtype());
      for (int64_t i = 0; i < bufs.back().num_elements(); ++i) bufs.back().set(i, nan);
    }
    for (int64_t ch = 0; ch < c.c; ++ch)
      for (int64_t i = 0; i < c.h * c.w; ++i)
        bufs[0].set(((ch / icb) * c.h * c.w + i) * icb + ch % icb, in[ch * c.h * c.w + i]);
    for (int64_t k = 0; k < c.k; ++k)
      for (int64_t ch = 0; ch < c.c; ++ch)
        for (int64_t rs = 0; rs < 9; ++rs)
          bufs[1].set(((((k / ocb) * cbs + ch / icb) * 9 + rs) * icb + ch % icb) * ocb + k % ocb,
                      wt[(k * c.c + ch) * 9 + rs]);
    size_t next = 2;
    if (epilogue != "none") {
      for (int64_t k = 0; k < c.k; ++k) bufs[next].set(k, bias[k]);  // [K/ocb][ocb] is k itself
      ++next;
    }
    auto blocked_out = [&](int64_t k, int64_t i) {
      return ((k / ocb) * oh * ow + i) * ocb + k % ocb;
    };
    if (epilogue == "bias_add_relu") {
      for (int64_t k = 0; k < c.k; ++k)
        for (int64_t i = 0; i < oh * ow; ++i)
          bufs[next].set(blocked_out(k, i), res[k * oh * ow + i]);
      ++next;
    }
    ASSERT_EQ(next + 1, bufs.size());
    std::vector<Config> configs = {task.fallback_config()};
    std::mt19937_64 pick(7);
    for (uint64_t i : task.space().sample(3, pick)) configs.push_back(task.space().get(i));
    for (const Config& cfg : configs) {
      for (int64_t i = 0; i < bufs.back().num_elements(); ++i) bufs.back().set(i, nan);
      std::vector<void*> ptrs;
      for (auto& b : bufs) ptrs.push_back(b.data());
      ASSERT_EQ(compile(task.instantiate(cfg), target).run(ptrs), 0);
      double worst = 0;
      for (int64_t k = 0; k < kbs * ocb; ++k)
        for (int64_t i = 0; i < oh * ow; ++i) {
          const double got = bufs.back().get(blocked_out(k, i));
          const double want = k < c.k ? expect[k * oh * ow + i] : 0.0;  // padding lanes are zeros
          const double err = std::isnan(got) ? 1e30 : std::fabs(got - want);
          worst = std::max(worst, err);
        }
      EXPECT_LT(worst, 1e-4) << task.workload_key() << " config " << cfg.to_json_string();
    }
  }
}

// Stride 1, padded 3x3, AVX-512: the general tile (2 oc blocks x 2 rows x 7 columns) with the
// padding inlined and its taps skipped, on ResNet-18's four output sizes.
TEST(Conv2dNchwc, Stride1PaddedFallbackSkipsTaps) {
  for (const char* h : {"56", "28", "14", "7"}) {
    const Task task =
        Task::create("conv2d_nchwc",
                     parse_workload_args("conv2d_nchwc", {"C=64", std::string("H=") + h,
                                                          std::string("W=") + h, "K=128", "pad=1"}),
                     avx512_traits(1));
    const Config& fb = task.fallback_config();
    EXPECT_EQ(fb["tile_ko"].values.back(), 2) << task.workload_key();
    EXPECT_EQ(fb["tile_ow"].values.back(), 7) << task.workload_key();
    EXPECT_EQ(fb["skip_taps"].as_int(), 1) << task.workload_key();
    EXPECT_EQ(fb["pad_inline"].as_int(), 1) << task.workload_key();
    EXPECT_EQ(fb["unroll_cb"].as_int(), 0) << task.workload_key();
  }
}

// Strided 3x3 layers on AVX-512 fall back to one oc block x two rows (a tail where the height has
// few divisors) x the columns that fill 28 accumulators, the lane loop unrolled and the padding
// taps skipped; stride 1, other windows and AVX2 keep the general tile's size.
TEST(Conv2dNchwc, StridedFallbackIsOneBlockTwoRowsSkippingTaps) {
  struct Case {
    std::vector<std::string> words;
    int64_t ko, oh, ow, ci;
  };
  const std::vector<Case> cases = {
      {{"C=64", "H=56", "W=56", "K=128", "stride=2", "pad=1"}, 1, 2, 14, 4},
      {{"C=128", "H=28", "W=28", "K=256", "stride=2", "pad=1"}, 1, 2, 14, 8},
      {{"C=256", "H=14", "W=14", "K=512", "stride=2", "pad=1"}, 1, 2, 7, 16},  // 7 rows: a tail
      {{"C=20", "H=13", "W=15", "K=40", "stride=2", "pad=1"}, 1, 2, 8, 3},     // 7 x 8 outputs
  };
  for (int cores : {1, 2}) {
    for (const Case& c : cases) {
      const Task task = Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", c.words),
                                     avx512_traits(cores));
      const Config& fb = task.fallback_config();
      const std::string what = task.workload_key() + " " + fb.to_json_string();
      EXPECT_TRUE(task.space().is_valid(task.space().index_of(fb))) << what;
      EXPECT_EQ(fb["tile_ko"].values.back(), c.ko) << what;
      EXPECT_EQ(fb["tile_oh"].values.back(), c.oh) << what;
      EXPECT_EQ(fb["tile_ow"].values.back(), c.ow) << what;
      EXPECT_EQ(fb["tile_ci"].values.back(), c.ci) << what;
      EXPECT_EQ(fb["unroll_cb"].as_int(), 1) << what;
      EXPECT_EQ(fb["pad_inline"].as_int(), 1) << what;
      EXPECT_EQ(fb["skip_taps"].as_int(), 1) << what;
      EXPECT_EQ(fb["reduce_order"].as_int(), 0) << what;
      EXPECT_EQ(fb["unroll_s"].as_int(), 0) << what;
      EXPECT_EQ(fb["parallel"].as_int(), cores > 1 ? 1 : 0) << what;
    }
  }
  // Without padding there are no taps to skip: the padding knobs stay 0.
  const Task unpadded = Task::create(
      "conv2d_nchwc",
      parse_workload_args("conv2d_nchwc", {"C=64", "H=57", "W=57", "K=128", "stride=2"}),
      avx512_traits(1));
  EXPECT_EQ(unpadded.fallback_config()["tile_ko"].values.back(), 1);
  EXPECT_EQ(unpadded.fallback_config()["tile_ow"].values.back(), 14);
  EXPECT_EQ(unpadded.fallback_config()["unroll_cb"].as_int(), 1);
  EXPECT_EQ(unpadded.fallback_config()["skip_taps"].as_int(), 0);
  EXPECT_EQ(unpadded.fallback_config()["pad_inline"].as_int(), 0);
  // The general tile: a 1x1 window, and AVX2 (two vectors per 16-wide oc block).
  TargetTraits avx2 = avx512_traits(1);
  avx2.vector_bits = 256;
  const std::vector<std::pair<std::vector<std::string>, TargetTraits>> general = {
      {{"C=64", "H=28", "W=28", "K=128", "pad=1"}, avx2},
      {{"C=64", "H=56", "W=56", "K=128", "R=1", "S=1", "stride=2"}, avx512_traits(1)},
      {{"C=64", "H=56", "W=56", "K=128", "stride=2", "pad=1"}, avx2},
  };
  for (const auto& [words, traits] : general) {
    const Task task =
        Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", words), traits);
    const Config& fb = task.fallback_config();
    EXPECT_EQ(fb["unroll_cb"].as_int(), 0) << task.workload_key();
    EXPECT_EQ(fb["skip_taps"].as_int(), 0) << task.workload_key();
    EXPECT_EQ(fb["pad_inline"].as_int(), 0) << task.workload_key();
    if (traits.vector_bits == 512) {
      EXPECT_EQ(fb["tile_ko"].values.back(), 2) << task.workload_key();
    }
  }
}

// The strided fallback on odd shapes (rows with a tail, a partial input channel block, an
// epilogue), on AVX-512's space: compiled for the host and interpreted, outputs from NaN against
// the reference; the interpreter multiplies only the taps inside the input.
TEST(Conv2dNchwc, StridedFallbackMatchesTheReference) {
  struct Case {
    std::vector<std::string> words;
    int64_t h, w, c, k;  // k: output channels including the last block's padding lanes
  };
  const std::vector<Case> cases = {
      {{"C=20", "H=13", "W=15", "K=40", "stride=2", "pad=1"}, 13, 15, 20, 40},
      {{"C=16", "H=9", "W=27", "K=16", "stride=2", "pad=1", "epilogue=bias_relu"}, 9, 27, 16, 16},
      {{"C=12", "H=25", "W=28", "K=20", "stride=2", "pad=1", "ic_block=8", "oc_block=16"},
       25,
       28,
       12,
       32},
  };
  const codegen::Target host = codegen::Target::host();
  for (const Case& c : cases) {
    const Task task = Task::create("conv2d_nchwc", parse_workload_args("conv2d_nchwc", c.words),
                                   avx512_traits(2));
    const Config& fb = task.fallback_config();
    const std::string what = task.workload_key() + " " + fb.to_json_string();
    ASSERT_EQ(fb["skip_taps"].as_int(), 1) << what;
    ASSERT_EQ(fb["tile_oh"].values.back(), 2) << what;
    const int64_t oh = (c.h + 2 - 3) / 2 + 1;
    ASSERT_NE(oh % 2, 0) << what;  // the row tiles leave a tail
    const testing::Oracle oracle(task, 5);
    const Instantiated inst = task.instantiate(fb);
    const te::LoweredFunc f = te::lower(inst.schedule, inst.args, "conv2d_nchwc");
    te::InterpretCounts counts;
    const double interpreted =
        oracle.check([&](const std::vector<void*>& args) { te::interpret(f, args, &counts); });
    EXPECT_LT(interpreted, 1e-4) << what;
    EXPECT_EQ(counts.float_muls, c.c * c.k * valid_taps(c.h, c.w, 3, 3, 2, 1, 1)) << what;
    const codegen::Kernel kernel = codegen::Kernel::load(codegen::build(f, host));
    int status = 0;
    const double compiled =
        oracle.check([&](const std::vector<void*>& args) { status = kernel.run(args); });
    EXPECT_EQ(status, 0) << what;
    EXPECT_LT(compiled, 1e-4) << what;
  }
}

}  // namespace
}  // namespace ktune::schedule_space
