// Property tests: random valid schedules of six operators interpret to the unscheduled result.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <unordered_set>

#include "support/error.h"
#include "te/interpreter.h"
#include "te/ir_printer.h"
#include "te/ir_visitor.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "tests/te/poison.h"
#include "tests/te/random_schedule.h"
#include "tests/te/te_ops.h"

namespace ktune::te {
namespace {

using testing::OpDef;
using testing::RandomScheduler;

constexpr int kSchedulesPerOp = 200;
constexpr double kTolerance = 1e-4;

// How often each feature occurred, so that the test proves it covers what it claims.
struct Coverage {
  int compute_at = 0, cache_write = 0, cache_read = 0, inline_ = 0, guard = 0, vector = 0, fuse = 0,
      tail = 0;
  void add(const std::string& log, const std::string& ir) {
    compute_at += log.find("compute_at") != std::string::npos;
    cache_write += log.find("cache_write") != std::string::npos;
    cache_read += log.find("cache_read") != std::string::npos;
    inline_ += log.find("inline") != std::string::npos;
    fuse += log.find("fuse") != std::string::npos;
    tail += log.find("non-divisible") != std::string::npos;
    guard += ir.find("if (") != std::string::npos;
    vector += ir.find("ramp(") != std::string::npos;
  }
};

void check_op(const OpDef& op, uint64_t seed) {
  Coverage cov;
  std::vector<HostBuffer> inputs;
  std::vector<std::pair<Tensor, const HostBuffer*>> in_pairs;
  inputs.reserve(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    inputs.emplace_back(op.inputs[i].shape(), op.inputs[i].dtype());
    inputs.back().fill_random(seed + i);
  }
  for (size_t i = 0; i < op.inputs.size(); ++i) in_pairs.emplace_back(op.inputs[i], &inputs[i]);
  std::vector<HostBuffer> ref = evaluate(op.outputs, in_pairs);

  RandomScheduler gen(seed);
  for (int n = 0; n < kSchedulesPerOp; ++n) {
    std::string log;
    Schedule s = gen.make(op, &log);
    LoweredFunc f;
    // Every other schedule keeps its guards (no loop partitioning), so both paths are checked.
    LowerOptions options;
    options.partition_loops = n % 2 == 0;
    try {
      f = lower(s, op.args(), op.name, options);
    } catch (const Error& e) {
      FAIL() << op.name << " schedule " << n << " did not lower: " << e.what() << "\n" << log;
    }
    std::vector<HostBuffer> outs;
    std::vector<HostBuffer*> args;
    for (HostBuffer& b : inputs) args.push_back(&b);
    for (const Tensor& t : op.outputs) outs.emplace_back(t.shape(), t.dtype());
    for (HostBuffer& b : outs) {
      testing::poison(b);
      args.push_back(&b);
    }
    try {
      interpret(f, args);
    } catch (const Error& e) {
      FAIL() << op.name << " schedule " << n << " failed to run: " << e.what() << "\n"
             << log << to_string(f);
    }
    for (size_t o = 0; o < outs.size(); ++o) {
      double err = max_relative_error(outs[o], ref[o]);
      ASSERT_LE(err, kTolerance) << op.name << " schedule " << n << "\n" << log << to_string(f);
    }
    cov.add(log, to_string(f));
  }
  // Every claimed feature is exercised many times (cache_write only exists for reductions).
  EXPECT_GE(cov.compute_at, 40) << op.name;
  EXPECT_GE(gen.nested, 2) << op.name;  // 19..56 for the ops with more stages
  EXPECT_GE(cov.cache_read, 30) << op.name;
  EXPECT_GE(cov.tail, 60) << op.name;
  EXPECT_GE(cov.guard, 10) << op.name;
  EXPECT_GE(cov.vector, 20) << op.name;
  EXPECT_GE(cov.fuse, 20) << op.name;
  EXPECT_GE(cov.cache_write, 40) << op.name;
  if (op.name != "matmul" && op.name != "max_pool") {
    EXPECT_GE(cov.inline_, 30) << op.name;
  }
  std::printf(
      "%s: compute_at %d cache_write %d cache_read %d inline %d fuse %d non-divisible %d guarded "
      "%d vectorized %d (of %d)\n",
      op.name.c_str(), cov.compute_at, cov.cache_write, cov.cache_read, cov.inline_, cov.fuse,
      cov.tail, cov.guard, cov.vector, kSchedulesPerOp);
  std::printf("%s: %d attachments above the direct consumer\n", op.name.c_str(), gen.nested);
}

TEST(PropertyTest, Matmul) { check_op(testing::matmul(16, 12, 10), 1); }
TEST(PropertyTest, MatmulBiasRelu) { check_op(testing::matmul_bias_relu(12, 9, 7), 2); }
TEST(PropertyTest, Conv2dPaddedStrided) { check_op(testing::conv2d(1, 3, 7, 7, 4, 3, 3, 2, 1), 3); }
TEST(PropertyTest, DepthwiseConv2d) { check_op(testing::depthwise_conv2d(1, 3, 6, 6, 3, 1), 4); }
TEST(PropertyTest, MaxPool) { check_op(testing::max_pool(1, 2, 9, 9, 3, 2), 5); }
TEST(PropertyTest, Softmax) { check_op(testing::softmax(5, 11), 6); }

}  // namespace
}  // namespace ktune::te
