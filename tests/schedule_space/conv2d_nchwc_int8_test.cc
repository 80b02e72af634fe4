// Tests conv2d_nchwc_u8s8s32 on odd shapes (H, W odd, pad 0-3, stride 1-2, K not a multiple of 16,
// a data zero point as padding), its fallback and sampled configs, each with and without
// skip_taps where the space has it, and the dots run with skip_taps counted against the taps
// inside the input, tensorized with vpdpbusd on an
// AVX-512 VNNI host and in widening vector code on x86-64-v3: the int32 output bit-exactly against
// a plain C++ convolution of the blocked layouts, the requantized one within one unit of nearbyint
// in double (exact away from float32's rounding near a half) and bit-exactly against te's
// interpreter. Outputs start as a sentinel. depthwise_conv2d_nchwc_u8s8s32 likewise (windows 1 to
// 5 wide), each config with and without dot_taps where the space has it (a window row per
// vpdpbusd on an AVX-512 VNNI host), and its dot_taps configs built for x86 targets without VNNI
// (widening code), against a plain C++ depthwise convolution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "te/ir_printer.h"
#include "te/ir_visitor.h"
#include "te/lower.h"
#include "tests/schedule_space/reference_util.h"
#include "tests/schedule_space/template_cases.h"

namespace ktune::schedule_space {
namespace {

struct Case {
  int64_t n, c, h, w, k, r, stride, pad, zp;  // zp: the data's zero point (the padding value)
  std::string out = "s32";                    // s32 | u8 | s8
  bool per_channel = false, relu = false;
  bool depthwise = false;  // depthwise_conv2d_nchwc_u8s8s32 (k = c)
};

const Case kCases[] = {
    {1, 8, 9, 7, 16, 3, 1, 1, 0},
    {1, 4, 7, 9, 20, 3, 2, 2, 3},
    {2, 12, 5, 5, 32, 1, 1, 0, 0},
    {1, 24, 11, 9, 16, 3, 2, 1, 128},
    {1, 16, 6, 5, 48, 3, 1, 0, 0},
    {1, 8, 7, 5, 24, 3, 1, 1, 9, "u8", true, true},
    {1, 12, 5, 9, 16, 3, 2, 2, 0, "s8", false, false},
    {1, 8, 7, 5, 20, 3, 2, 3, 0},
    {1, 16, 5, 7, 16, 3, 1, 3, 0, "u8", false, true},
};

const Case kDepthwiseCases[] = {
    {1, 16, 9, 7, 16, 3, 1, 1, 0, "s32", false, false, true},
    {1, 20, 7, 9, 20, 3, 2, 2, 3, "s32", false, false, true},
    {2, 8, 5, 5, 8, 1, 1, 0, 0, "s32", false, false, true},
    {1, 32, 11, 9, 32, 3, 2, 1, 128, "u8", true, true, true},
    {1, 24, 6, 5, 24, 5, 1, 2, 9, "s8", false, false, true},
    {1, 40, 7, 7, 40, 3, 1, 1, 0, "u8", false, false, true},
    {1, 16, 7, 6, 16, 2, 2, 1, 0, "s32", false, false, true},
    {1, 24, 9, 8, 24, 4, 1, 1, 5, "u8", true, false, true},
    {1, 20, 8, 7, 20, 3, 1, 1, 200, "s32", false, false, true},
};

Task task_of(const Case& c, const TargetTraits& traits) {
  std::map<std::string, std::string> a = {{"N", std::to_string(c.n)},
                                          {"C", std::to_string(c.c)},
                                          {"H", std::to_string(c.h)},
                                          {"W", std::to_string(c.w)},
                                          {"K", std::to_string(c.k)},
                                          {"R", std::to_string(c.r)},
                                          {"S", std::to_string(c.r)},
                                          {"stride", std::to_string(c.stride)},
                                          {"pad", std::to_string(c.pad)},
                                          {"data_zero_point", std::to_string(c.zp)},
                                          {"out", c.out}};
  if (c.out != "s32") {
    a["scale"] = c.per_channel ? "per_channel" : "per_tensor";
    a["relu"] = c.relu ? "1" : "0";
  }
  if (!c.depthwise) return Task::create("conv2d_nchwc_u8s8s32", a, traits);
  a.erase("K");
  return Task::create("depthwise_conv2d_nchwc_u8s8s32", a, traits);
}

// Inputs in kernel ABI order (I, W, then bias, scale, zero_point when requantized).
std::vector<te::HostBuffer> inputs_of(const Task& task, const Case& c) {
  const ComputeDef def = task.template_def().compute(task.args());
  std::vector<te::HostBuffer> in;
  for (size_t i = 0; i + 1 < def.args.size(); ++i)
    in.emplace_back(def.args[i].shape(), def.args[i].dtype());
  in[0].fill_random(31, 0, 255);
  in[1].fill_random(32, -128, 127);
  if (in.size() > 2) {
    in[2].fill_random(33, -20000, 20000);
    in[3].fill_random(34, 0.0005, 0.004);
    in[4].set(0, c.out == "u8" ? 120 : -7);
  }
  return in;
}

struct Expected {
  std::vector<int64_t> value;
  std::vector<bool> near_half;  // float32 rounding of the requantize product may go either way
};

// The outputs [N][ceil(channels/16)][OH][OW][16] from each one's int64 accumulator
// acc_of(n, block, y, x, lane, inside) (inside(iy, ix): a tap not in the padding), requantized in
// double; lanes past `channels` zero.
template <typename AccOf>
Expected expected_outputs(const Case& c, int64_t channels, const std::vector<te::HostBuffer>& in,
                          AccOf acc_of) {
  const int64_t oh = (c.h + 2 * c.pad - c.r) / c.stride + 1;
  const int64_t ow = (c.w + 2 * c.pad - c.r) / c.stride + 1;
  const bool rq = c.out != "s32";
  const int64_t ozp = rq ? static_cast<int64_t>(in[4].get(0)) : 0;
  const auto inside = [&](int64_t iy, int64_t ix) {
    return iy >= 0 && iy < c.h && ix >= 0 && ix < c.w;
  };
  Expected e;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t b = 0; b < (channels + 15) / 16; ++b)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x)
          for (int64_t l = 0; l < 16; ++l) {
            const int64_t k = b * 16 + l;
            const int64_t acc = k < channels ? acc_of(n, b, y, x, l, inside) : 0;
            if (!rq || k >= channels) {
              e.value.push_back(acc);
              e.near_half.push_back(false);
              continue;
            }
            const testing::Requantized q =
                testing::requantize(acc, static_cast<int64_t>(in[2].get(k)),
                                    in[3].get(c.per_channel ? k : 0), ozp, c.out == "u8", c.relu);
            e.value.push_back(q.value);
            e.near_half.push_back(q.near_half);
          }
  return e;
}

// The convolution from the layouts' definitions.
Expected reference(const Case& c, int64_t icb, const std::vector<te::HostBuffer>& in) {
  const int64_t cb = c.c / icb;
  return expected_outputs(
      c, c.k, in, [&](int64_t n, int64_t ko, int64_t y, int64_t x, int64_t l, const auto& inside) {
        int64_t acc = 0;
        for (int64_t ch = 0; ch < c.c; ++ch)
          for (int64_t r = 0; r < c.r; ++r)
            for (int64_t s = 0; s < c.r; ++s) {
              const int64_t iy = y * c.stride + r - c.pad, ix = x * c.stride + s - c.pad;
              const int64_t i_at = (((n * cb + ch / icb) * c.h + iy) * c.w + ix) * icb + ch % icb;
              const int64_t d = inside(iy, ix) ? static_cast<int64_t>(in[0].get(i_at)) : c.zp;
              const int64_t w_at =
                  (((((ko * cb + ch / icb) * c.r + r) * c.r + s) * (icb / 4) + ch % icb / 4) * 16 +
                   l) *
                      4 +
                  ch % 4;
              acc += d * static_cast<int64_t>(in[1].get(w_at));
            }
        return acc;
      });
}

// The depthwise convolution from the layouts' definitions (16-channel blocks).
Expected depthwise_reference(const Case& c, const std::vector<te::HostBuffer>& in) {
  const int64_t cb = (c.c + 15) / 16;
  return expected_outputs(
      c, c.c, in, [&](int64_t n, int64_t b, int64_t y, int64_t x, int64_t l, const auto& inside) {
        int64_t acc = 0;
        for (int64_t r = 0; r < c.r; ++r)
          for (int64_t s = 0; s < c.r; ++s) {
            const int64_t iy = y * c.stride + r - c.pad, ix = x * c.stride + s - c.pad;
            const int64_t i_at = (((n * cb + b) * c.h + iy) * c.w + ix) * 16 + l;
            const int64_t d = inside(iy, ix) ? static_cast<int64_t>(in[0].get(i_at)) : c.zp;
            acc += d * static_cast<int64_t>(in[1].get(((b * c.r + r) * c.r + s) * 16 + l));
          }
        return acc;
      });
}

// Whether the space offers skip_taps 1.
bool can_skip(const Task& task) {
  const int64_t at = task.space().knob_position("skip_taps");
  return at >= 0 && task.space().knob_sizes()[at] == 2;
}

// cfg with skip_taps = v.
Config with_skip_taps(const Task& task, const Config& cfg, int64_t v) {
  return testing::with_knobs(task, cfg, {{"skip_taps", static_cast<uint64_t>(v)}});
}

// Whether the space offers dot_taps 1.
bool offers_dot_taps(const Task& task) {
  const int64_t at = task.space().knob_position("dot_taps");
  return at >= 0 && task.space().knob_sizes()[at] == 2;
}

// cfg with dot_taps = v (and with 1, unroll_s 0, which dot_taps 1 takes).
Config with_dot_taps(const Task& task, const Config& cfg, int64_t v) {
  if (v == 0) return testing::with_knobs(task, cfg, {{"dot_taps", 0}});
  return testing::with_knobs(task, cfg, {{"dot_taps", 1}, {"unroll_s", 0}});
}

// The fallback and three sampled configs, each with and without skip_taps and dot_taps where the
// space offers them.
std::vector<Config> configs_of(const Task& task) {
  std::vector<Config> configs = testing::fallback_and_sampled(task, 3, 9);
  if (can_skip(task))
    for (size_t i = 0, n = configs.size(); i < n; ++i)
      configs.push_back(with_skip_taps(task, configs[i], 1 - configs[i]["skip_taps"].as_int()));
  if (offers_dot_taps(task))
    for (size_t i = 0, n = configs.size(); i < n; ++i)
      configs.push_back(with_dot_taps(task, configs[i], 1 - configs[i]["dot_taps"].as_int()));
  return configs;
}

// Builds each config for `target` and checks its outputs against te's interpreter and the
// reference.
void check_configs(const Case& c, const Task& task, const codegen::Target& target,
                   const std::vector<Config>& configs) {
  const std::string what = target.str() + " " + task.workload_key();
  const std::vector<te::HostBuffer> in = inputs_of(task, c);
  const Expected want =
      c.depthwise ? depthwise_reference(c, in) : reference(c, task.args().get_int("ic_block"), in);
  const ComputeDef def = task.template_def().compute(task.args());
  std::vector<std::pair<te::Tensor, const te::HostBuffer*>> bound;
  for (size_t i = 0; i < in.size(); ++i) bound.emplace_back(def.args[i], &in[i]);
  const std::vector<te::HostBuffer> evaluated = te::evaluate(def.outputs, bound);
  const te::HostBuffer& interp = evaluated[0];
  ASSERT_EQ(static_cast<size_t>(interp.num_elements()), want.value.size()) << what;
  for (const Config& cfg : configs) {
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
        const int64_t got = static_cast<int64_t>(out.get(i));
        const std::string where =
            what + " " + cfg.to_json_string() + " element " + std::to_string(i);
        ASSERT_EQ(got, static_cast<int64_t>(interp.get(i))) << where << " (interpreter)";
        if (want.near_half[i])
          ASSERT_LE(std::abs(got - want.value[i]), 1) << where;
        else
          ASSERT_EQ(got, want.value[i]) << where;
      }
    }
  }
}

void check_case(const Case& c, const codegen::Target& target) {
  const Task task = task_of(c, testing::traits_of(target));
  check_configs(c, task, target, configs_of(task));
}

void check_target(const codegen::Target& target, bool expect_vnni) {
  ASSERT_EQ(testing::traits_of(target).int8_dot, expect_vnni) << target.str();
  for (const Case& c : kCases) check_case(c, target);
}

// dot_taps offered (and the fallback's) on an AVX-512 VNNI host for windows 2 to 4 wide, not on
// x86-64-v3.
TEST(DepthwiseNchwcInt8Test, HostAndX86V3AreExact) {
  for (const char* t : {"host", "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"}) {
    const codegen::Target target = codegen::Target::parse(t);
    const bool vnni = testing::traits_of(target).int8_dot_insn == "vpdpbusd";
    for (const Case& c : kDepthwiseCases) {
      const bool fits = c.r >= 2 && c.r <= 4;
      const Task task = task_of(c, testing::traits_of(target));
      EXPECT_EQ(offers_dot_taps(task), vnni && fits) << t;
      // The fallback runs a window row per vpdpbusd wherever the space offers it.
      EXPECT_EQ(task.fallback_config()["dot_taps"].as_int(), vnni && fits ? 1 : 0) << t;
      check_case(c, target);
    }
  }
}

// dot_taps is offered on AVX-512 VNNI alone, but its configs build for any target (a config tuned
// on one machine, built for another): dot_u8s8's rows form becomes widening code on AVX-512
// without VNNI (znver4 with it turned off; skylake-avx512, without VBMI's byte permute too) and
// on AVX2 (x86-64-v3), run where the host can, bit-exactly; vpdpbusd only where the target has it.
TEST(DepthwiseNchwcInt8Test, DotTapsWithoutVnniAreExact) {
  const codegen::Target vnni =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  const char* const others[] = {"llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mattr=-avx512vnni",
                                "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512",
                                "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"};
  size_t run = 0;
  for (const Case& c : kDepthwiseCases) {
    const Task task = task_of(c, testing::traits_of(vnni));
    if (!offers_dot_taps(task)) continue;
    std::vector<Config> dot;
    for (const Config& cfg : configs_of(task))
      if (cfg["dot_taps"].as_int() != 0) dot.push_back(cfg);
    ASSERT_GE(dot.size(), 4u) << task.workload_key();
    const Instantiated inst = task.instantiate(dot[0]);
    const te::LoweredFunc lowered = te::lower(inst.schedule, inst.args, "k");
    const std::string vnni_asm = codegen::emit_assembly(lowered, vnni);
    EXPECT_NE(vnni_asm.find("vpdpbusd"), std::string::npos) << task.workload_key();
    // A row's bytes are transposed by one vpermb of a masked 64-byte load, never byte by byte
    // (LLVM's lowering of a 48-byte shuffle).
    EXPECT_NE(vnni_asm.find("vpermb"), std::string::npos) << task.workload_key();
    EXPECT_EQ(vnni_asm.find("vpinsrb"), std::string::npos) << task.workload_key();
    for (const char* key : others) {
      const codegen::Target t = codegen::Target::parse(key);
      ASSERT_EQ(testing::traits_of(t).int8_dot_insn, "") << key;
      EXPECT_EQ(codegen::emit_assembly(lowered, t).find("vpdpbusd"), std::string::npos) << key;
      if (!t.is_host_compatible()) continue;
      check_configs(c, task, t, dot);
      run += dot.size();
    }
  }
  if (run == 0) GTEST_SKIP() << "the host runs none of the targets without VNNI";
}

TEST(DepthwiseNchwcInt8Test, LayoutsAndBadShapes) {
  const TargetTraits traits = testing::traits_of(codegen::Target::host());
  const Task t = task_of({1, 20, 9, 9, 20, 3, 1, 1, 0, "u8", true, false, true}, traits);
  EXPECT_EQ(t.workload_key(),
            "depthwise_conv2d_nchwc_u8s8s32(N=1,C=20,H=9,W=9,R=3,S=3,stride=1,pad=1,dilation=1,"
            "out=u8,scale=per_channel)");
  const ComputeDef def = t.template_def().compute(t.args());
  ASSERT_EQ(def.args.size(), 6u);
  EXPECT_EQ(def.args[0].shape(), (std::vector<int64_t>{1, 2, 9, 9, 16}));
  EXPECT_EQ(def.args[1].shape(), (std::vector<int64_t>{2, 3, 3, 16}));
  EXPECT_EQ(def.args[1].dtype(), te::Int(8));
  EXPECT_EQ(def.args[3].shape(), (std::vector<int64_t>{2, 16}));  // per-channel scale
  EXPECT_EQ(def.args[5].dtype(), te::UInt(8));
  const std::vector<std::map<std::string, std::string>> bad = {
      {{"C", "8"}, {"H", "2"}, {"W", "5"}},
      {{"C", "8"}, {"H", "5"}, {"W", "5"}, {"relu", "1"}},
      {{"C", "8"}, {"H", "5"}, {"W", "5"}, {"data_zero_point", "256"}}};
  testing::expect_invalid_workloads("depthwise_conv2d_nchwc_u8s8s32", bad, traits);
}

TEST(Conv2dNchwcInt8Test, TensorizedOnTheHostIsExact) {
  if (!testing::traits_of(codegen::Target::host()).int8_dot)
    GTEST_SKIP() << "the host has no AVX-512 VNNI";
  check_target(codegen::Target::host(), true);
}

TEST(Conv2dNchwcInt8Test, WideningFallbackOnX86V3IsExact) {
  check_target(codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"), false);
}

// The dots te's interpreter runs: with skip_taps one per input channel group, output channel
// block and tap inside the input (the reference's count), without it one per tap; outputs equal.
TEST(Conv2dNchwcInt8Test, SkipTapsRunsOneDotPerTapInside) {
  const codegen::Target vnni =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  int checked = 0;
  for (const Case& c : kCases) {
    const Task task = task_of(c, testing::traits_of(vnni));
    const std::string what = task.workload_key();
    ASSERT_EQ(can_skip(task), c.pad > 0 && c.zp == 0) << what;
    if (!can_skip(task)) continue;
    const int64_t oh = (c.h + 2 * c.pad - c.r) / c.stride + 1;
    const int64_t ow = (c.w + 2 * c.pad - c.r) / c.stride + 1;
    int64_t inside = 0;
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t r = 0; r < c.r; ++r)
          for (int64_t s = 0; s < c.r; ++s) {
            const int64_t iy = y * c.stride + r - c.pad, ix = x * c.stride + s - c.pad;
            inside += iy >= 0 && iy < c.h && ix >= 0 && ix < c.w;
          }
    const int64_t per_tap = c.n * ((c.k + 15) / 16) * (c.c / 4);
    const std::vector<te::HostBuffer> in = inputs_of(task, c);
    const std::vector<Config> configs = testing::fallback_and_sampled(task, 4, 11);
    for (const Config& base : configs) {
      std::vector<te::HostBuffer> outs;
      for (int64_t skip : {0, 1}) {
        const Config cfg = with_skip_taps(task, base, skip);
        const Instantiated inst = task.instantiate(cfg);
        std::vector<te::HostBuffer> bufs;
        for (const auto& b : in) {
          bufs.emplace_back(b.shape(), b.dtype());
          std::memcpy(bufs.back().data(), b.data(), b.bytes());
        }
        const te::Tensor& o = inst.args.back();
        bufs.emplace_back(o.shape(), o.dtype());
        std::memset(bufs.back().data(), 0x5A, bufs.back().bytes());
        std::vector<te::HostBuffer*> ptrs;
        for (auto& b : bufs) ptrs.push_back(&b);
        te::InterpretCounts counts;
        te::interpret(te::lower(inst.schedule, inst.args, "k"), ptrs, &counts);
        EXPECT_EQ(counts.dot_calls, per_tap * (skip ? inside : oh * ow * c.r * c.r))
            << what << " " << cfg.to_json_string();
        outs.push_back(std::move(bufs.back()));
      }
      ASSERT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].bytes()), 0)
          << what << " " << base.to_json_string();
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

// Counts the unswitched nests: if (test) {dots, no guard} else {guarded dots}.
class UnswitchCount : public te::IRVisitor {
 public:
  int unguarded = 0;
  int guards = 0;

 protected:
  void visit(const te::IfThenElse* op) override {
    ++guards;
    if (op->else_case.defined()) {
      UnswitchCount then;
      then.visit_stmt(op->then_case);
      if (then.guards == 0 && then.dots > 0) ++unguarded;
    }
    te::IRVisitor::visit(op);
  }
  void visit(const te::Call* op) override {
    dots += op->op == te::CallOp::kDotU8S8;
    te::IRVisitor::visit(op);
  }

 private:
  int dots = 0;
};

// With skip_taps the tiles of a 28 x 28 output whose taps are all inside run their dots without a
// guard; without it no dot is guarded. (The fallback's tiles are 7 columns wide: on a 14-wide
// output each of them touches a border, so none runs unguarded.)
TEST(Conv2dNchwcInt8Test, SkipTapsRunsInteriorTilesUnguarded) {
  const codegen::Target vnni =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  const Task task = task_of({1, 16, 28, 28, 32, 3, 1, 1, 0}, testing::traits_of(vnni));
  for (int64_t skip : {0, 1}) {
    const Instantiated inst = task.instantiate(with_skip_taps(task, task.fallback_config(), skip));
    te::Stmt after;
    te::LowerOptions o;
    o.on_pass = [&](const std::string& pass, const te::Stmt& s) {
      if (pass == "tensorize" || pass == "skip_padding_taps") after = s;
    };
    te::lower(inst.schedule, inst.args, "k", o);
    UnswitchCount n;
    n.visit_stmt(after);
    EXPECT_EQ(n.unguarded, skip) << to_string(after);
    if (!skip) {
      EXPECT_EQ(n.guards, 0) << to_string(after);
    }
  }
}

TEST(Conv2dNchwcInt8Test, ObjectHoldsVpdpbusdOnlyWithVnni) {
  const auto asm_of = [](const codegen::Target& target) {
    const Task task = task_of({1, 64, 14, 14, 64, 3, 1, 1, 0}, testing::traits_of(target));
    const Instantiated inst = task.instantiate(task.fallback_config());
    return codegen::emit_assembly(te::lower(inst.schedule, inst.args, "k"), target);
  };
  const std::string vnni =
      asm_of(codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"));
  EXPECT_NE(vnni.find("vpdpbusd"), std::string::npos);
  const std::string v3 =
      asm_of(codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"));
  EXPECT_EQ(v3.find("vpdpbusd"), std::string::npos);
}

TEST(Conv2dNchwcInt8Test, BlocksAndKeys) {
  const TargetTraits traits = testing::traits_of(codegen::Target::host());
  const Task t = task_of({1, 24, 9, 9, 20, 3, 1, 1, 0}, traits);
  EXPECT_EQ(t.args().get_int("ic_block"), 8);  // the largest of 16, 8, 4 dividing 24
  EXPECT_EQ(t.workload_key(),
            "conv2d_nchwc_u8s8s32(N=1,C=24,H=9,W=9,K=20,R=3,S=3,stride=1,pad=1,ic_block=8)");
  const ComputeDef def = t.template_def().compute(t.args());
  ASSERT_EQ(def.args.size(), 3u);
  EXPECT_EQ(def.args[1].shape(), (std::vector<int64_t>{2, 3, 3, 3, 2, 16, 4}));
  EXPECT_EQ(def.args[2].shape(), (std::vector<int64_t>{1, 2, 9, 9, 16}));
  EXPECT_EQ(def.args[2].dtype(), te::Int(32));
  const Task q = task_of({1, 8, 5, 5, 16, 3, 1, 1, 5, "u8", true, false}, traits);
  const ComputeDef qd = q.template_def().compute(q.args());
  ASSERT_EQ(qd.args.size(), 6u);
  EXPECT_EQ(qd.args[3].shape(), (std::vector<int64_t>{1, 16}));  // per-channel scale
  EXPECT_EQ(qd.args[5].dtype(), te::UInt(8));
}

TEST(Conv2dNchwcInt8Test, BadShapesAreInvalidArguments) {
  const TargetTraits traits = testing::traits_of(codegen::Target::host());
  const std::vector<std::map<std::string, std::string>> bad = {
      {{"C", "6"}, {"H", "5"}, {"W", "5"}, {"K", "16"}},
      {{"C", "24"}, {"H", "5"}, {"W", "5"}, {"K", "16"}, {"ic_block", "16"}},
      {{"C", "8"}, {"H", "5"}, {"W", "5"}, {"K", "16"}, {"ic_block", "6"}},
      {{"C", "8"}, {"H", "5"}, {"W", "5"}, {"K", "16"}, {"relu", "1"}},
      {{"C", "8"}, {"H", "2"}, {"W", "5"}, {"K", "16"}}};
  testing::expect_invalid_workloads("conv2d_nchwc_u8s8s32", bad, traits);
}

}  // namespace
}  // namespace ktune::schedule_space
