// Tests of te's IR nodes, the tensor language and the printer.
#include "te/ir.h"

#include <gtest/gtest.h>

#include "support/error.h"
#include "te/ir_printer.h"
#include "te/ir_visitor.h"
#include "te/tensor.h"

namespace ktune::te {
namespace {

TEST(IrTest, DataTypes) {
  EXPECT_EQ(Float(32).str(), "float32");
  EXPECT_EQ(Float(32).with_lanes(8).str(), "float32x8");
  EXPECT_TRUE(Float(32).with_lanes(8).is_vector());
  EXPECT_EQ(Bool().str(), "bool");
  EXPECT_EQ(UInt(8).bytes(), 1);
}

TEST(IrTest, PrintsCLikeExpressions) {
  Var i("i"), j("j");
  Buffer a = Buffer::make("A", Float(32));
  Expr e = Load::make(a, Add::make(Mul::make(i, IntImm::make(16)), j));
  EXPECT_EQ(to_string(e), "A[((i*16) + j)]");
  Expr r = Load::make(a, Ramp::make(Mul::make(i, IntImm::make(16)), IntImm::make(1), 8));
  EXPECT_EQ(to_string(r), "A[ramp((i*16), 1, 8)]");
  EXPECT_EQ(r.dtype(), Float(32, 8));
  Stmt s = For::make(i, 0, 4, ForKind::kParallel, Store::make(a, FloatImm::make(1.5), i));
  EXPECT_EQ(to_string(s), "parallel for (i, 0, 4) {\n  A[i] = 1.5f;\n}\n");
}

TEST(IrTest, TypeMismatchIsInternalError) {
  try {
    Add::make(Var("i"), FloatImm::make(1.0));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
  }
}

TEST(IrTest, SubstituteAndMutatorKeepIdentity) {
  Var i("i"), j("j");
  Expr e = Add::make(i, j);
  EXPECT_TRUE(substitute(e, {}).same_as(e));
  Expr f = substitute(e, {{i, IntImm::make(3)}});
  EXPECT_EQ(to_string(f), "(3 + j)");
  EXPECT_TRUE(uses_var(f, j));
  EXPECT_FALSE(uses_var(f, i));
}

TEST(TensorTest, ComputeAndReduce) {
  Tensor A = placeholder({4, 5}, Float(32), "A");
  Tensor B = placeholder({5, 3}, Float(32), "B");
  IterVar k = reduce_axis({0, 5}, "k");
  Tensor C = compute(
      {4, 3}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), k); }, "C");
  EXPECT_EQ(C.dtype(), Float(32));
  ASSERT_NE(C->body.as<Reduce>(), nullptr);
  EXPECT_EQ(C->inputs.size(), 2u);
  Tensor D = compute(
      {4, 3}, [&](Var i, Var j) { return max(C(i, j), 0.0f) + 1; }, "D");
  EXPECT_EQ(to_string(D->body), "(max(C(D.i, D.j), 0.0f) + 1.0f)");
  auto order = topo_order({D});
  ASSERT_EQ(order.size(), 4u);
  EXPECT_TRUE(order[3].same_as(D));
  EXPECT_THROW(compute(
                   {4}, [&](Var i) { return sum(A(i, k), k) + 1.0f; }, "bad"),
               Error);
  EXPECT_THROW(A(1), Error);
  // Braced axis lists select the reduction, two Exprs the binary min/max.
  Tensor R = compute(
      {4}, [&](Var i) { return max(A(i, k), {k}); }, "R");
  ASSERT_NE(R->body.as<Reduce>(), nullptr);
  EXPECT_EQ(R->body.as<Reduce>()->op, ReduceOp::kMax);
  Tensor S = compute(
      {4}, [&](Var i) { return min(A(i, 0), A(i, 1)); }, "S");
  EXPECT_NE(S->body.as<Min>(), nullptr);
  EXPECT_EQ(to_string(S->body), "min(A(S.i, 0), A(S.i, 1))");
  EXPECT_THROW(sum(A(0, 0), std::vector<IterVar>{}), Error);
}

}  // namespace
}  // namespace ktune::te
