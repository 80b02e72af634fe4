// Tests kernels scheduled and lowered by te: compiled by codegen they must match te's reference
// interpreter on the host, and as AArch64 objects under qemu-aarch64-static.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "support/error.h"
#include "te/interpreter.h"
#include "te/ir_printer.h"
#include "te/ir_visitor.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"
#include "tests/codegen/test_util.h"
#include "tests/te/random_schedule.h"
#include "tests/te/te_ops.h"

namespace ktune::codegen {
namespace {

using namespace ktune::te;  // NOLINT
using testing::AlignedBuffer;

// Fills float inputs from a seed, runs the interpreter, the host kernel (1 and 2 threads) and,
// when the cross tools exist, the AArch64 kernel; compares every output element.
// A kernel whose AArch64 run is deferred to one batched link and qemu run (see
// run_batch_on_aarch64): its IR, the interpreter's outputs and the case to run.
struct DeferredAarch64 {
  LoweredFunc f;
  std::vector<std::vector<uint8_t>> expected;  // interpreter outputs per argument
  testing::Aarch64Case run;
};

void compare_outputs(const LoweredFunc& f, const std::vector<std::vector<uint8_t>>& got,
                     const std::vector<std::vector<uint8_t>>& want, const char* where,
                     float tol = 1e-4f) {
  for (size_t i = 0; i < f.args.size(); ++i) {
    if (!f.args[i].is_output) continue;
    const float* g = reinterpret_cast<const float*>(got[i].data());
    const float* w = reinterpret_cast<const float*>(want[i].data());
    for (int64_t e = 0; e < f.args[i].num_elements(); ++e) {
      ASSERT_NEAR(g[e], w[e], tol * (1.0f + std::fabs(w[e])))
          << where << ": " << f.name << " output " << f.args[i].buffer.name() << "[" << e << "]";
    }
  }
}

// With `deferred`, the AArch64 check is queued there (entry renamed to be unique in the batch)
// instead of linked and run on its own.
void check_against_interpreter(const LoweredFunc& f, uint64_t seed, bool on_aarch64 = true,
                               float tol = 1e-4f,
                               std::vector<DeferredAarch64>* deferred = nullptr) {
  std::vector<AlignedBuffer> inputs, host, ref;
  std::vector<void*> host_ptrs, ref_ptrs;
  for (size_t i = 0; i < f.args.size(); ++i) {
    const BufferArg& a = f.args[i];
    ASSERT_EQ(a.dtype, Float(32)) << "test data is float32 only";
    const size_t bytes = static_cast<size_t>(a.num_elements()) * 4;
    inputs.emplace_back(bytes);
    if (a.is_output)
      inputs.back().poison();  // NaN: the interpreter, host and AArch64 copies all start unwritten
    else
      testing::fill_uniform(inputs.back().as<float>(), a.num_elements(), seed + i);
  }
  for (size_t i = 0; i < f.args.size(); ++i) {
    host.emplace_back(inputs[i].bytes());
    ref.emplace_back(inputs[i].bytes());
    std::memcpy(host.back().data(), inputs[i].data(), inputs[i].bytes());
    std::memcpy(ref.back().data(), inputs[i].data(), inputs[i].bytes());
  }
  for (size_t i = 0; i < f.args.size(); ++i) {
    host_ptrs.push_back(host[i].data());
    ref_ptrs.push_back(ref[i].data());
  }
  interpret(f, ref_ptrs);

  auto compare = [&](const float* got, size_t i, const char* where) {
    const float* want = ref[i].as<float>();
    for (int64_t e = 0; e < f.args[i].num_elements(); ++e) {
      ASSERT_NEAR(got[e], want[e], tol * (1.0f + std::fabs(want[e])))
          << where << ": " << f.name << " output " << f.args[i].buffer.name() << "[" << e << "]";
    }
  };
  Kernel k = Kernel::load(build(f, Target::host()));
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (size_t i = 0; i < f.args.size(); ++i)
      if (f.args[i].is_output) host[i].poison();  // each run must write every element itself
    ASSERT_EQ(k.run(host_ptrs), 0);
    for (size_t i = 0; i < f.args.size(); ++i) {
      if (f.args[i].is_output)
        compare(host[i].as<float>(), i, threads == 1 ? "host, 1 thread" : "host, 2 threads");
    }
  }
  if (!on_aarch64 || !testing::cross_tools_available()) return;
  const Target arm = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon");
  std::vector<std::vector<uint8_t>> data;
  for (auto& b : inputs) data.push_back(b.copy());
  if (deferred) {
    DeferredAarch64 d{f, {}, {}};
    d.f.name = f.name + "_k" + std::to_string(deferred->size());
    for (auto& b : ref) d.expected.push_back(b.copy());
    d.run = {build(d.f, arm), data};
    deferred->push_back(std::move(d));
    return;
  }
  auto out = testing::run_on_aarch64(build(f, arm), data);
  for (size_t i = 0; i < f.args.size(); ++i) {
    if (f.args[i].is_output)
      compare(reinterpret_cast<const float*>(out[i].data()), i, "aarch64 (qemu)");
  }
}

TEST(CodegenTeTest, MatmulTiledCachedVectorizedUnrolled) {
  const int64_t m = 64, n = 48, k = 40;
  Tensor a = placeholder({m, k}, Float(32), "A"), b = placeholder({k, n}, Float(32), "B");
  IterVar kk = reduce_axis({0, k}, "k");
  Tensor c = compute(
      {m, n}, [&](Var i, Var j) { return sum(a(i, kk) * b(kk, j), kk); }, "C");
  Schedule s = create_schedule({c});
  Tensor cl = s.cache_write(c, "local");
  auto [io, jo, ii, ji] = s[c].tile(s[c].axis(0), s[c].axis(1), 4, 16);
  s[cl].compute_at(s[c], jo);
  auto [ko, ki] = s[cl].split(s[cl].reduce_axis(0), 4);
  s[cl].reorder({ko, ki, s[cl].axis(0), s[cl].axis(1)});
  s[cl].unroll(s[cl].axis(0));
  s[cl].vectorize(s[cl].axis(1));
  s[c].vectorize(ji);
  s[c].unroll(ii);
  s[c].parallel(io);
  check_against_interpreter(lower(s, {a, b, c}, "matmul_tiled"), 11);
}

TEST(CodegenTeTest, MatmulWithNonDividingSplits) {
  const int64_t m = 30, n = 20, k = 17;
  Tensor a = placeholder({m, k}, Float(32), "A"), b = placeholder({k, n}, Float(32), "B");
  IterVar kk = reduce_axis({0, k}, "k");
  Tensor c = compute(
      {m, n}, [&](Var i, Var j) { return sum(a(i, kk) * b(kk, j), kk); }, "C");
  Schedule s = create_schedule({c});
  auto [io, jo, ii, ji] = s[c].tile(s[c].axis(0), s[c].axis(1), 7, 8);
  s[c].reorder({s[c].reduce_axis(0), ii, ji});
  s[c].parallel(io);
  s[c].vectorize(ji);
  check_against_interpreter(lower(s, {a, b, c}, "matmul_guards"), 12);
}

TEST(CodegenTeTest, Conv2dPadded) {
  const int64_t C = 4, H = 10, W = 10, K = 8, R = 3, S = 3;
  Tensor x = placeholder({1, C, H, W}, Float(32), "X"),
         w = placeholder({K, C, R, S}, Float(32), "Wt");
  Tensor pad = compute(
      {1, C, H + 2, W + 2},
      [&](Var n, Var c, Var h, Var wi) {
        Expr inside = (h >= 1) && (h < H + 1) && (wi >= 1) && (wi < W + 1);
        return select(
            inside,
            x(n, c, min(max(h - 1, Expr(0)), Expr(H - 1)), min(max(wi - 1, Expr(0)), Expr(W - 1))),
            Expr(0.0f));
      },
      "pad");
  IterVar rc = reduce_axis({0, C}, "rc"), rr = reduce_axis({0, R}, "rr"),
          rs = reduce_axis({0, S}, "rs");
  Tensor y = compute(
      {1, K, H, W},
      [&](Var n, Var k, Var h, Var wi) {
        return sum(pad(n, rc, h + rr, wi + rs) * w(k, rc, rr, rs),
                   std::vector<IterVar>{rc, rr, rs});
      },
      "Y");
  Schedule s = create_schedule({y});
  s[pad].compute_inline();
  auto [wo, wi] = s[y].split(s[y].axis(3), 5);
  s[y].parallel(s[y].axis(1));
  s[y].unroll(wi);
  check_against_interpreter(lower(s, {x, w, y}, "conv2d"), 13);
}

TEST(CodegenTeTest, MaxPool) {
  const int64_t C = 3, H = 16, W = 16;
  Tensor x = placeholder({1, C, H, W}, Float(32), "X");
  IterVar rh = reduce_axis({0, 2}, "rh"), rw = reduce_axis({0, 2}, "rw");
  Tensor y = compute(
      {1, C, H / 2, W / 2},
      [&](Var n, Var c, Var h, Var wi) {
        return max(x(n, c, h * 2 + rh, wi * 2 + rw), std::vector<IterVar>{rh, rw});
      },
      "pool");
  Schedule s = create_schedule({y});
  s[y].reorder({s[y].reduce_axis(0), s[y].reduce_axis(1), s[y].axis(3)});
  s[y].vectorize(s[y].axis(3));
  s[y].parallel(s[y].axis(1));
  check_against_interpreter(lower(s, {x, y}, "maxpool"), 14);
}

TEST(CodegenTeTest, Softmax) {
  const int64_t R = 6, C = 37;
  Tensor x = placeholder({R, C}, Float(32), "X");
  IterVar k1 = reduce_axis({0, C}, "k1"), k2 = reduce_axis({0, C}, "k2");
  Tensor mx = compute(
      {R}, [&](Var i) { return max(x(i, k1), k1); }, "rowmax");
  Tensor e = compute(
      {R, C}, [&](Var i, Var j) { return exp(x(i, j) - mx(i)); }, "e");
  Tensor sm = compute(
      {R}, [&](Var i) { return sum(e(i, k2), k2); }, "rowsum");
  Tensor y = compute(
      {R, C}, [&](Var i, Var j) { return e(i, j) / sm(i); }, "softmax");
  Schedule s = create_schedule({y});
  s[y].parallel(s[y].axis(0));
  check_against_interpreter(lower(s, {x, y}, "softmax"), 15);
}

// The first schedules of te's property tests (the same generator, seeds and lowering options,
// from tests/te/random_schedule.h): whatever te lowers, codegen must compile, and the kernel must
// agree with the interpreter on the same IR — on the host, and as AArch64 objects linked into
// one program per operator and run under qemu.
// Half as many as te's property tests lower (200): each is compiled twice here, for the host and
// for AArch64.
constexpr int kSchedulesPerOp = 100;

void check_random_schedules(const te::testing::OpDef& op, uint64_t seed) {
  const bool on_aarch64 = testing::cross_tools_available();
  std::vector<DeferredAarch64> deferred;
  te::testing::RandomScheduler gen(seed);
  for (int n = 0; n < kSchedulesPerOp; ++n) {
    std::string log;
    Schedule s = gen.make(op, &log);
    LowerOptions options;
    options.partition_loops = n % 2 == 0;  // as te's property tests: guards and peeled tails
    LoweredFunc f;
    try {
      f = lower(s, op.args(), op.name, options);
    } catch (const Error& e) {
      FAIL() << op.name << " schedule " << n << " did not lower: " << e.what() << "\n" << log;
    }
    SCOPED_TRACE(op.name + " schedule " + std::to_string(n) + ":\n" + log + to_string(f));
    check_against_interpreter(f, seed * 1000 + static_cast<uint64_t>(n), on_aarch64, 1e-4f,
                              &deferred);
    if (::testing::Test::HasFatalFailure()) return;
  }
  if (!on_aarch64) return;
  ASSERT_EQ(deferred.size(), static_cast<size_t>(kSchedulesPerOp));
  std::vector<testing::Aarch64Case> cases;
  for (const DeferredAarch64& d : deferred) cases.push_back(d.run);
  auto outputs = testing::run_batch_on_aarch64(cases);
  for (size_t k = 0; k < deferred.size(); ++k) {
    SCOPED_TRACE(op.name + " schedule " + std::to_string(k) + " on aarch64:\n" +
                 to_string(deferred[k].f));
    compare_outputs(deferred[k].f, outputs[k], deferred[k].expected, "aarch64 (qemu)");
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CodegenPropertyTest, Matmul) { check_random_schedules(te::testing::matmul(16, 12, 10), 1); }
TEST(CodegenPropertyTest, MatmulBiasRelu) {
  check_random_schedules(te::testing::matmul_bias_relu(12, 9, 7), 2);
}
TEST(CodegenPropertyTest, Conv2dPaddedStrided) {
  check_random_schedules(te::testing::conv2d(1, 3, 7, 7, 4, 3, 3, 2, 1), 3);
}
TEST(CodegenPropertyTest, DepthwiseConv2d) {
  check_random_schedules(te::testing::depthwise_conv2d(1, 3, 6, 6, 3, 1), 4);
}
TEST(CodegenPropertyTest, MaxPool) {
  check_random_schedules(te::testing::max_pool(1, 2, 9, 9, 3, 2), 5);
}
TEST(CodegenPropertyTest, Softmax) { check_random_schedules(te::testing::softmax(5, 11), 6); }

}  // namespace
}  // namespace ktune::codegen
