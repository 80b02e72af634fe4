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
#include "te/ir_visitor.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"
#include "te/ir_printer.h"
#include "tests/codegen/test_util.h"
#include "tests/te/te_ops.h"

namespace ktune::codegen {
namespace {

using namespace ktune::te;  // NOLINT
using testing::AlignedBuffer;

// Fills float inputs from a seed, runs the interpreter, the host kernel (1 and 2 threads) and,
// when the cross tools exist, the AArch64 kernel; compares every output element.
void check_against_interpreter(const LoweredFunc& f, uint64_t seed, bool on_aarch64 = true, float tol = 1e-4f) {
  std::vector<AlignedBuffer> inputs, host, ref;
  std::vector<void*> host_ptrs, ref_ptrs;
  for (size_t i = 0; i < f.args.size(); ++i) {
    const BufferArg& a = f.args[i];
    ASSERT_EQ(a.dtype, Float(32)) << "test data is float32 only";
    const size_t bytes = static_cast<size_t>(a.num_elements()) * 4;
    inputs.emplace_back(bytes);
    if (!a.is_output) testing::fill_uniform(inputs.back().as<float>(), a.num_elements(), seed + i);
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
    ASSERT_EQ(k.run(host_ptrs), 0);
    for (size_t i = 0; i < f.args.size(); ++i) {
      if (f.args[i].is_output) compare(host[i].as<float>(), i, threads == 1 ? "host, 1 thread" : "host, 2 threads");
    }
  }
  if (!on_aarch64 || !testing::cross_tools_available()) return;
  const Target arm = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon");
  std::vector<std::vector<uint8_t>> data;
  for (auto& b : inputs) data.push_back(b.copy());
  auto out = testing::run_on_aarch64(build(f, arm), data);
  for (size_t i = 0; i < f.args.size(); ++i) {
    if (f.args[i].is_output) compare(reinterpret_cast<const float*>(out[i].data()), i, "aarch64 (qemu)");
  }
}

TEST(CodegenTeTest, MatmulTiledCachedVectorizedUnrolled) {
  const int64_t m = 64, n = 48, k = 40;
  Tensor a = placeholder({m, k}, Float(32), "A"), b = placeholder({k, n}, Float(32), "B");
  IterVar kk = reduce_axis({0, k}, "k");
  Tensor c = compute({m, n}, [&](Var i, Var j) { return sum(a(i, kk) * b(kk, j), kk); }, "C");
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
  Tensor c = compute({m, n}, [&](Var i, Var j) { return sum(a(i, kk) * b(kk, j), kk); }, "C");
  Schedule s = create_schedule({c});
  auto [io, jo, ii, ji] = s[c].tile(s[c].axis(0), s[c].axis(1), 7, 8);
  s[c].reorder({s[c].reduce_axis(0), ii, ji});
  s[c].parallel(io);
  s[c].vectorize(ji);
  check_against_interpreter(lower(s, {a, b, c}, "matmul_guards"), 12);
}

TEST(CodegenTeTest, Conv2dPadded) {
  const int64_t C = 4, H = 10, W = 10, K = 8, R = 3, S = 3;
  Tensor x = placeholder({1, C, H, W}, Float(32), "X"), w = placeholder({K, C, R, S}, Float(32), "Wt");
  Tensor pad = compute({1, C, H + 2, W + 2}, [&](Var n, Var c, Var h, Var wi) {
    Expr inside = (h >= 1) && (h < H + 1) && (wi >= 1) && (wi < W + 1);
    return select(inside, x(n, c, min(max(h - 1, Expr(0)), Expr(H - 1)), min(max(wi - 1, Expr(0)), Expr(W - 1))),
                  Expr(0.0f));
  }, "pad");
  IterVar rc = reduce_axis({0, C}, "rc"), rr = reduce_axis({0, R}, "rr"), rs = reduce_axis({0, S}, "rs");
  Tensor y = compute({1, K, H, W}, [&](Var n, Var k, Var h, Var wi) {
    return sum(pad(n, rc, h + rr, wi + rs) * w(k, rc, rr, rs), std::vector<IterVar>{rc, rr, rs});
  }, "Y");
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
  Tensor y = compute({1, C, H / 2, W / 2}, [&](Var n, Var c, Var h, Var wi) {
    return max(x(n, c, h * 2 + rh, wi * 2 + rw), std::vector<IterVar>{rh, rw});
  }, "pool");
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
  Tensor mx = compute({R}, [&](Var i) { return max(x(i, k1), k1); }, "rowmax");
  Tensor e = compute({R, C}, [&](Var i, Var j) { return exp(x(i, j) - mx(i)); }, "e");
  Tensor sm = compute({R}, [&](Var i) { return sum(e(i, k2), k2); }, "rowsum");
  Tensor y = compute({R, C}, [&](Var i, Var j) { return e(i, j) / sm(i); }, "softmax");
  Schedule s = create_schedule({y});
  s[y].parallel(s[y].axis(0));
  check_against_interpreter(lower(s, {x, y}, "softmax"), 15);
}

// Random schedules (splits, fuse, reorder, unroll, parallel, vectorize, cache_write, inline,
// compute_at) of te's test operators, in the spirit of te's property tests: whatever te lowers,
// codegen must compile, and the kernel must agree with the interpreter on the same IR.
class RandomScheduler {
 public:
  explicit RandomScheduler(uint64_t seed) : rng_(seed) {}

  Schedule make(const te::testing::OpDef& op) {
    Schedule s = create_schedule(op.outputs);
    for (const Tensor& out : op.outputs) {
      if (out->body.as<Reduce>() && coin(0.4)) s.cache_write(out, "local");
    }
    const auto& stages = s.node().stages;
    for (const StageNode& st : stages) {
      if (!st.is_placeholder && !st.is_output && st.reduce_axes.empty() && coin(0.35)) s[st.tensor].compute_inline();
    }
    for (int i = static_cast<int>(stages.size()) - 1; i >= 0; --i) {
      const StageNode& st = stages[i];
      if (st.is_placeholder || st.attach == AttachKind::kInline) continue;
      random_loops(s[st.tensor]);
      // A producer read by exactly one (non-inlined) stage may move into one of its loops.
      if (st.is_output || !coin(0.5)) continue;
      int consumer = -1, count = 0;
      for (size_t c = 0; c < stages.size(); ++c) {
        if (static_cast<int>(c) == i || stages[c].is_placeholder || !reads(stages[c].body, st.tensor)) continue;
        consumer = static_cast<int>(c);
        ++count;
      }
      if (count != 1 || stages[consumer].attach == AttachKind::kInline) continue;
      const auto& leaves = stages[consumer].leaves;
      s[st.tensor].compute_at(s[stages[consumer].tensor], leaves[pick(leaves.size())]);
    }
    return s;
  }

 private:
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  static bool reads(const Expr& body, const Tensor& t) {
    struct Finder : IRVisitor {
      const TensorNode* t = nullptr;
      bool found = false;
      void visit(const TensorRead* op) override {
        found |= op->tensor.get() == t;
        IRVisitor::visit(op);
      }
    } f;
    f.t = t.get();
    f.visit_expr(body);
    return f.found;
  }

  void random_loops(Stage st) {
    for (int n = static_cast<int>(pick(4)); n > 0; --n) {
      auto leaves = st.leaf_iter_vars();
      IterVar l = leaves[pick(leaves.size())];
      st.split(l, 1 + static_cast<int64_t>(pick(static_cast<size_t>(l.extent) + 1)));
    }
    if (coin(0.3)) {
      auto leaves = st.leaf_iter_vars();
      size_t p = pick(leaves.size());
      if (p + 1 < leaves.size() && leaves[p].kind == leaves[p + 1].kind) st.fuse(leaves[p], leaves[p + 1]);
    }
    if (coin(0.6)) {
      auto leaves = st.leaf_iter_vars();
      std::shuffle(leaves.begin(), leaves.end(), rng_);
      st.reorder(leaves);
    }
    auto leaves = st.leaf_iter_vars();
    IterVar u = leaves[pick(leaves.size())];
    if (coin(0.3) && u.extent <= 16) st.unroll(u);
    IterVar p = leaves[pick(leaves.size())];
    if (coin(0.3) && !p.is_reduce()) st.parallel(p);
    if (!leaves.back().is_reduce() && coin(0.6)) st.vectorize(leaves.back());
  }

  std::mt19937_64 rng_;
};

constexpr int kSchedulesPerOp = 25;
constexpr int kAArch64SchedulesPerOp = 3;  // each costs a static cross link and a qemu run

void check_random_schedules(const te::testing::OpDef& op, uint64_t seed) {
  RandomScheduler gen(seed);
  int lowered = 0;
  for (int n = 0; n < kSchedulesPerOp; ++n) {
    LoweredFunc f;
    try {
      f = lower(gen.make(op), op.args(), op.name);
    } catch (const Error& e) {
      continue;  // a schedule te rejects is te's business (its own property tests cover it)
    }
    ++lowered;
    SCOPED_TRACE(op.name + " schedule " + std::to_string(n) + ":\n" + to_string(f));
    check_against_interpreter(f, seed * 100 + static_cast<uint64_t>(n), lowered <= kAArch64SchedulesPerOp);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GE(lowered, kSchedulesPerOp / 2) << "too few schedules lowered to test anything";
}

TEST(CodegenPropertyTest, Matmul) { check_random_schedules(te::testing::matmul(16, 12, 10), 1); }
TEST(CodegenPropertyTest, MatmulBiasRelu) { check_random_schedules(te::testing::matmul_bias_relu(12, 9, 7), 2); }
TEST(CodegenPropertyTest, Conv2dPaddedStrided) {
  check_random_schedules(te::testing::conv2d(1, 3, 7, 7, 4, 3, 3, 2, 1), 3);
}
TEST(CodegenPropertyTest, DepthwiseConv2d) { check_random_schedules(te::testing::depthwise_conv2d(1, 3, 6, 6, 3, 1), 4); }
TEST(CodegenPropertyTest, MaxPool) { check_random_schedules(te::testing::max_pool(1, 2, 9, 9, 3, 2), 5); }
TEST(CodegenPropertyTest, Softmax) { check_random_schedules(te::testing::softmax(5, 11), 6); }

}  // namespace
}  // namespace ktune::codegen
