// Tests build() on hand-written lowered IR (independent of te's lowering): vectors, parallel
// loops, allocations, floor division, math calls, gathers; the same kernels for AArch64 under
// qemu; and typed build errors for IR the backend does not accept.
#include "codegen/codegen_llvm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "support/error.h"
#include "tests/codegen/test_util.h"

namespace ktune::codegen {
namespace {

using namespace ktune::te;  // NOLINT: IR construction reads better unqualified
using testing::AlignedBuffer;

constexpr int64_t kN = 1024;
constexpr int kLanes = 16;

Expr i64(int64_t v) { return IntImm::make(v); }

// C[i] = A[i] + B[i], 16 lanes per iteration, outer loop parallel.
LoweredFunc vector_add() {
  Buffer a = Buffer::make("A", Float(32)), b = Buffer::make("B", Float(32)),
         c = Buffer::make("C", Float(32));
  Var io("io");
  Expr idx = Ramp::make(Mul::make(io, i64(kLanes)), i64(1), kLanes);
  Stmt body = Store::make(c, Add::make(Load::make(a, idx), Load::make(b, idx)), idx);
  Stmt loop = For::make(io, i64(0), i64(kN / kLanes), ForKind::kParallel, body);
  return {"vector_add",
          {{a, {kN}, Float(32), false}, {b, {kN}, Float(32), false}, {c, {kN}, Float(32), true}},
          loop};
}

// Per row r of A (R x 64): tmp = local copy scaled by Load(S, 0); out = f(tmp) with a mix of
// Select/Min/Max/Cast/math calls, through a LetStmt and an IfThenElse on the row parity.
constexpr int64_t kRows = 8, kCols = 64;
LoweredFunc mixed() {
  Buffer a = Buffer::make("A", Float(32)), s = Buffer::make("S", Float(32)),
         out = Buffer::make("Out", Float(32));
  Buffer tmp = Buffer::make("tmp", Float(32));
  Var r("r"), j("j"), k("k"), base("base");
  Expr x = Load::make(tmp, j);
  Expr f = Add::make(Call::make(CallOp::kSigmoid, {x}), Call::make(CallOp::kTanh, {x}));
  f = Add::make(f, Call::make(CallOp::kSqrt, {Call::make(CallOp::kAbs, {x})}));
  f = Add::make(f, Max::make(x, FloatImm::make(0.0)));
  f = Add::make(f, Min::make(Call::make(CallOp::kExp, {x}), FloatImm::make(2.0)));
  f = Add::make(f, Cast::make(Float(32), Cast::make(Int(32), Mul::make(x, FloatImm::make(10.0)))));
  f = Select::make(LT::make(x, FloatImm::make(-0.5)), FloatImm::make(-1.0), f);
  Stmt fill = For::make(
      k, i64(0), i64(kCols), ForKind::kSerial,
      Store::make(tmp, Mul::make(Load::make(a, Add::make(base, k)), Load::make(s, i64(0))), k));
  Stmt even =
      For::make(j, i64(0), i64(kCols), ForKind::kSerial, Store::make(out, f, Add::make(base, j)));
  Stmt odd = For::make(
      j, i64(0), i64(kCols), ForKind::kSerial,
      Store::make(
          out,
          Call::make(CallOp::kLog, {Add::make(Call::make(CallOp::kAbs, {x}), FloatImm::make(1.0))}),
          Add::make(base, j)));
  Stmt row =
      Block::make({fill, IfThenElse::make(EQ::make(Mod::make(r, i64(2)), i64(0)), even, odd)});
  Stmt body = LetStmt::make(base, Mul::make(r, i64(kCols)), Allocate::make(tmp, i64(kCols), row));
  Stmt loop = For::make(r, i64(0), i64(kRows), ForKind::kParallel, body);
  return {"mixed",
          {{a, {kRows, kCols}, Float(32), false},
           {s, {1}, Float(32), false},
           {out, {kRows, kCols}, Float(32), true}},
          loop};
}

float mixed_reference(float x, int64_t row) {
  if (row % 2 == 1) return std::log(std::fabs(x) + 1.0f);
  if (x < -0.5f) return -1.0f;
  float f =
      1.0f / (1.0f + std::exp(-x)) + std::tanh(x) + std::sqrt(std::fabs(x)) + std::max(x, 0.0f);
  f += std::min(std::exp(x), 2.0f);
  f += static_cast<float>(static_cast<int32_t>(x * 10.0f));
  return f;
}

// Q[i] = floor((i - 50) / d), M[i] = floor-mod, for d = 7 (constant), 8 (power of two) and
// D[0] = -3 (loaded), checking floor semantics on negative numbers.
LoweredFunc floor_div() {
  Buffer d = Buffer::make("D", Int(64)), q = Buffer::make("Q", Int(64)),
         m = Buffer::make("M", Int(64));
  Var i("i");
  Expr x = Sub::make(i, i64(50));
  std::vector<Stmt> stores;
  std::vector<Expr> divisors = {i64(7), i64(8), Load::make(d, i64(0))};
  for (size_t t = 0; t < divisors.size(); ++t) {
    Expr at = Add::make(i, i64(static_cast<int64_t>(t) * 100));
    stores.push_back(Store::make(q, Div::make(x, divisors[t]), at));
    stores.push_back(Store::make(m, Mod::make(x, divisors[t]), at));
  }
  Stmt loop = For::make(i, i64(0), i64(100), ForKind::kSerial, Block::make(stores));
  return {"floor_div",
          {{d, {1}, Int(64), false}, {q, {300}, Int(64), true}, {m, {300}, Int(64), true}},
          loop};
}

// T = transpose of a 32 x 32 matrix A with 8-lane strided (gather) loads and dense stores.
LoweredFunc transpose() {
  Buffer a = Buffer::make("A", Float(32)), t = Buffer::make("T", Float(32));
  Var i("i"), jo("jo");
  Expr src = Ramp::make(Add::make(Mul::make(Mul::make(jo, i64(8)), i64(32)), i), i64(32), 8);
  Expr dst = Ramp::make(Add::make(Mul::make(i, i64(32)), Mul::make(jo, i64(8))), i64(1), 8);
  Stmt body = For::make(
      i, i64(0), i64(32), ForKind::kSerial,
      For::make(jo, i64(0), i64(4), ForKind::kUnrolled, Store::make(t, Load::make(a, src), dst)));
  return {"transpose", {{a, {32, 32}, Float(32), false}, {t, {32, 32}, Float(32), true}}, body};
}

TEST(CodegenIrTest, VectorAddIsVectorizedAndParallel) {
  const LoweredFunc f = vector_add();
  Kernel k = Kernel::load(build(f, Target::host()));
  AlignedBuffer a(kN * 4), b(kN * 4), c(kN * 4);
  testing::fill_uniform(a.as<float>(), kN, 1);
  testing::fill_uniform(b.as<float>(), kN, 2);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    c.poison();
    ASSERT_EQ(k.run({a.data(), b.data(), c.data()}), 0);
    for (int64_t i = 0; i < kN; ++i)
      ASSERT_EQ(c.as<float>()[i], a.as<float>()[i] + b.as<float>()[i]) << i;
  }
  const std::string ir = emit_llvm_ir(f, Target::host(), {}, false);
  EXPECT_NE(ir.find("load <16 x float>"), std::string::npos) << "no explicit vector load";
  EXPECT_NE(ir.find("align 64"), std::string::npos) << "alignment not proven";
  EXPECT_NE(ir.find("ktune_parallel_for"), std::string::npos);
  EXPECT_NE(ir.find("noalias"), std::string::npos);
  if (Target::host().vector_bits() == 512) {
    EXPECT_NE(emit_assembly(f, Target::host()).find("zmm"), std::string::npos) << "no AVX-512 code";
  }
}

void check_mixed(const BuildOptions& options) {
  const LoweredFunc f = mixed();
  Kernel k = Kernel::load(build(f, Target::host(), options));
  AlignedBuffer a(kRows * kCols * 4), s(4), out(kRows * kCols * 4);
  testing::fill_uniform(a.as<float>(), kRows * kCols, 3, -2.0f, 2.0f);
  s.as<float>()[0] = 1.5f;
  out.poison();
  ASSERT_EQ(k.run({a.data(), s.data(), out.data()}), 0);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = 0; j < kCols; ++j) {
      const float x = a.as<float>()[r * kCols + j] * 1.5f;
      EXPECT_NEAR(out.as<float>()[r * kCols + j], mixed_reference(x, r), 1e-4f) << r << "," << j;
    }
  }
}

TEST(CodegenIrTest, MixedScalarCodeOnStack) { check_mixed({}); }

TEST(CodegenIrTest, MixedScalarCodeOnHeap) {
  BuildOptions options;
  options.max_stack_bytes = 16;  // the 256-byte tmp buffer is the runtime's workspace
  const std::string ir = emit_llvm_ir(mixed(), Target::host(), options, false);
  EXPECT_NE(ir.find("ktune_workspace_alloc"), std::string::npos);
  EXPECT_NE(ir.find("ktune_workspace_free"), std::string::npos);
  check_mixed(options);
}

TEST(CodegenIrTest, IntegerDivisionFloors) {
  Kernel k = Kernel::load(build(floor_div(), Target::host()));
  AlignedBuffer d(8), q(300 * 8), m(300 * 8);
  d.as<int64_t>()[0] = -3;
  q.poison(0x5A);
  m.poison(0x5A);
  ASSERT_EQ(k.run({d.data(), q.data(), m.data()}), 0);
  const int64_t divisors[] = {7, 8, -3};
  for (int t = 0; t < 3; ++t) {
    for (int64_t i = 0; i < 100; ++i) {
      const int64_t x = i - 50, y = divisors[t];
      const int64_t fq =
          static_cast<int64_t>(std::floor(static_cast<double>(x) / static_cast<double>(y)));
      EXPECT_EQ(q.as<int64_t>()[t * 100 + i], fq) << x << " / " << y;
      EXPECT_EQ(m.as<int64_t>()[t * 100 + i], x - fq * y) << x << " % " << y;
    }
  }
}

TEST(CodegenIrTest, StridedGatherTransposes) {
  Kernel k = Kernel::load(build(transpose(), Target::host()));
  AlignedBuffer a(32 * 32 * 4), t(32 * 32 * 4);
  testing::fill_uniform(a.as<float>(), 32 * 32, 4);
  t.poison();
  ASSERT_EQ(k.run({a.data(), t.data()}), 0);
  for (int i = 0; i < 32; ++i) {
    for (int j = 0; j < 32; ++j) ASSERT_EQ(t.as<float>()[i * 32 + j], a.as<float>()[j * 32 + i]);
  }
}

TEST(CodegenIrTest, AArch64MatchesHost) {
  if (!testing::cross_tools_available()) GTEST_SKIP() << "cross tools missing";
  const Target arm = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon");
  {
    AlignedBuffer a(kN * 4), b(kN * 4), c(kN * 4);
    testing::fill_uniform(a.as<float>(), kN, 1);
    testing::fill_uniform(b.as<float>(), kN, 2);
    c.poison();
    auto res = testing::run_on_aarch64(build(vector_add(), arm), {a.copy(), b.copy(), c.copy()});
    Kernel k = Kernel::load(build(vector_add(), Target::host()));
    ASSERT_EQ(k.run({a.data(), b.data(), c.data()}), 0);
    EXPECT_EQ(res[2], c.copy());
  }
  {
    AlignedBuffer a(kRows * kCols * 4), s(4), out(kRows * kCols * 4);
    testing::fill_uniform(a.as<float>(), kRows * kCols, 3, -2.0f, 2.0f);
    s.as<float>()[0] = 1.5f;
    out.poison();
    auto res = testing::run_on_aarch64(build(mixed(), arm), {a.copy(), s.copy(), out.copy()});
    const float* arm_out = reinterpret_cast<const float*>(res[2].data());
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t j = 0; j < kCols; ++j) {
        const float x = a.as<float>()[r * kCols + j] * 1.5f;
        EXPECT_NEAR(arm_out[r * kCols + j], mixed_reference(x, r), 1e-4f) << r << "," << j;
      }
    }
  }
  {
    AlignedBuffer d(8), q(300 * 8), m(300 * 8);
    d.as<int64_t>()[0] = -3;
    q.poison(0x5A);
    m.poison(0x5A);
    auto res = testing::run_on_aarch64(build(floor_div(), arm), {d.copy(), q.copy(), m.copy()});
    Kernel k = Kernel::load(build(floor_div(), Target::host()));
    ASSERT_EQ(k.run({d.data(), q.data(), m.data()}), 0);
    EXPECT_EQ(res[1], q.copy());
    EXPECT_EQ(res[2], m.copy());
  }
}

ErrorKind build_error(const LoweredFunc& f) {
  try {
    build(f, Target::host());
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kUnknown;
}

TEST(CodegenIrTest, UnsupportedIrIsABuildError) {
  Buffer a = Buffer::make("A", Float(32));
  Var i("i"), ghost("ghost");
  // A multi-dimensional BufferStore never survives lowering.
  LoweredFunc f1{
      "bad1", {{a, {4}, Float(32), true}}, BufferStore::make(a, FloatImm::make(1.0), {i64(0)})};
  EXPECT_EQ(build_error(f1), ErrorKind::kBuild);
  // A variable that nothing binds.
  LoweredFunc f2{"bad2", {{a, {4}, Float(32), true}}, Store::make(a, FloatImm::make(1.0), ghost)};
  EXPECT_EQ(build_error(f2), ErrorKind::kBuild);
  // A buffer that is neither an argument nor allocated.
  Buffer stray = Buffer::make("stray", Float(32));
  LoweredFunc f3{
      "bad3", {{a, {4}, Float(32), true}}, Store::make(stray, FloatImm::make(1.0), i64(0))};
  EXPECT_EQ(build_error(f3), ErrorKind::kBuild);
  // An allocation of non-constant size.
  Buffer local = Buffer::make("local", Float(32));
  LoweredFunc f4{"bad4",
                 {{a, {4}, Float(32), true}},
                 For::make(i, i64(0), i64(4), ForKind::kSerial,
                           Allocate::make(local, Add::make(i, i64(1)),
                                          Store::make(local, FloatImm::make(1.0), i64(0))))};
  EXPECT_EQ(build_error(f4), ErrorKind::kBuild);
}

}  // namespace
}  // namespace ktune::codegen
