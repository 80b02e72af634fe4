// Tests depthwise_conv2d_nchwc_u8s8s32 with weights=s16, the int16 weights of a depthwise conv
// whose uint8 weights less their zero point are past int8: its workload key (the default's
// unchanged), no dot_taps, shift_data refused; its kernels on odd shapes (C not a multiple of the
// 16-channel block, stride 2, pads, data zero points, windows 1 to 5) with weights w - z_w over
// [-255, 255] (z_w per channel) on the host (AVX-512 VNNI) and x86-64-v3: the int32 accumulators
// bit-exactly against a plain C++ depthwise convolution and te's interpreter, the requantized
// outputs against nearbyint in double (within one step only where float32's product may round a
// half the other way), outputs pre-filled with a byte pattern; and the fallback's multiply-adds
// as many as with int8 weights.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "schedule_space/task.h"
#include "support/error.h"
#include "tests/schedule_space/reference_util.h"
#include "tests/schedule_space/template_cases.h"

namespace ktune::schedule_space {
namespace {

constexpr const char* kName = "depthwise_conv2d_nchwc_u8s8s32";
const char* const kZen4 = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
const char* const kX86V3 = "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3";

struct Case {
  int64_t n, c, h, w, r, stride, pad, zp;  // zp: the data's zero point (the padding value)
  std::string out = "s32";                 // s32 | u8 | s8
  bool per_channel = false, relu = false;
};

const Case kCases[] = {
    {1, 24, 9, 7, 3, 1, 1, 122},     {1, 20, 7, 9, 3, 2, 2, 3},
    {2, 8, 5, 5, 1, 1, 0, 0},        {1, 32, 11, 9, 3, 2, 1, 128, "u8", true, true},
    {1, 24, 6, 5, 5, 1, 2, 9, "s8"}, {1, 40, 7, 7, 3, 1, 1, 0, "u8"},
    {1, 16, 7, 6, 2, 2, 1, 0},       {1, 24, 9, 8, 4, 1, 1, 5, "u8", true},
};

std::map<std::string, std::string> args_of(const Case& c) {
  std::map<std::string, std::string> a = {{"N", std::to_string(c.n)},
                                          {"C", std::to_string(c.c)},
                                          {"H", std::to_string(c.h)},
                                          {"W", std::to_string(c.w)},
                                          {"R", std::to_string(c.r)},
                                          {"S", std::to_string(c.r)},
                                          {"stride", std::to_string(c.stride)},
                                          {"pad", std::to_string(c.pad)},
                                          {"data_zero_point", std::to_string(c.zp)},
                                          {"out", c.out},
                                          {"weights", "s16"}};
  if (c.out != "s32") {
    a["scale"] = c.per_channel ? "per_channel" : "per_tensor";
    a["relu"] = c.relu ? "1" : "0";
  }
  return a;
}

// The inputs in kernel ABI order (I, W, then bias, scale, zero_point when requantized) and te's
// interpreter's output. W holds u - z_w[channel] of uint8 u with zero points spread over
// [0, 255] by channel, its first two values 255 and -255 (u 255 of zero point 0, u 0 of 255).
testing::Reference reference_of(const Task& task, const Case& c) {
  const ComputeDef def = task.template_def().compute(task.args());
  testing::Reference ref;
  std::vector<te::HostBuffer>& in = ref.inputs;
  for (size_t i = 0; i + 1 < def.args.size(); ++i)
    in.emplace_back(def.args[i].shape(), def.args[i].dtype());
  in[0].fill_random(41, 0, 255);
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> u8(0, 255);
  for (int64_t i = 0; i < in[1].num_elements(); ++i)
    in[1].set(i, u8(rng) - ((i / (c.r * c.r * 16) * 16 + i % 16) * 53 + 7) % 256);
  in[1].set(0, 255);
  in[1].set(1, -255);
  if (in.size() > 2) {
    in[2].fill_random(43, -20000, 20000);
    in[3].fill_random(44, 0.0005, 0.004);
    in[4].set(0, c.out == "u8" ? 120 : -7);
  }
  std::vector<std::pair<te::Tensor, const te::HostBuffer*>> bound;
  for (size_t i = 0; i < in.size(); ++i) bound.emplace_back(def.args[i], &in[i]);
  ref.outputs = te::evaluate(def.outputs, bound);
  ref.output_tensors = def.outputs;
  return ref;
}

struct Expected {
  std::vector<int64_t> value;
  std::vector<bool> near_half;  // float32 rounding of the requantize product may go either way
};

// The outputs [N][ceil(C/16)][OH][OW][16] from the layouts' definitions: int64 accumulators,
// requantized in double; lanes past C zero.
Expected expected_of(const Case& c, const std::vector<te::HostBuffer>& in) {
  const int64_t oh = (c.h + 2 * c.pad - c.r) / c.stride + 1;
  const int64_t ow = (c.w + 2 * c.pad - c.r) / c.stride + 1;
  const int64_t cb = (c.c + 15) / 16;
  Expected e;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t b = 0; b < cb; ++b)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x)
          for (int64_t l = 0; l < 16; ++l) {
            const int64_t k = b * 16 + l;
            int64_t acc = 0;
            for (int64_t r = 0; r < c.r && k < c.c; ++r)
              for (int64_t s = 0; s < c.r; ++s) {
                const int64_t iy = y * c.stride + r - c.pad, ix = x * c.stride + s - c.pad;
                const bool inside = iy >= 0 && iy < c.h && ix >= 0 && ix < c.w;
                const int64_t at = (((n * cb + b) * c.h + iy) * c.w + ix) * 16 + l;
                const int64_t d = inside ? static_cast<int64_t>(in[0].get(at)) : c.zp;
                acc += d * static_cast<int64_t>(in[1].get(((b * c.r + r) * c.r + s) * 16 + l));
              }
            testing::Requantized q{acc, false};
            if (c.out != "s32" && k < c.c)
              q = testing::requantize(acc, static_cast<int64_t>(in[2].get(k)),
                                      in[3].get(c.per_channel ? k : 0),
                                      static_cast<int64_t>(in[4].get(0)), c.out == "u8", c.relu);
            e.value.push_back(q.value);
            e.near_half.push_back(q.near_half);
          }
  return e;
}

// The fallback and three sampled configs built for `target`, each run (1 and 2 threads) against
// te's interpreter and the plain convolution.
void check_case(const Case& c, const codegen::Target& target) {
  const Task task = Task::create(kName, args_of(c), testing::traits_of(target));
  const testing::Reference ref = reference_of(task, c);
  const Expected want = expected_of(c, ref.inputs);
  ASSERT_EQ(static_cast<size_t>(ref.outputs[0].num_elements()), want.value.size());
  const std::vector<Config> configs = testing::fallback_and_sampled(task, 3, 7);
  for (const Config& cfg : configs)
    testing::run_on_host(task, cfg, target, ref, [&](const std::vector<te::HostBuffer>& bufs) {
      const te::HostBuffer& out = bufs.back();
      for (int64_t i = 0; i < out.num_elements(); ++i) {
        const int64_t got = static_cast<int64_t>(out.get(i));
        const std::string where = target.str() + " " + task.workload_key() + " " +
                                  cfg.to_json_string() + " element " + std::to_string(i);
        ASSERT_EQ(got, static_cast<int64_t>(ref.outputs[0].get(i))) << where << " (interpreter)";
        if (want.near_half[i])
          ASSERT_LE(std::abs(got - want.value[i]), 1) << where;
        else
          ASSERT_EQ(got, want.value[i]) << where;
      }
    });
}

TEST(DepthwiseInt16Weights, HostAndX86V3AreExact) {
  int run = 0;
  for (const char* key : {"host", kX86V3}) {
    const codegen::Target target = codegen::Target::parse(key);
    if (!target.is_host_compatible()) continue;
    for (const Case& c : kCases) check_case(c, target);
    ++run;
  }
  ASSERT_GE(run, 1);
}

// The default (int8 weights) keeps its key and its int8 W; weights=s16 is in the key, W int16.
TEST(DepthwiseInt16Weights, KeyAndWeightType) {
  std::map<std::string, std::string> a = args_of(kCases[3]);
  const TargetTraits traits = testing::traits_of(codegen::Target::parse(kZen4));
  const Task wide = Task::create(kName, a, traits);
  EXPECT_EQ(wide.workload_key(),
            "depthwise_conv2d_nchwc_u8s8s32(N=1,C=32,H=11,W=9,R=3,S=3,stride=2,pad=1,dilation=1,"
            "data_zero_point=128,out=u8,scale=per_channel,relu=1,weights=s16)");
  EXPECT_EQ(wide.template_def().compute(wide.args()).args[1].dtype(), te::Int(16));
  a.erase("weights");
  const Task plain = Task::create(kName, a, traits);
  EXPECT_EQ(plain.workload_key(),
            "depthwise_conv2d_nchwc_u8s8s32(N=1,C=32,H=11,W=9,R=3,S=3,stride=2,pad=1,dilation=1,"
            "data_zero_point=128,out=u8,scale=per_channel,relu=1)");
  EXPECT_EQ(plain.template_def().compute(plain.args()).args[1].dtype(), te::Int(8));
  a["weights"] = "s8";
  EXPECT_EQ(Task::create(kName, a, traits).workload_key(), plain.workload_key());
}

// dot_taps multiplies int8 weights: not offered with weights=s16 (where the int8 weights' space
// offers it), and a config that sets it does not instantiate. shift_data serves sdot alone:
// refused with weights=s16, as is a weight type other than s8 and s16.
TEST(DepthwiseInt16Weights, NoDotTapsNoShiftData) {
  std::map<std::string, std::string> a = args_of(kCases[0]);  // a 3-wide window: a row per dot
  const TargetTraits traits = testing::traits_of(codegen::Target::parse(kZen4));
  const Task wide = Task::create(kName, a, traits);
  const int64_t at = wide.space().knob_position("dot_taps");
  ASSERT_GE(at, 0);
  EXPECT_EQ(wide.space().knob_sizes()[at], 1u);
  a.erase("weights");
  const Task plain = Task::create(kName, a, traits);
  EXPECT_EQ(plain.space().knob_sizes()[at], 2u);
  try {
    wide.instantiate(
        testing::with_knobs(plain, plain.fallback_config(), {{"dot_taps", 1}, {"unroll_s", 0}}));
    ADD_FAILURE() << "instantiated dot_taps 1 with weights=s16";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInstantiation) << e.what();
    EXPECT_NE(std::string(e.what()).find("weights=s16"), std::string::npos) << e.what();
  }
  std::map<std::string, std::string> shifted = args_of(kCases[0]), other = shifted;
  shifted["shift_data"] = "1";
  other["weights"] = "s32";
  testing::expect_invalid_workloads(kName, {shifted, other}, traits);
}

// How many times `insn` opens an instruction of the assembly `text`.
int count(const std::string& text, const std::string& insn) {
  int n = 0;
  for (size_t at = text.find('\t' + insn); at != std::string::npos;
       at = text.find('\t' + insn, at + 1))
    ++n;
  return n;
}

// The assembly of template `tmpl`'s workload `args` for target `key` under the config of
// `config_json` (its knobs' values, re-indexed in this workload's space).
std::string assembly_of(const std::string& tmpl, const std::map<std::string, std::string>& args,
                        const std::string& key, const nlohmann::json& config_json) {
  const codegen::Target target = codegen::Target::parse(key);
  const Task task = Task::create(tmpl, args, testing::traits_of(target));
  const auto& space = task.space();
  const Instantiated inst =
      task.instantiate(space.get(space.index_of(Config::from_json(config_json))));
  return codegen::emit_assembly(te::lower(inst.schedule, inst.args, "k"), target);
}

// int16 weights cost only their bytes: the fallback's widening multiply-adds (vpdpwssd with VNNI,
// vpmaddwd on AVX2) are as many as with int8 weights in the same widening config (their own
// fallback takes dot_taps where offered), whose vpmovsxbd loads become vpmovsxwd; no vpdpbusd.
TEST(DepthwiseInt16Weights, SameMultiplyAddsAsInt8Weights) {
  std::map<std::string, std::string> a = {{"C", "32"},
                                          {"H", "14"},
                                          {"W", "14"},
                                          {"pad", "1"},
                                          {"out", "u8"},
                                          {"scale", "per_channel"},
                                          {"data_zero_point", "3"}};
  for (const auto& [key, insn] :
       std::map<std::string, std::string>{{kZen4, "vpdpwssd"}, {kX86V3, "vpmaddwd"}}) {
    a["weights"] = "s16";
    const std::string wide = testing::fallback_assembly(kName, a, key);
    const Task wide_task = Task::create(kName, a, testing::traits_of(codegen::Target::parse(key)));
    a["weights"] = "s8";
    const std::string plain = assembly_of(kName, a, key, wide_task.fallback_config().to_json());
    EXPECT_GT(count(wide, insn), 0) << key;
    EXPECT_EQ(count(wide, insn), count(plain, insn)) << key;
    EXPECT_GT(count(wide, "vpmovsxwd"), 0) << key;
    EXPECT_EQ(count(wide, "vpmovsxbd"), 0) << key;
    EXPECT_EQ(count(wide, "vpdpbusd"), 0) << key;
  }
}

}  // namespace
}  // namespace ktune::schedule_space
