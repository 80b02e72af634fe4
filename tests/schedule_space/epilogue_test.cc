// Epilogues shared by the templates: names, arguments and workload keys (the keys of the epilogues
// logged before the shared definition stay the same), and the numbers of every step in kernels
// of conv2d_nchwc, depthwise_conv2d_nchwc, matmul and dense_bias_relu built for the host, against
// plain C++ loops written here (not the templates' compute).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "schedule_space/templates/epilogue.h"
#include "support/error.h"
#include "te/host_buffer.h"
#include "te/lower.h"

namespace ktune::schedule_space {
namespace {

using Args = std::map<std::string, std::string>;
using templates::Activation;
using templates::Epilogue;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
// float32 sums of at most 45 products of values in [-1, 1], then the activation (erf's
// approximation is within 1.5e-7): relative to max(1, |expected|).
constexpr double kTolerance = 1e-4;

TargetTraits avx512() {
  TargetTraits t;
  t.key = "test-avx512";
  t.vector_bits = 512;
  t.cores = 1;
  return t;
}

std::string key_of(const std::string& tmpl, const Args& args) {
  return Task::create(tmpl, args, avx512()).workload_key();
}

ErrorKind create_error(const std::string& tmpl, const Args& args) {
  try {
    Task::create(tmpl, args, avx512());
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kUnknown;
}

TEST(Epilogue, NamesParseBackAndKeepTheirMeaning) {
  for (const auto& name : templates::epilogue_choices({}))
    EXPECT_EQ(templates::parse_epilogue(name).name(), name);
  // 6 prefixes (none, bias, add, max, bias_add, bias_max) x 11 activations (none included), less
  // the empty one, and "none".
  EXPECT_EQ(templates::epilogue_choices({}).size(), 66u);
  EXPECT_EQ(templates::epilogue_choices({.none = false}).size(), 33u);
  const Epilogue br = templates::parse_epilogue("bias_relu");
  EXPECT_TRUE(br.bias && !br.residual && br.activation == Activation::kRelu);
  const Epilogue bar = templates::parse_epilogue("bias_add_relu");
  EXPECT_TRUE(bar.bias && bar.residual && bar.activation == Activation::kRelu);
  const Epilogue bm = templates::parse_epilogue("bias_max_relu");
  EXPECT_TRUE(bm.bias && bm.residual && bm.residual_max && bm.activation == Activation::kRelu);
  EXPECT_FALSE(bar.residual_max);
  const Epilogue b = templates::parse_epilogue("bias");
  EXPECT_TRUE(b.bias && !b.residual && b.activation == Activation::kNone);
  EXPECT_EQ(templates::parse_epilogue("bias_gelu").activation, Activation::kGelu);
  EXPECT_EQ(templates::parse_epilogue("add_gelu_erf").activation, Activation::kGeluErf);
  EXPECT_EQ(templates::parse_epilogue("bias_leaky_relu").activation, Activation::kLeakyRelu);
  EXPECT_EQ(templates::parse_epilogue("hardsigmoid").activation, Activation::kHardSigmoid);
  EXPECT_TRUE(templates::parse_epilogue("none").empty());
  for (const char* bad : {"", "relu_bias", "bias_bias", "add_bias", "bias_relu_relu", "gelu_tanh",
                          "bias_", "add_max", "max_add", "max_bias"}) {
    try {
      templates::parse_epilogue(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << bad;
    }
  }
}

// Keys logged before the shared definition import unchanged: the epilogue where it was, and no
// clip bounds unless given.
TEST(Epilogue, OldKeysAndFlopsAreUnchanged) {
  EXPECT_EQ(key_of("matmul", {{"M", "1"}, {"N", "7"}, {"K", "3"}, {"epilogue", "bias_gelu"}}),
            "matmul(M=1,N=7,K=3,layout=nn,epilogue=bias_gelu,dtype=float32)");
  EXPECT_EQ(key_of("matmul", {{"M", "4"}, {"N", "8"}, {"K", "12"}}),
            "matmul(M=4,N=8,K=12,layout=nn,dtype=float32)");
  EXPECT_EQ(key_of("dense_bias_relu", {{"M", "1"}, {"N", "32"}, {"K", "64"}}),
            "dense_bias_relu(M=1,N=32,K=64,dtype=float32)");
  EXPECT_EQ(key_of("dense_bias_relu", {{"M", "1"}, {"N", "32"}, {"K", "64"}, {"epilogue", "bias"}}),
            "dense_bias_relu(M=1,N=32,K=64,epilogue=bias,dtype=float32)");
  EXPECT_EQ(key_of("conv2d_nchwc", {{"C", "64"},
                                    {"H", "56"},
                                    {"W", "56"},
                                    {"K", "64"},
                                    {"pad", "1"},
                                    {"epilogue", "bias_add_relu"}}),
            "conv2d_nchwc(N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,dilation=1,ic_block=16,oc_"
            "block=16,"
            "epilogue=bias_add_relu,dtype=float32)");
  EXPECT_EQ(key_of("depthwise_conv2d_nchwc", {{"C", "32"}, {"H", "8"}, {"W", "8"}, {"pad", "1"}}),
            "depthwise_conv2d_nchwc(N=1,C=32,H=8,W=8,R=3,S=3,stride=1,pad=1,dilation=1,block=16,"
            "dtype=float32)");
  const Task conv = Task::create(
      "conv2d_nchwc", {{"C", "8"}, {"H", "5"}, {"W", "5"}, {"K", "4"}, {"epilogue", "bias_relu"}},
      avx512());
  EXPECT_DOUBLE_EQ(conv.flop(), 4.0 * 3 * 3 * (2.0 * 8 * 9 + 2));
  const Task gelu = Task::create(
      "matmul", {{"M", "2"}, {"N", "3"}, {"K", "5"}, {"epilogue", "bias_gelu"}}, avx512());
  EXPECT_DOUBLE_EQ(gelu.flop(), 6.0 * (2.0 * 5 + 9));
}

TEST(Epilogue, ClipBoundsAreCanonicalAndChecked) {
  const Args base = {{"C", "8"}, {"H", "6"}, {"W", "6"}, {"pad", "1"}};
  auto with = [&](Args extra) {
    Args a = base;
    a.insert(extra.begin(), extra.end());
    return a;
  };
  EXPECT_EQ(key_of("depthwise_conv2d_nchwc",
                   with({{"epilogue", "bias_clip"}, {"clip_min", "-1.50"}, {"clip_max", "6.0"}})),
            "depthwise_conv2d_nchwc(N=1,C=8,H=6,W=6,R=3,S=3,stride=1,pad=1,dilation=1,block=8,"
            "epilogue=bias_clip,"
            "clip_min=-1.5,clip_max=6,dtype=float32)");
  // An unbounded side is the default, left out of the key.
  EXPECT_EQ(key_of("matmul",
                   {{"M", "2"}, {"N", "3"}, {"K", "4"}, {"epilogue", "clip"}, {"clip_max", "1e0"}}),
            "matmul(M=2,N=3,K=4,layout=nn,epilogue=clip,clip_max=1,dtype=float32)");
  EXPECT_EQ(create_error("depthwise_conv2d_nchwc",
                         with({{"epilogue", "bias_clip"}, {"clip_min", "abc"}})),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error("depthwise_conv2d_nchwc",
                         with({{"epilogue", "bias_clip"}, {"clip_max", "nan"}})),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error("depthwise_conv2d_nchwc",
                         with({{"epilogue", "clip"}, {"clip_min", "1"}, {"clip_max", "0"}})),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(
      create_error("depthwise_conv2d_nchwc", with({{"epilogue", "bias_relu6"}, {"clip_max", "6"}})),
      ErrorKind::kInvalidArgument);
  EXPECT_EQ(
      create_error("dense_bias_relu", {{"M", "1"}, {"N", "3"}, {"K", "4"}, {"epilogue", "relu"}}),
      ErrorKind::kInvalidArgument);  // dense always adds its bias
  EXPECT_EQ(create_error("depthwise_conv2d_nchwc",
                         with({{"epilogue", "bias_clip"}, {"clip_min", "-inf"}})),
            ErrorKind::kUnknown);
}

// leaky_relu's and hardsigmoid's parameters: canonical, left out of the key at ONNX's defaults,
// refused on another activation or when not a finite number.
TEST(Epilogue, ActivationParametersAreCanonicalAndChecked) {
  const Args conv = {{"C", "8"}, {"H", "6"}, {"W", "6"}, {"K", "8"}, {"pad", "1"}};
  auto with = [&](Args extra) {
    Args a = conv;
    a.insert(extra.begin(), extra.end());
    return a;
  };
  const std::string head =
      "conv2d_nchwc(N=1,C=8,H=6,W=6,K=8,R=3,S=3,stride=1,pad=1,dilation=1,ic_block=8,oc_block=8,";
  EXPECT_EQ(key_of("conv2d_nchwc", with({{"epilogue", "bias_leaky_relu"}})),
            head + "epilogue=bias_leaky_relu,dtype=float32)");
  EXPECT_EQ(
      key_of("conv2d_nchwc", with({{"epilogue", "bias_leaky_relu"}, {"leaky_alpha", "1e-2"}})),
      head + "epilogue=bias_leaky_relu,dtype=float32)");
  EXPECT_EQ(
      key_of("conv2d_nchwc", with({{"epilogue", "bias_leaky_relu"}, {"leaky_alpha", "0.10"}})),
      head + "epilogue=bias_leaky_relu,leaky_alpha=0.1,dtype=float32)");
  EXPECT_EQ(key_of("conv2d_nchwc", with({{"epilogue", "hardsigmoid"},
                                         {"hardsigmoid_alpha", "0.16666666666666666"},
                                         {"hardsigmoid_beta", "0.5"}})),
            head + "epilogue=hardsigmoid,hardsigmoid_alpha=0.16666666666666666,dtype=float32)");
  EXPECT_EQ(create_error("conv2d_nchwc", with({{"epilogue", "bias_relu"}, {"leaky_alpha", "0.1"}})),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error("conv2d_nchwc",
                         with({{"epilogue", "bias_leaky_relu"}, {"hardsigmoid_beta", "0.1"}})),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(
      create_error("conv2d_nchwc", with({{"epilogue", "bias_leaky_relu"}, {"leaky_alpha", "inf"}})),
      ErrorKind::kInvalidArgument);
  EXPECT_EQ(
      create_error("conv2d_nchwc", with({{"epilogue", "hardsigmoid"}, {"hardsigmoid_alpha", "x"}})),
      ErrorKind::kInvalidArgument);
  // What a model build reads back from the fuser's arguments.
  const Epilogue e = templates::epilogue_of(
      "bias_hardsigmoid", {{"hardsigmoid_alpha", "0.25"}, {"leaky_alpha", "0.5"}});
  EXPECT_EQ(e.hardsigmoid_alpha, 0.25);
  EXPECT_EQ(e.hardsigmoid_beta, 0.5);
  EXPECT_EQ(e.leaky_alpha, 0.01);  // another activation's parameter is not read
  EXPECT_EQ(templates::activation_args(e), (Args{{"hardsigmoid_alpha", "0.25"}}));
}

// ----- numbers --------------------------------------------------------------------------------

struct EpilogueCase {
  std::string name;
  Args params;  // the activation's parameters given (clip_min, leaky_alpha, ...)
};

const std::vector<EpilogueCase>& epilogue_cases() {
  static const std::vector<EpilogueCase> cases = {
      {"none", {}},
      {"bias", {}},
      {"relu", {}},
      {"add", {}},
      {"bias_relu", {}},
      {"bias_relu6", {}},
      {"bias_clip", {{"clip_min", "-0.25"}, {"clip_max", "0.5"}}},
      {"bias_clip", {{"clip_max", "0.75"}}},
      {"bias_add_relu", {}},
      {"bias_max", {}},
      {"max_relu", {}},
      {"bias_hardswish", {}},
      {"bias_add_hardswish", {}},
      {"bias_silu", {}},
      {"bias_gelu", {}},
      {"bias_gelu_erf", {}},
      {"add_silu", {}},
      {"bias_sigmoid", {}},
      {"bias_leaky_relu", {}},
      {"bias_add_leaky_relu", {{"leaky_alpha", "0.3"}}},
      {"bias_hardsigmoid", {}},
      {"add_hardsigmoid", {{"hardsigmoid_alpha", "0.4"}, {"hardsigmoid_beta", "0.25"}}}};
  return cases;
}

// The steps of an epilogue name, read here independently of the library.
struct Steps {
  bool bias, residual, residual_max;
  std::string activation;  // "" or the last step
  Args params;
};

Steps steps_of(const EpilogueCase& e) {
  Steps s{};
  std::string rest = e.name == "none" ? "" : e.name;
  auto take = [&](const std::string& p) {
    if (rest == p || rest.rfind(p + "_", 0) == 0) {
      rest = rest.size() == p.size() ? "" : rest.substr(p.size() + 1);
      return true;
    }
    return false;
  };
  s.bias = take("bias");
  s.residual = take("add");
  if (!s.residual) s.residual = s.residual_max = take("max");
  s.activation = rest;
  s.params = e.params;
  return s;
}

double activate(const Steps& s, double v) {
  const std::string& a = s.activation;
  // A parameter given, else ONNX's default.
  auto param = [&](const char* name, double onnx_default) {
    auto it = s.params.find(name);
    return it == s.params.end() ? onnx_default : std::stod(it->second);
  };
  if (a.empty()) return v;
  if (a == "relu") return std::max(v, 0.0);
  if (a == "relu6") return std::min(std::max(v, 0.0), 6.0);
  if (a == "clip")
    return std::min(std::max(v, param("clip_min", -INFINITY)), param("clip_max", INFINITY));
  if (a == "hardswish") return v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0;
  if (a == "silu") return v / (1.0 + std::exp(-v));
  if (a == "gelu")
    return 0.5 * v *
           (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
  if (a == "gelu_erf") return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  if (a == "sigmoid") return 1.0 / (1.0 + std::exp(-v));
  if (a == "leaky_relu") return v < 0 ? param("leaky_alpha", 0.01) * v : v;
  if (a == "hardsigmoid")
    return std::clamp(param("hardsigmoid_alpha", 0.2) * v + param("hardsigmoid_beta", 0.5), 0.0,
                      1.0);
  ADD_FAILURE() << "unknown activation " << a;
  return kNan;
}

// A task's argument buffers (inputs filled, padding lanes NaN or zero) and the expected output.
struct Prepared {
  std::vector<te::HostBuffer> bufs;  // the task's argument order, the output last
  std::vector<double> expect;        // per element of the output buffer
};

// The buffers of a task's arguments, every element `fill`.
std::vector<te::HostBuffer> buffers_of(const Task& task, double fill) {
  std::vector<te::HostBuffer> bufs;
  for (const auto& t : task.template_def().compute(task.args()).args) {
    bufs.emplace_back(t.shape(), t.dtype());
    for (int64_t i = 0; i < bufs.back().num_elements(); ++i) bufs.back().set(i, fill);
  }
  return bufs;
}

// Random logical values in [-1, 1].
std::vector<double> random_values(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

// Fills the bias and residual buffers (after the first `inputs` arguments) from logical values:
// bias_at(k) and out_at(element) give their buffer positions.
void fill_epilogue(Prepared& p, const Steps& s, size_t inputs, const std::vector<double>& bias,
                   const std::vector<double>& res, const std::function<int64_t(int64_t)>& bias_at,
                   const std::function<int64_t(int64_t)>& out_at) {
  size_t next = inputs;
  if (s.bias) {
    for (size_t k = 0; k < bias.size(); ++k)
      p.bufs[next].set(bias_at(static_cast<int64_t>(k)), bias[k]);
    ++next;
  }
  if (s.residual) {
    for (size_t i = 0; i < res.size(); ++i)
      p.bufs[next].set(out_at(static_cast<int64_t>(i)), res[i]);
    ++next;
  }
  ASSERT_EQ(next + 1, p.bufs.size());
}

// conv2d_nchwc and depthwise_conv2d_nchwc (depthwise: K == C, one input channel per output):
// logical NCHW tensors, batch 1, 3x3 window.
// With `upsample` f > 1 the residual is [k][ceil(oh/f)][ceil(ow/f)], read at (y / f, x / f)
// (conv2d_nchwc's residual_upsample).
Prepared prepare_conv(const Task& task, const Steps& s, bool depthwise, int64_t c, int64_t k,
                      int64_t h, int64_t w, int64_t stride, int64_t pad, int64_t upsample = 1) {
  const int64_t icb = depthwise ? task.args().get_int("block") : task.args().get_int("ic_block");
  const int64_t ocb = depthwise ? icb : task.args().get_int("oc_block");
  const int64_t cbs = (c + icb - 1) / icb;
  const int64_t oh = (h + 2 * pad - 3) / stride + 1, ow = (w + 2 * pad - 3) / stride + 1;
  const int64_t rh = (oh + upsample - 1) / upsample, rw = (ow + upsample - 1) / upsample;
  std::mt19937_64 rng(c * 1000 + k);
  const std::vector<double> in = random_values(c * h * w, rng),
                            wt = random_values(k * (depthwise ? 1 : c) * 9, rng),
                            bias = random_values(k, rng), res = random_values(k * rh * rw, rng);
  // Without an epilogue, depthwise computes its padding lanes from those of I and W: zeros.
  const bool zero_lanes = depthwise && s.activation.empty() && !s.bias && !s.residual;
  Prepared p{buffers_of(task, zero_lanes ? 0.0 : kNan), {}};
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < h * w; ++i)
      p.bufs[0].set(((ch / icb) * h * w + i) * icb + ch % icb, in[ch * h * w + i]);
  for (int64_t o = 0; o < k; ++o)
    for (int64_t rs = 0; rs < 9; ++rs) {
      if (depthwise) {
        p.bufs[1].set(((o / icb) * 9 + rs) * icb + o % icb, wt[o * 9 + rs]);
        continue;
      }
      for (int64_t ch = 0; ch < c; ++ch)
        p.bufs[1].set(((((o / ocb) * cbs + ch / icb) * 9 + rs) * icb + ch % icb) * ocb + o % ocb,
                      wt[(o * c + ch) * 9 + rs]);
    }
  // Logical [k][rows * cols] -> blocked.
  const auto blocked = [ocb](int64_t i, int64_t pixels) {
    const int64_t o = i / pixels, pix = i % pixels;
    return ((o / ocb) * pixels + pix) * ocb + o % ocb;
  };
  const auto out_at = [&](int64_t i) { return blocked(i, oh * ow); };
  fill_epilogue(  // bias [K/ocb][ocb] is k itself
      p, s, 2, bias, res, [](int64_t o) { return o; },
      [&](int64_t i) { return blocked(i, rh * rw); });
  p.expect.assign(static_cast<size_t>(p.bufs.back().num_elements()), 0.0);  // padding lanes: zeros
  for (int64_t o = 0; o < k; ++o)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x) {
        double acc = 0;
        for (int64_t ch = depthwise ? o : 0; ch < (depthwise ? o + 1 : c); ++ch)
          for (int64_t r = 0; r < 3; ++r)
            for (int64_t q = 0; q < 3; ++q) {
              const int64_t iy = y * stride + r - pad, ix = x * stride + q - pad;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              acc += in[(ch * h + iy) * w + ix] *
                     (depthwise ? wt[o * 9 + r * 3 + q] : wt[((o * c + ch) * 3 + r) * 3 + q]);
            }
        const int64_t i = (o * oh + y) * ow + x;
        const double r = res[(o * rh + y / upsample) * rw + x / upsample];
        if (s.bias) acc += bias[o];
        if (s.residual) acc = s.residual_max ? std::max(acc, r) : acc + r;
        p.expect[out_at(i)] = activate(s, acc);
      }
  return p;
}

// matmul (nn: B[K,N], nt: B[N,K]) and dense_bias_relu (W[N,K], as nt).
Prepared prepare_gemm(const Task& task, const Steps& s, int64_t m, int64_t n, int64_t kk, bool nt) {
  std::mt19937_64 rng(m * 100 + n);
  const std::vector<double> a = random_values(m * kk, rng), b = random_values(kk * n, rng),
                            bias = random_values(n, rng), res = random_values(m * n, rng);
  Prepared p{buffers_of(task, kNan), {}};
  for (int64_t i = 0; i < m * kk; ++i) p.bufs[0].set(i, a[i]);
  for (int64_t q = 0; q < kk; ++q)
    for (int64_t j = 0; j < n; ++j) p.bufs[1].set(nt ? j * kk + q : q * n + j, b[q * n + j]);
  fill_epilogue(
      p, s, 2, bias, res, [](int64_t j) { return j; }, [](int64_t i) { return i; });
  p.expect.resize(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < kk; ++q) acc += a[i * kk + q] * b[q * n + j];
      if (s.bias) acc += bias[j];
      if (s.residual) acc = s.residual_max ? std::max(acc, res[i * n + j]) : acc + res[i * n + j];
      p.expect[i * n + j] = activate(s, acc);
    }
  return p;
}

struct TemplateUnderTest {
  std::string name, tmpl;
  Args shape;
  bool needs_bias;  // dense_bias_relu: every epilogue starts with bias
  std::function<Prepared(const Task&, const Steps&)> prepare;
};

std::vector<TemplateUnderTest> templates_under_test() {
  const Args conv = {{"C", "5"},   {"H", "5"},        {"W", "7"},       {"K", "6"},
                     {"pad", "1"}, {"ic_block", "4"}, {"oc_block", "4"}};
  Args upsampled = conv;
  upsampled["residual_upsample"] = "2";
  return {
      {"conv2d_nchwc", "conv2d_nchwc", conv, false,
       [](const Task& t, const Steps& s) { return prepare_conv(t, s, false, 5, 6, 5, 7, 1, 1); }},
      // An FPN's top-down map added to its lateral conv: the residual read upsampled 2x (odd
      // output extents: the last row and column read the residual's last ones).
      {"conv2d_nchwc_upsampled_residual", "conv2d_nchwc", upsampled, false,
       [](const Task& t, const Steps& s) {
         return prepare_conv(t, s, false, 5, 6, 5, 7, 1, 1, 2);
       }},
      {"depthwise_nchwc",
       "depthwise_conv2d_nchwc",
       {{"C", "11"}, {"H", "6"}, {"W", "7"}, {"stride", "2"}, {"pad", "1"}, {"block", "8"}},
       false,
       [](const Task& t, const Steps& s) { return prepare_conv(t, s, true, 11, 11, 6, 7, 2, 1); }},
      {"matmul_nn",
       "matmul",
       {{"M", "5"}, {"N", "13"}, {"K", "7"}},
       false,
       [](const Task& t, const Steps& s) { return prepare_gemm(t, s, 5, 13, 7, false); }},
      {"matmul_nt_gemv",
       "matmul",
       {{"M", "2"}, {"N", "9"}, {"K", "19"}, {"layout", "nt"}},
       false,
       [](const Task& t, const Steps& s) { return prepare_gemm(t, s, 2, 9, 19, true); }},
      {"dense",
       "dense_bias_relu",
       {{"M", "3"}, {"N", "7"}, {"K", "20"}},
       true,
       [](const Task& t, const Steps& s) { return prepare_gemm(t, s, 3, 7, 20, true); }},
  };
}

class EpilogueNumbers : public ::testing::TestWithParam<TemplateUnderTest> {};

// Every epilogue of the list, the fallback and one sampled config each, built for the host and
// run on NaN-filled outputs: every output element (padding lanes: zero) within kTolerance.
TEST_P(EpilogueNumbers, KernelsMatchPlainLoops) {
  const TemplateUnderTest& tut = GetParam();
  const codegen::Target target = codegen::Target::host();
  const TargetTraits traits =
      make_target_traits(target.str(), target.triple(), target.vector_bits(), target.cores());
  int checked = 0;
  for (const EpilogueCase& e : epilogue_cases()) {
    const Steps s = steps_of(e);
    if (tut.needs_bias && !s.bias) continue;
    const bool upsampled = tut.shape.count("residual_upsample") > 0;
    if (upsampled && !s.residual) continue;  // the template refuses it without a residual
    Args args = tut.shape;
    args["epilogue"] = e.name;
    args.insert(e.params.begin(), e.params.end());
    const Task task = Task::create(tut.tmpl, args, traits);
    SCOPED_TRACE(task.workload_key());
    Prepared p = tut.prepare(task, s);
    if (::testing::Test::HasFatalFailure()) return;
    std::vector<Config> configs = {task.fallback_config()};
    std::mt19937_64 pick(11);
    for (uint64_t i : task.space().sample(1, pick)) configs.push_back(task.space().get(i));
    for (const Config& cfg : configs) {
      te::HostBuffer& out = p.bufs.back();
      for (int64_t i = 0; i < out.num_elements(); ++i) out.set(i, kNan);
      std::vector<void*> ptrs;
      for (auto& b : p.bufs) ptrs.push_back(b.data());
      const Instantiated inst = task.instantiate(cfg);
      const codegen::Kernel kernel =
          codegen::Kernel::load(codegen::build(te::lower(inst.schedule, inst.args, "k"), target));
      ASSERT_EQ(kernel.run(ptrs), 0);
      double worst = 0;
      int64_t worst_at = 0;
      for (int64_t i = 0; i < out.num_elements(); ++i) {
        const double got = out.get(i), want = p.expect[static_cast<size_t>(i)];
        const double err =
            std::isnan(got) ? INFINITY : std::fabs(got - want) / std::max(1.0, std::fabs(want));
        if (err > worst) worst = err, worst_at = i;
      }
      EXPECT_LT(worst, kTolerance)
          << "config " << cfg.to_json_string() << " at element " << worst_at << ": got "
          << out.get(worst_at) << ", want " << p.expect[static_cast<size_t>(worst_at)];
      ++checked;
    }
  }
  EXPECT_GE(checked, tut.needs_bias ? 22 : tut.shape.count("residual_upsample") ? 10 : 30);
}

// residual_upsample is left out of the key at 1 (logs before it keep their keys), and refused
// without a residual to read.
TEST(Epilogue, AnUpsampledResidualKeysAndChecks) {
  const TargetTraits t = make_target_traits("test", "x86_64-linux-gnu", 512, 1);
  const Args conv = {{"C", "8"}, {"H", "6"}, {"W", "6"}, {"K", "8"}, {"R", "1"}, {"S", "1"}};
  Args plain = conv, once = conv, twice = conv;
  plain["epilogue"] = once["epilogue"] = twice["epilogue"] = "add";
  once["residual_upsample"] = "1";
  twice["residual_upsample"] = "2";
  const std::string key = Task::create("conv2d_nchwc", plain, t).workload_key();
  EXPECT_EQ(Task::create("conv2d_nchwc", once, t).workload_key(), key);
  EXPECT_NE(key.find("epilogue=add,dtype"), std::string::npos) << key;
  EXPECT_NE(Task::create("conv2d_nchwc", twice, t).workload_key().find("residual_upsample=2"),
            std::string::npos);
  twice["epilogue"] = "bias_relu";
  try {
    Task::create("conv2d_nchwc", twice, t);
    ADD_FAILURE() << "an upsampled residual without a residual was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("residual_upsample"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, EpilogueNumbers, ::testing::ValuesIn(templates_under_test()),
                         [](const ::testing::TestParamInfo<TemplateUnderTest>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ktune::schedule_space
