// Defines RandomScheduler: random valid schedules of te's test operators, shared by te's
// property tests and codegen's, so that both check exactly the same schedules.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "te/ir_visitor.h"
#include "te/schedule.h"
#include "tests/te/te_ops.h"

namespace ktune::te::testing {

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
      if (static_cast<int>(i) == j || stages[i].is_placeholder ||
          !reads(stages[i].body, stages[j].tensor))
        continue;
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

}  // namespace ktune::te::testing
