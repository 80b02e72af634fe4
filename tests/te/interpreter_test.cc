// Tests of the interpreter, the direct evaluator, host buffers and the simplifier.
#include "te/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/error.h"
#include "te/ir_printer.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/simplify.h"
#include "tests/te/poison.h"

namespace ktune::te {
namespace {

// Lowers outputs with the default schedule and runs it on the given inputs.
std::vector<HostBuffer> run_default(const std::vector<Tensor>& inputs,
                                    const std::vector<Tensor>& outputs,
                                    std::vector<HostBuffer*> in_bufs) {
  Schedule s = create_schedule(outputs);
  std::vector<Tensor> args = inputs;
  args.insert(args.end(), outputs.begin(), outputs.end());
  LoweredFunc f = lower(s, args, "f");
  std::vector<HostBuffer> outs;
  for (const Tensor& t : outputs) outs.emplace_back(t.shape(), t.dtype());
  for (HostBuffer& b : outs) {
    testing::poison(b);
    in_bufs.push_back(&b);
  }
  interpret(f, in_bufs);
  return outs;
}

TEST(InterpreterTest, FloorDivisionAndModuloOfNegatives) {
  Tensor A = placeholder({6}, Int(32), "A");
  Tensor Q = compute(
      {6}, [&](Var i) { return A(i) / 3; }, "Q");
  Tensor R = compute(
      {6}, [&](Var i) { return A(i) % 3; }, "R");
  HostBuffer a({6}, Int(32));
  int32_t vals[6] = {-7, -6, -1, 0, 5, 7};
  for (int i = 0; i < 6; ++i) a.set(i, vals[i]);
  auto outs = run_default({A}, {Q, R}, {&a});
  int32_t q[6] = {-3, -2, -1, 0, 1, 2}, r[6] = {2, 0, 2, 0, 2, 1};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(outs[0].as<int32_t>()[i], q[i]) << vals[i];
    EXPECT_EQ(outs[1].as<int32_t>()[i], r[i]) << vals[i];
  }
  auto ev = evaluate({Q, R}, {{A, &a}});
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(ev[0].as<int32_t>()[i], q[i]);
    EXPECT_EQ(ev[1].as<int32_t>()[i], r[i]);
  }
  EXPECT_EQ(floor_div(-7, 2), -4);
  EXPECT_EQ(floor_mod(-7, 2), 1);
  EXPECT_EQ(floor_mod(7, -2), -1);
}

TEST(InterpreterTest, Int8StorageWithInt32Accumulation) {
  Tensor A = placeholder({3, 5}, Int(8), "A");
  Tensor B = placeholder({5, 4}, UInt(8), "B");
  IterVar k = reduce_axis({0, 5}, "k");
  Tensor C = compute(
      {3, 4}, [&](Var i, Var j) { return sum(cast(Int(32), A(i, k)) * cast(Int(32), B(k, j)), k); },
      "C");
  HostBuffer a({3, 5}, Int(8)), b({5, 4}, UInt(8));
  a.fill_random(1, -128, 127);
  b.fill_random(2, 0, 255);
  auto outs = run_default({A, B}, {C}, {&a, &b});
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      int32_t want = 0;
      for (int kk = 0; kk < 5; ++kk)
        want += a.as<int8_t>()[i * 5 + kk] * b.as<uint8_t>()[kk * 4 + j];
      EXPECT_EQ(outs[0].as<int32_t>()[i * 4 + j], want);
    }
  }
}

TEST(InterpreterTest, Int8ArithmeticWraps) {
  Tensor A = placeholder({2}, Int(8), "A");
  Tensor B = compute(
      {2}, [&](Var i) { return A(i) + A(i); }, "B");
  HostBuffer a({2}, Int(8));
  a.set(0, 100);
  a.set(1, -100);
  auto outs = run_default({A}, {B}, {&a});
  EXPECT_EQ(outs[0].as<int8_t>()[0], static_cast<int8_t>(-56));
  EXPECT_EQ(outs[0].as<int8_t>()[1], static_cast<int8_t>(56));
}

TEST(InterpreterTest, Float64AndMathCalls) {
  Tensor A = placeholder({4}, Float(64), "A");
  Tensor B = compute(
      {4},
      [&](Var i) {
        return sqrt(abs(A(i))) + exp(A(i)) - log(abs(A(i)) + 1.0) * tanh(A(i)) + sigmoid(A(i)) +
               pow(abs(A(i)), 1.5) + floor(A(i)) * ceil(A(i));
      },
      "B");
  HostBuffer a({4}, Float(64));
  a.fill_random(3, -2, 2);
  auto outs = run_default({A}, {B}, {&a});
  for (int i = 0; i < 4; ++i) {
    double x = a.as<double>()[i];
    double want = std::sqrt(std::fabs(x)) + std::exp(x) -
                  std::log(std::fabs(x) + 1.0) * std::tanh(x) + 1.0 / (1.0 + std::exp(-x)) +
                  std::pow(std::fabs(x), 1.5) + std::floor(x) * std::ceil(x);
    EXPECT_DOUBLE_EQ(outs[0].as<double>()[i], want);
  }
}

TEST(InterpreterTest, VectorExpressions) {
  Buffer a = Buffer::make("a", Float(32)), b = Buffer::make("b", Float(32));
  Var i("i");
  // b[ramp(0,1,4)] = a[ramp(0,2,4)] * x4(a[1]) ; b[4..7] = gather a[7-l] for l in 0..3
  Expr strided = Load::make(a, Ramp::make(IntImm::make(0), IntImm::make(2), 4));
  Expr bcast = Broadcast::make(Load::make(a, IntImm::make(1)), 4);
  Stmt s1 =
      Store::make(b, Mul::make(strided, bcast), Ramp::make(IntImm::make(0), IntImm::make(1), 4));
  Expr gather = Load::make(a, Sub::make(Broadcast::make(IntImm::make(7), 4),
                                        Ramp::make(IntImm::make(0), IntImm::make(1), 4)));
  Stmt s2 = Store::make(b, gather, Ramp::make(IntImm::make(4), IntImm::make(1), 4));
  LoweredFunc f{"vec",
                {BufferArg{a, {8}, Float(32), false}, BufferArg{b, {8}, Float(32), true}},
                Block::make({s1, s2})};
  HostBuffer ab({8}, Float(32)), bb({8}, Float(32));
  for (int k = 0; k < 8; ++k) ab.set(k, k + 1);
  testing::poison(bb);
  interpret(f, std::vector<HostBuffer*>{&ab, &bb});
  float want[8] = {2, 6, 10, 14, 8, 7, 6, 5};
  for (int k = 0; k < 8; ++k) EXPECT_FLOAT_EQ(bb.as<float>()[k], want[k]) << k;
}

TEST(InterpreterTest, OutOfBoundsAccessIsAnInternalError) {
  Buffer a = Buffer::make("a", Float(32));
  LoweredFunc f{"oob",
                {BufferArg{a, {4}, Float(32), true}},
                Store::make(a, FloatImm::make(1.0), IntImm::make(4))};
  HostBuffer ab({4}, Float(32));
  try {
    interpret(f, std::vector<HostBuffer*>{&ab});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(std::string(e.what()).find("a[4]"), std::string::npos);
  }
  EXPECT_THROW(interpret(f, std::vector<void*>{}), Error);
}

TEST(InterpreterTest, EvaluateSelectIsLazy) {
  Tensor A = placeholder({4}, Float(32), "A");
  Tensor B = compute(
      {6}, [&](Var i) { return select(i >= 1 && i < 5, A(i - 1), 0.0f); }, "B");
  HostBuffer a({4}, Float(32));
  for (int k = 0; k < 4; ++k) a.set(k, k + 1);
  auto ev = evaluate({B}, {{A, &a}});
  float want[6] = {0, 1, 2, 3, 4, 0};
  for (int k = 0; k < 6; ++k) EXPECT_FLOAT_EQ(ev[0].as<float>()[k], want[k]);
  auto outs = run_default({A}, {B}, {&a});
  EXPECT_EQ(max_relative_error(outs[0], ev[0]), 0.0);
}

TEST(HostBufferTest, SeededFillIsReproducibleAndAligned) {
  HostBuffer a({3, 7}, Float(32)), b({3, 7}, Float(32)), c({3, 7}, Float(32));
  a.fill_random(42);
  b.fill_random(42);
  c.fill_random(43);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  EXPECT_EQ(max_relative_error(a, b), 0.0);
  EXPECT_GT(max_relative_error(a, c), 0.0);
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    EXPECT_GE(a.get(i), -1.0);
    EXPECT_LT(a.get(i), 1.0);
  }
  HostBuffer u({100}, UInt(8));
  u.fill_random(1, 0, 3);
  for (int64_t i = 0; i < 100; ++i) EXPECT_TRUE(u.get(i) >= 0 && u.get(i) <= 3);
}

TEST(SimplifyTest, LinearFormsAndRanges) {
  Var x("x"), y("y");
  EXPECT_EQ(to_string(simplify(Sub::make(Add::make(Mul::make(x, IntImm::make(8)), IntImm::make(7)),
                                         Mul::make(x, IntImm::make(8))))),
            "7");
  VarRanges r{{x.get(), {0, 3}}, {y.get(), {0, 7}}};
  Expr e = Add::make(Mul::make(x, IntImm::make(8)), y);
  EXPECT_EQ(to_string(simplify(Div::make(e, IntImm::make(8)), r)), "x");
  EXPECT_EQ(to_string(simplify(Mod::make(e, IntImm::make(8)), r)), "y");
  EXPECT_TRUE(can_prove(LT::make(e, IntImm::make(32)), r));
  EXPECT_FALSE(can_prove(LT::make(e, IntImm::make(31)), r));
  auto b = const_bound(e, r);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->first, 0);
  EXPECT_EQ(b->second, 31);
}

}  // namespace
}  // namespace ktune::te
