// Property tests: random valid schedules of six operators interpret to the unscheduled result.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <unordered_set>

#include "support/error.h"
#include "te/interpreter.h"
#include "te/ir_visitor.h"
#include "te/ir_printer.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "tests/te/te_ops.h"

namespace ktune::te {
namespace {

using testing::OpDef;

constexpr int kSchedulesPerOp = 200;
constexpr double kTolerance = 1e-4;

class RandomScheduler {
 public:
  explicit RandomScheduler(uint64_t seed) : rng_(seed) {}

  // Applies random primitives to a fresh schedule of op; returns a description for failures.
  Schedule make(const OpDef& op, std::string* log) {
    Schedule s = create_schedule(op.outputs);
    log_ = log;
    // Caches first: they rewrite stage bodies.
    std::vector<Tensor> reductions;
    for (const StageNode& st : s.node().stages) {
      if (!st.is_placeholder && st.body.as<Reduce>()) reductions.push_back(st.tensor);
    }
    for (const Tensor& t : reductions) {
      if (!coin(0.4)) continue;
      s.cache_write(t, "local");
      note("cache_write " + t.name());
    }
    if (coin(0.5)) {
      const Tensor& in = op.inputs[pick(op.inputs.size())];
      std::vector<Tensor> readers;
      for (const StageNode& st : s.node().stages) {
        if (!st.is_placeholder && reads(st.body, in)) readers.push_back(st.tensor);
      }
      if (!readers.empty()) {
        Tensor r = readers[pick(readers.size())];
        s.cache_read(in, {r}, "shared");
        note("cache_read " + in.name() + " for " + r.name());
      }
    }
    const auto& stages = s.node().stages;
    // Inlining decisions first (consumers' effective readers depend on them).
    for (const StageNode& st : stages) {
      if (st.is_placeholder || st.is_output || !st.reduce_axes.empty()) continue;
      if (coin(0.35)) {
        s[st.tensor].compute_inline();
        note("inline " + st.name);
      }
    }
    // Consumers before producers: a producer attaches to its consumer's final loops.
    for (int i = static_cast<int>(stages.size()) - 1; i >= 0; --i) {
      const StageNode& st = stages[i];
      if (st.is_placeholder || st.attach == AttachKind::kInline) continue;
      Stage stage = s[st.tensor];
      random_loops(stage);
      if (st.is_output) continue;
      std::vector<int> cons;
      effective_consumers(s, i, &cons);
      if (cons.size() == 1 && coin(0.6)) {
        // The consumer, or (sometimes) a stage that the consumer is attached into, at a loop
        // that encloses the consumer.
        int target = cons[0];
        size_t max_leaf = stages[target].leaves.size();
        while (stages[target].attach == AttachKind::kAt && coin(0.7)) {
          const StageNode& t = stages[target];
          const auto& up = stages[t.attach_stage].leaves;
          max_leaf = 0;
          while (!up[max_leaf].same_as(t.attach_ivar)) ++max_leaf;
          ++max_leaf;
          target = t.attach_stage;
        }
        const StageNode& cn = stages[target];
        IterVar leaf = cn.leaves[pick(max_leaf)];
        s[st.tensor].compute_at(s[cn.tensor], leaf);
        note("compute_at " + st.name + " -> " + cn.name + " @ " + leaf.name());
        nested += target != cons[0];
      }
    }
    return s;
  }

 private:
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  void note(const std::string& s) { *log_ += s + "\n"; }

  static bool reads(const Expr& body, const Tensor& t) {
    struct Finder : IRVisitor {
      const TensorNode* t;
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

  static void effective_consumers(const Schedule& s, int j, std::vector<int>* out) {
    const auto& stages = s.node().stages;
    for (size_t i = 0; i < stages.size(); ++i) {
      if (static_cast<int>(i) == j || stages[i].is_placeholder || !reads(stages[i].body, stages[j].tensor)) continue;
      if (stages[i].attach == AttachKind::kInline) {
        effective_consumers(s, static_cast<int>(i), out);
      } else if (std::find(out->begin(), out->end(), static_cast<int>(i)) == out->end()) {
        out->push_back(static_cast<int>(i));
      }
    }
  }

  void random_loops(Stage st) {
    int splits = static_cast<int>(pick(4));
    for (int n = 0; n < splits; ++n) {
      auto leaves = st.leaf_iter_vars();
      IterVar l = leaves[pick(leaves.size())];
      int64_t f = 1 + static_cast<int64_t>(pick(static_cast<size_t>(l.extent) + 1));
      if (l.extent % f != 0) note("(non-divisible)");
      if (coin(0.2)) {
        st.split_nparts(l, f);
        note("split_nparts " + l.name() + " " + std::to_string(f));
      } else {
        st.split(l, f);
        note("split " + l.name() + " " + std::to_string(f));
      }
    }
    if (coin(0.3)) {
      auto leaves = st.leaf_iter_vars();
      if (leaves.size() >= 2) {
        size_t p = pick(leaves.size() - 1);
        if (leaves[p].kind == leaves[p + 1].kind) {
          st.fuse(leaves[p], leaves[p + 1]);
          note("fuse " + leaves[p].name() + " " + leaves[p + 1].name());
        }
      }
    }
    if (coin(0.6)) {
      auto leaves = st.leaf_iter_vars();
      std::shuffle(leaves.begin(), leaves.end(), rng_);
      st.reorder(leaves);
      std::string order;
      for (const IterVar& l : leaves) order += l.name() + " ";
      note("reorder " + order);
    }
    auto leaves = st.leaf_iter_vars();
    if (coin(0.3)) {
      IterVar l = leaves[pick(leaves.size())];
      if (l.extent <= 16) {
        st.unroll(l);
        note("unroll " + l.name());
      }
    }
    if (coin(0.3)) {
      IterVar l = leaves[pick(leaves.size())];
      if (!l.is_reduce()) {
        st.parallel(l);
        note("parallel " + l.name());
      }
    }
    if (!leaves.back().is_reduce() && coin(0.5)) {
      st.vectorize(leaves.back());
      note("vectorize " + leaves.back().name());
    }
  }

  std::mt19937_64 rng_;
  std::string* log_ = nullptr;

 public:
  int nested = 0;  // attachments above the direct consumer
};

// How often each feature occurred, so that the test proves it covers what it claims.
struct Coverage {
  int compute_at = 0, cache_write = 0, cache_read = 0, inline_ = 0, guard = 0, vector = 0, fuse = 0, tail = 0;
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
    for (HostBuffer& b : outs) args.push_back(&b);
    try {
      interpret(f, args);
    } catch (const Error& e) {
      FAIL() << op.name << " schedule " << n << " failed to run: " << e.what() << "\n" << log << to_string(f);
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
  std::printf("%s: compute_at %d cache_write %d cache_read %d inline %d fuse %d non-divisible %d guarded %d vectorized %d (of %d)\n",
              op.name.c_str(), cov.compute_at, cov.cache_write, cov.cache_read, cov.inline_, cov.fuse, cov.tail, cov.guard,
              cov.vector, kSchedulesPerOp);
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
