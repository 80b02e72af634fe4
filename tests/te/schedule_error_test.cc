// Error tests: each kind of invalid schedule throws kInvalidSchedule naming the stage and the axis.
#include <gtest/gtest.h>

#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "tests/te/te_ops.h"

namespace ktune::te {
namespace {

// Runs f, expects Error(kInvalidSchedule) whose message contains every string of `names`.
template <typename F>
void expect_invalid(F&& f, const std::vector<std::string>& names) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidSchedule) << e.what();
    for (const std::string& n : names)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " lacks " << n;
  }
}

struct Chain {
  Tensor A, P, Q, R;
  Chain() {
    A = placeholder({8, 8}, Float(32), "A");
    P = compute(
        {8, 8}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "P");
    Q = compute(
        {8, 8}, [&](Var i, Var j) { return P(i, j) + 1.0f; }, "Q");
    R = compute(
        {8, 8}, [&](Var i, Var j) { return Q(i, j) + P(j, i); }, "R");
  }
};

TEST(ScheduleErrorTest, SplitAnAxisTwice) {
  auto op = testing::matmul(8, 8, 8);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  IterVar i = s[C].axis(0);
  s[C].split(i, 4);
  expect_invalid([&] { s[C].split(i, 2); }, {"C", "C.i", "already split"});
}

TEST(ScheduleErrorTest, ReorderAxesOfAnotherStage) {
  Chain c;
  Schedule s = create_schedule({c.R});
  expect_invalid(
      [&] {
        s[c.R].reorder({s[c.Q].axis(1), s[c.R].axis(0)});
      },
      {"stage R", "Q.j", "not an axis of this stage"});
}

TEST(ScheduleErrorTest, VectorizeAReductionAxis) {
  auto op = testing::matmul(8, 8, 8);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  expect_invalid([&] { s[C].vectorize(s[C].reduce_axis(0)); }, {"C", "k", "reduction"});
}

TEST(ScheduleErrorTest, VectorizeANonInnermostLoop) {
  auto op = testing::matmul(8, 8, 8);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  s[C].vectorize(s[C].axis(1));  // k stays inside j
  expect_invalid([&] { lower(s, op.args(), "mm"); }, {"C", "C.j", "innermost"});
}

TEST(ScheduleErrorTest, ParallelAReductionAxis) {
  auto op = testing::matmul(8, 8, 8);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  expect_invalid([&] { s[C].parallel(s[C].reduce_axis(0)); }, {"C", "k"});
}

TEST(ScheduleErrorTest, ComputeAtALoopThatDoesNotEncloseAConsumer) {
  Chain c;
  Schedule s = create_schedule({c.R});
  // P is read by Q and by R: inside Q's loop, R's read is not covered.
  s[c.P].compute_at(s[c.Q], s[c.Q].axis(0));
  expect_invalid([&] { lower(s, {c.A, c.R}, "f"); }, {"stage P", "Q.i", "consumer R"});
  // Attaching Q inside R does not help either: R reads P outside Q's loop.
  s[c.Q].compute_at(s[c.R], s[c.R].axis(1));
  expect_invalid([&] { lower(s, {c.A, c.R}, "f"); }, {"stage P", "Q.i", "consumer R"});
}

TEST(ScheduleErrorTest, ComputeAtAStageThatDoesNotUseIt) {
  Chain c;
  Tensor other = compute(
      {8, 8}, [&](Var i, Var j) { return c.A(i, j) - 1.0f; }, "other");
  Tensor both = compute(
      {8, 8}, [&](Var i, Var j) { return c.R(i, j) + other(i, j); }, "both");
  Schedule s = create_schedule({both});
  expect_invalid([&] { s[other].compute_at(s[c.Q], s[c.Q].axis(0)); },
                 {"stage other", "Q", "does not use it"});
}

TEST(ScheduleErrorTest, ComputeAtALoopOfAnotherStage) {
  Chain c;
  Schedule s = create_schedule({c.R});
  expect_invalid([&] { s[c.Q].compute_at(s[c.R], s[c.P].axis(0)); },
                 {"stage Q", "P.i", "not a loop of R"});
}

TEST(ScheduleErrorTest, ComputeAtAnAttachLoopThatWasSplitLater) {
  Chain c;
  Schedule s = create_schedule({c.R});
  s[c.Q].compute_at(s[c.R], s[c.R].axis(1));
  s[c.R].split(s[c.R].axis(1), 2);
  expect_invalid([&] { lower(s, {c.A, c.R}, "f"); }, {"stage Q", "R.j", "not a loop of R"});
}

TEST(ScheduleErrorTest, Cycles) {
  Chain c;
  Schedule s = create_schedule({c.R});
  expect_invalid([&] { s[c.Q].compute_at(s[c.P], s[c.P].axis(0)); }, {"stage Q", "P", "cycle"});
  expect_invalid([&] { s[c.Q].compute_at(s[c.Q], s[c.Q].axis(0)); }, {"stage Q", "cycle"});
}

TEST(ScheduleErrorTest, InlineAReductionOrAnOutput) {
  auto op = testing::matmul_bias_relu(8, 8, 8);
  Schedule s = create_schedule(op.outputs);
  const StageNode& c = s.node().stages[2];
  ASSERT_EQ(c.name, "C");
  expect_invalid([&] { s[c.tensor].compute_inline(); }, {"stage C", "reduction"});
  expect_invalid([&] { s[op.outputs[0]].compute_inline(); }, {"stage E", "output"});
}

TEST(ScheduleErrorTest, FuseNonAdjacentAxes) {
  auto op = testing::matmul(8, 8, 8);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  expect_invalid([&] { s[C].fuse(s[C].axis(0), s[C].reduce_axis(0)); }, {"C", "C.i", "k"});
  expect_invalid([&] { s[C].fuse(s[C].axis(1), s[C].axis(0)); }, {"C", "not adjacent"});
}

TEST(ScheduleErrorTest, BadFactorsAndLateCacheWrite) {
  auto op = testing::matmul(8, 8, 8);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  expect_invalid([&] { s[C].split(s[C].axis(0), 0); }, {"C", "C.i"});
  s[C].split(s[C].axis(0), 2);
  expect_invalid([&] { s.cache_write(C); }, {"C", "cache_write"});
}

TEST(ScheduleTest, StageHandlesSurviveCacheInsertion) {
  auto op = testing::matmul(8, 8, 8);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  Stage sc = s[C];
  Tensor CC = s.cache_write(C, "local");
  Tensor AS = s.cache_read(op.inputs[0], {CC}, "shared");
  EXPECT_EQ(sc.name(), "C");
  EXPECT_EQ(s[CC].name(), "C.local");
  EXPECT_EQ(s[AS].name(), "A.shared");
  EXPECT_EQ(s.node().stages.size(), 5u);
  auto [io, ii] = sc.split(sc.axis(0), 4);
  s[CC].compute_at(sc, io);
  EXPECT_EQ(s.node().stages[s[CC].index()].attach_stage, sc.index());
}

TEST(ScheduleErrorTest, MissingPlaceholderArgumentIsInvalidArgument) {
  auto op = testing::matmul(8, 8, 8);
  Schedule s = create_schedule(op.outputs);
  try {
    lower(s, {op.inputs[0], op.outputs[0]}, "mm");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("B"), std::string::npos);
  }
}

}  // namespace
}  // namespace ktune::te
