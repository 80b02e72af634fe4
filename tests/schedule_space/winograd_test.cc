// Winograd F(m, 3): the matrices reproduce a direct convolution in double; conv2d_winograd_nchwc
// compiled for the host (fallback and random configs) on odd shapes, with weights transformed by
// winograd_transform_weights, matches a direct convolution in double within a tolerance per m;
// a wrong G entry fails that tolerance; bad windows are refused.
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "schedule_space/templates/winograd.h"
#include "support/error.h"
#include "te/host_buffer.h"
#include "te/ir_printer.h"
#include "te/lower.h"

namespace ktune::schedule_space {
namespace {

using templates::winograd_matrices;
using templates::WinogradMatrices;

constexpr const char* kName = "conv2d_winograd_nchwc";

// Normwise relative error (max |got - want| over max |want|) a kernel may have, per m: the
// measured errors (docs/templates.md) are 2-4x below these.
double tolerance(int64_t m) { return m == 2 ? 2e-6 : m == 4 ? 3e-5 : 6e-5; }

// Y = A^T [(G g G^T) .* (B^T d B)] A in double equals the correlation of d with g.
TEST(Winograd, MatricesReproduceDirectConvolutionInDouble) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t m : {2, 4, 6}) {
    const WinogradMatrices& w = winograd_matrices(m);
    const int64_t a = w.alpha;
    ASSERT_EQ(a, m + 2);
    std::vector<double> d(a * a), g(9);
    for (double& x : d) x = u(rng);
    for (double& x : g) x = u(rng);
    std::vector<double> uu(a * a, 0), vv(a * a, 0), mm(a * a);
    for (int64_t e = 0; e < a; ++e)
      for (int64_t n = 0; n < a; ++n) {
        for (int64_t r = 0; r < 3; ++r)
          for (int64_t s = 0; s < 3; ++s)
            uu[e * a + n] += w.g_at(e, r) * g[r * 3 + s] * w.g_at(n, s);
        for (int64_t i = 0; i < a; ++i)
          for (int64_t j = 0; j < a; ++j) vv[e * a + n] += w.b_t(e, i) * d[i * a + j] * w.b_t(n, j);
        mm[e * a + n] = uu[e * a + n] * vv[e * a + n];
      }
    double worst = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double y = 0, direct = 0;
        for (int64_t e = 0; e < a; ++e)
          for (int64_t n = 0; n < a; ++n) y += w.a_t(i, e) * mm[e * a + n] * w.a_t(j, n);
        for (int64_t r = 0; r < 3; ++r)
          for (int64_t s = 0; s < 3; ++s) direct += d[(i + r) * a + j + s] * g[r * 3 + s];
        worst = std::max(worst, std::fabs(y - direct));
      }
    EXPECT_LT(worst, 1e-12) << "F(" << m << ",3)";
  }
  EXPECT_THROW(winograd_matrices(3), Error);
}

TargetTraits host_traits(const codegen::Target& t) {
  return make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores());
}

ErrorKind create_error(const std::vector<std::string>& words) {
  try {
    Task::create(kName, parse_workload_args(kName, words), host_traits(codegen::Target::host()));
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kUnknown;
}

TEST(Winograd, OnlyThreeByThreeAtStrideOne) {
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16"}), ErrorKind::kUnknown);
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "stride=2"}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "dilation=2"}),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "R=1", "S=1"}),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=16", "H=8", "W=8", "K=16", "m=3"}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(create_error({"C=16", "H=2", "W=8", "K=16"}), ErrorKind::kInvalidArgument);
}

TEST(Winograd, FlopsAreTheDirectConvolutionsAndUIsTheWeightArgument) {
  const Task task = Task::create(
      kName, parse_workload_args(kName, {"C=64", "H=56", "W=56", "K=64", "pad=1", "m=6"}),
      host_traits(codegen::Target::host()));
  EXPECT_DOUBLE_EQ(task.flop(), 2.0 * 64 * 56 * 56 * 64 * 9);
  const ComputeDef def = task.template_def().compute(task.args());
  ASSERT_EQ(def.args.size(), 3u);
  // Four oc blocks pair up: two rows of 32 output channels each.
  EXPECT_EQ(def.args[1].shape(), (std::vector<int64_t>{8, 8, 2, 4, 16, 32}));
  EXPECT_EQ(def.args[1].shape(), templates::winograd_weight_shape(64, 64, 6, 16, 16));
  // Three do not: a row per oc block.
  EXPECT_EQ(templates::winograd_weight_shape(48, 64, 2, 16, 16),
            (std::vector<int64_t>{4, 4, 3, 4, 16, 16}));
  EXPECT_EQ(templates::winograd_u_block(33, 16), 16);
  EXPECT_EQ(templates::winograd_u_block(64, 8), 16);
  EXPECT_EQ(def.args[2].shape(), (std::vector<int64_t>{1, 4, 56, 56, 16}));
}

// The transforms' select chains over the alpha rows fold away once the alpha loops are unrolled:
// without padding or tail lanes, the fallback's lowered IR has no select at all.
TEST(Winograd, TransformConstantsFoldInTheLoweredIr) {
  for (const char* m : {"m=2", "m=4", "m=6"}) {
    const Task task =
        Task::create(kName, parse_workload_args(kName, {"C=16", "H=14", "W=14", "K=32", m}),
                     host_traits(codegen::Target::host()));
    const Instantiated inst = task.instantiate(task.fallback_config());
    const std::string ir = te::to_string(te::lower(inst.schedule, inst.args, "wino").body);
    EXPECT_EQ(ir.find("select"), std::string::npos) << m << "\n" << ir;
    EXPECT_EQ(ir.find("(x16(0.0f) -"), std::string::npos) << m << "\n" << ir;
  }
}

struct Case {
  std::vector<std::string> words;
  int64_t c, k, h, w, pad;
  std::string epilogue;  // none, bias_relu or bias_add_relu
};

// Logical tensors of a case (seeded), the expected output in double, and the blocked buffers.
struct Problem {
  Problem(const Case& c, const Task& task, const WinogradMatrices& wm);
  std::vector<float> in, wt, bias, res;
  std::vector<double> expect;  // [K][OH][OW]
  std::vector<te::HostBuffer> bufs;
  int64_t icb, ocb, oh, ow;
};

Problem::Problem(const Case& c, const Task& task, const WinogradMatrices& wm) {
  icb = task.args().get_int("ic_block");
  ocb = task.args().get_int("oc_block");
  oh = c.h + 2 * c.pad - 2;
  ow = c.w + 2 * c.pad - 2;
  std::mt19937_64 rng(c.c * 1000 + c.k * 10 + c.pad);
  std::uniform_real_distribution<float> u(-1, 1);
  in.resize(c.c * c.h * c.w);
  wt.resize(c.k * c.c * 9);
  bias.resize(c.k);
  res.resize(c.k * oh * ow);
  for (auto* v : {&in, &wt, &bias, &res})
    for (float& x : *v) x = u(rng);
  expect.assign(c.k * oh * ow, 0);
  for (int64_t k = 0; k < c.k; ++k)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x) {
        double acc = 0;
        for (int64_t ch = 0; ch < c.c; ++ch)
          for (int64_t r = 0; r < 3; ++r)
            for (int64_t q = 0; q < 3; ++q) {
              const int64_t iy = y + r - c.pad, ix = x + q - c.pad;
              if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
              acc += static_cast<double>(in[(ch * c.h + iy) * c.w + ix]) *
                     wt[((k * c.c + ch) * 3 + r) * 3 + q];
            }
        if (c.epilogue != "none") acc += bias[k];
        if (c.epilogue == "bias_add_relu") acc += res[(k * oh + y) * ow + x];
        if (c.epilogue != "none") acc = std::max(acc, 0.0);
        expect[(k * oh + y) * ow + x] = acc;
      }
  // Blocked buffers in argument order; every lane past C or K holds NaN (it must never reach an
  // output lane below K; output lanes past K must be zero).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const ComputeDef def = task.template_def().compute(task.args());
  for (const auto& t : def.args) {
    bufs.emplace_back(t.shape(), t.dtype());
    for (int64_t i = 0; i < bufs.back().num_elements(); ++i) bufs.back().set(i, nan);
  }
  for (int64_t ch = 0; ch < c.c; ++ch)
    for (int64_t i = 0; i < c.h * c.w; ++i)
      bufs[0].set(((ch / icb) * c.h * c.w + i) * icb + ch % icb, in[ch * c.h * c.w + i]);
  const std::vector<float> uw =
      templates::winograd_transform_weights(wm, wt.data(), c.k, c.c, icb, ocb);
  EXPECT_EQ(static_cast<int64_t>(uw.size()), bufs[1].num_elements());
  // U's rows hold ub output channels (two oc blocks when they pair up).
  const int64_t ub = templates::winograd_u_block(c.k, ocb);
  const int64_t cbs = (c.c + icb - 1) / icb, krows = (c.k + ub - 1) / ub;
  for (int64_t en = 0; en < wm.alpha * wm.alpha; ++en)
    for (int64_t k = 0; k < c.k; ++k)
      for (int64_t ch = 0; ch < c.c; ++ch) {
        const int64_t at =
            (((en * krows + k / ub) * cbs + ch / icb) * icb + ch % icb) * ub + k % ub;
        bufs[1].set(at, uw[at]);
      }
  size_t next = 2;
  if (c.epilogue != "none") {
    for (int64_t k = 0; k < c.k; ++k) bufs[next].set(k, bias[k]);
    ++next;
  }
  if (c.epilogue == "bias_add_relu") {
    for (int64_t k = 0; k < c.k; ++k)
      for (int64_t i = 0; i < oh * ow; ++i)
        bufs[next].set(((k / ocb) * oh * ow + i) * ocb + k % ocb, res[k * oh * ow + i]);
    ++next;
  }
  EXPECT_EQ(next + 1, bufs.size());
}

// Normwise relative error of the output buffer against the expected output (NaN counts as
// infinitely wrong; lanes past K must be exactly zero).
double relative_error(const Problem& p, const Case& c) {
  double worst = 0, scale = 0;
  const int64_t kbs = (c.k + p.ocb - 1) / p.ocb;
  for (double v : p.expect) scale = std::max(scale, std::fabs(v));
  for (int64_t k = 0; k < kbs * p.ocb; ++k)
    for (int64_t i = 0; i < p.oh * p.ow; ++i) {
      const double got = p.bufs.back().get(((k / p.ocb) * p.oh * p.ow + i) * p.ocb + k % p.ocb);
      if (k >= c.k) {
        if (got != 0) return std::numeric_limits<double>::infinity();
        continue;
      }
      if (std::isnan(got)) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, std::fabs(got - p.expect[k * p.oh * p.ow + i]));
    }
  return worst / scale;
}

codegen::Kernel compile(const Instantiated& inst, const codegen::Target& target) {
  return codegen::Kernel::load(codegen::build(te::lower(inst.schedule, inst.args, "wino"), target));
}

// Worst relative error over the configs of a case, with weights transformed by `wm`.
double worst_error(const Case& c, int64_t m, const WinogradMatrices& wm,
                   const std::vector<Config>& configs, const Task& task,
                   const codegen::Target& target) {
  Problem p(c, task, wm);
  double worst = 0;
  for (const Config& cfg : configs) {
    for (int64_t i = 0; i < p.bufs.back().num_elements(); ++i)
      p.bufs.back().set(i, std::numeric_limits<double>::quiet_NaN());
    std::vector<void*> ptrs;
    for (auto& b : p.bufs) ptrs.push_back(b.data());
    EXPECT_EQ(compile(task.instantiate(cfg), target).run(ptrs), 0);
    const double err = relative_error(p, c);
    EXPECT_LT(err, tolerance(m)) << task.workload_key() << " config " << cfg.to_json_string();
    worst = std::max(worst, err);
  }
  return worst;
}

std::vector<Case> cases_for(int64_t m) {
  const std::string ms = "m=" + std::to_string(m);
  return {
      // H, W not multiples of m; C and K not multiples of the blocks (two oc blocks: U's rows
      // pair them).
      {{"C=20", "H=11", "W=13", "K=21", "pad=1", "ic_block=8", "oc_block=16", ms,
        "epilogue=bias_relu"},
       20,
       21,
       11,
       13,
       1,
       "bias_relu"},
      {{"C=7", "H=9", "W=10", "K=12", "pad=0", "ic_block=4", "oc_block=8", ms,
        "epilogue=bias_add_relu"},
       7,
       12,
       9,
       10,
       0,
       "bias_add_relu"},
      // Exact tiles with padding, default blocks, a wide reduction (the error grows with C).
      {{"C=128", "H=10", "W=10", "K=32", "pad=1", ms}, 128, 32, 10, 10, 1, "none"},
      // Three oc blocks (the last one partial): U's rows are not paired.
      {{"C=16", "H=6", "W=7", "K=40", "pad=1", ms}, 16, 40, 6, 7, 1, "none"},
  };
}

// For m = 2, 4, 6: the fallback and random configs against a direct convolution in double.
TEST(Winograd, KernelsMatchDirectConvolutionWithinTolerancePerM) {
  const codegen::Target target = codegen::Target::host();
  std::mt19937_64 pick(11);
  for (int64_t m : {2, 4, 6}) {
    double worst = 0;
    for (const Case& c : cases_for(m)) {
      const Task task =
          Task::create(kName, parse_workload_args(kName, c.words), host_traits(target));
      std::vector<Config> configs = {task.fallback_config()};
      for (uint64_t i : task.space().sample(2, pick)) configs.push_back(task.space().get(i));
      const double err = worst_error(c, m, winograd_matrices(m), configs, task, target);
      std::printf("  %s: %.3g\n", task.workload_key().c_str(), err);
      worst = std::max(worst, err);
    }
    std::printf("F(%lldx%lld, 3x3): max relative error %.3g (tolerance %.3g)\n",
                static_cast<long long>(m), static_cast<long long>(m), worst, tolerance(m));
  }
}

// The tolerance catches a wrong transform: one entry of G changed in the weight transform.
TEST(Winograd, AWrongGEntryFailsTheTolerance) {
  const codegen::Target target = codegen::Target::host();
  for (int64_t m : {2, 4, 6}) {
    WinogradMatrices wrong = winograd_matrices(m);
    wrong.g[4] *= 1.001;  // row 1, column 1
    const Case c = cases_for(m)[0];
    const Task task = Task::create(kName, parse_workload_args(kName, c.words), host_traits(target));
    Problem p(c, task, wrong);
    std::vector<void*> ptrs;
    for (auto& b : p.bufs) ptrs.push_back(b.data());
    ASSERT_EQ(compile(task.instantiate(task.fallback_config()), target).run(ptrs), 0);
    const double err = relative_error(p, c);
    EXPECT_GT(err, tolerance(m)) << "m=" << m;
    std::printf("F(%lld,3) with G[1][1] off by 0.1%%: relative error %.3g\n",
                static_cast<long long>(m), err);
  }
}

}  // namespace
}  // namespace ktune::schedule_space
