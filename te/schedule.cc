// Implements Schedule and Stage (the primitives only record; lowering interprets them).
#include "te/schedule.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "support/error.h"
#include "te/ir_visitor.h"

namespace ktune::te {

namespace {

[[noreturn]] void invalid(const std::string& stage, const std::string& what) {
  throw Error(ErrorKind::kInvalidSchedule, "schedule: stage " + stage + ": " + what);
}

StageNode make_stage(const Tensor& t) {
  StageNode s;
  s.name = t.name();
  s.tensor = t;
  s.is_placeholder = t.is_placeholder();
  if (s.is_placeholder) return s;
  for (size_t d = 0; d < t.shape().size(); ++d) {
    s.axes.push_back(IterVar{t->axes[d], 0, t.shape()[d], IterKind::kSpatial});
  }
  s.body = t->body;
  if (const Reduce* r = s.body.as<Reduce>()) {
    for (const ReduceAxis& a : r->axes)
      s.reduce_axes.push_back(IterVar{a.var, a.min, a.extent, IterKind::kReduce});
  }
  s.leaves = s.axes;
  s.leaves.insert(s.leaves.end(), s.reduce_axes.begin(), s.reduce_axes.end());
  return s;
}

// Rewrites reads of one tensor into reads of another (same indices).
class ReadRewriter : public IRMutator {
 public:
  ReadRewriter(const TensorNode* from, std::shared_ptr<const TensorNode> to)
      : from_(from), to_(std::move(to)) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const TensorRead* op, const Expr& e) override {
    Expr base = IRMutator::visit(op, e);
    const TensorRead* r = base.as<TensorRead>();
    if (r->tensor.get() != from_) return base;
    return Expr(std::make_shared<TensorRead>(to_->dtype, to_, r->indices));
  }

 private:
  const TensorNode* from_;
  std::shared_ptr<const TensorNode> to_;
};

class ReadCollector : public IRVisitor {
 public:
  std::unordered_set<const TensorNode*> reads;

 protected:
  void visit(const TensorRead* op) override {
    reads.insert(op->tensor.get());
    IRVisitor::visit(op);
  }
};

std::unordered_set<const TensorNode*> reads_of(const Expr& body) {
  ReadCollector c;
  c.visit_expr(body);
  return c.reads;
}

}  // namespace

int ScheduleNode::find(const TensorNode* t) const {
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].tensor.get() == t) return static_cast<int>(i);
  }
  return -1;
}

Schedule create_schedule(const std::vector<Tensor>& outputs) {
  if (outputs.empty()) throw Error(ErrorKind::kInvalidArgument, "create_schedule: no outputs");
  auto n = std::make_shared<ScheduleNode>();
  n->outputs = outputs;
  for (const Tensor& t : topo_order(outputs)) {
    n->stages.push_back(make_stage(t));
    for (const Tensor& o : outputs) n->stages.back().is_output |= o.same_as(t);
  }
  return Schedule(n);
}

Stage Schedule::operator[](const Tensor& t) const {
  int i = node_->find(t.get());
  if (i < 0)
    throw Error(ErrorKind::kInvalidSchedule,
                "schedule: tensor " + t.name() + " is not in this schedule");
  return Stage(node_, node_->stages[i].tensor.get());
}

IterVar Stage::axis(int d) const {
  if (d < 0 || d >= static_cast<int>(node().axes.size()))
    invalid(name(), "no axis " + std::to_string(d));
  return node().axes[d];
}

IterVar Stage::reduce_axis(int d) const {
  if (d < 0 || d >= static_cast<int>(node().reduce_axes.size()))
    invalid(name(), "no reduce axis " + std::to_string(d));
  return node().reduce_axes[d];
}

int Stage::leaf_pos(const IterVar& iv, const char* what) const {
  if (node().is_placeholder) invalid(name(), std::string("cannot ") + what + " a placeholder");
  const auto& leaves = node().leaves;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i].same_as(iv)) return static_cast<int>(i);
  }
  for (const IterRelation& r : node().relations) {
    if ((r.is_split && r.split.parent.same_as(iv)) ||
        (!r.is_split && (r.fuse.outer.same_as(iv) || r.fuse.inner.same_as(iv)))) {
      invalid(name(), std::string("cannot ") + what + " axis " + iv.name() +
                          ": it was already split or fused");
    }
  }
  invalid(name(),
          std::string("cannot ") + what + " axis " + iv.name() + ": not an axis of this stage");
}

std::pair<IterVar, IterVar> Stage::split(const IterVar& parent, int64_t factor) {
  int pos = leaf_pos(parent, "split");
  if (factor < 1)
    invalid(name(), "split of " + parent.name() + " by factor " + std::to_string(factor));
  IterVar outer{Var(parent.name() + ".o"), 0, (parent.extent + factor - 1) / factor, parent.kind};
  IterVar inner{Var(parent.name() + ".i"), 0, std::min(factor, parent.extent), parent.kind};
  IterRelation r;
  r.split = {parent, outer, inner, factor, 0};
  mut().relations.push_back(r);
  auto& leaves = mut().leaves;
  leaves[pos] = outer;
  leaves.insert(leaves.begin() + pos + 1, inner);
  return {outer, inner};
}

std::pair<IterVar, IterVar> Stage::split_nparts(const IterVar& parent, int64_t nparts) {
  int pos = leaf_pos(parent, "split");
  if (nparts < 1)
    invalid(name(), "split of " + parent.name() + " into " + std::to_string(nparts) + " parts");
  int64_t f = (parent.extent + nparts - 1) / nparts;
  IterVar outer{Var(parent.name() + ".o"), 0, (parent.extent + f - 1) / f, parent.kind};
  IterVar inner{Var(parent.name() + ".i"), 0, f, parent.kind};
  IterRelation r;
  r.split = {parent, outer, inner, 0, nparts};
  mut().relations.push_back(r);
  auto& leaves = mut().leaves;
  leaves[pos] = outer;
  leaves.insert(leaves.begin() + pos + 1, inner);
  return {outer, inner};
}

std::tuple<IterVar, IterVar, IterVar, IterVar> Stage::tile(const IterVar& x, const IterVar& y,
                                                           int64_t fx, int64_t fy) {
  auto [xo, xi] = split(x, fx);
  auto [yo, yi] = split(y, fy);
  reorder({xo, yo, xi, yi});
  return {xo, yo, xi, yi};
}

IterVar Stage::fuse(const IterVar& outer, const IterVar& inner) {
  int po = leaf_pos(outer, "fuse");
  int pi = leaf_pos(inner, "fuse");
  if (pi != po + 1)
    invalid(name(),
            "fuse of " + outer.name() + " and " + inner.name() + ": not adjacent, outer first");
  if (outer.kind != inner.kind)
    invalid(name(),
            "fuse of " + outer.name() + " and " + inner.name() + ": spatial with reduction axis");
  IterVar fused{Var(outer.name() + "." + inner.name() + ".f"), 0, outer.extent * inner.extent,
                outer.kind};
  IterRelation r;
  r.is_split = false;
  r.fuse = {outer, inner, fused};
  mut().relations.push_back(r);
  auto& leaves = mut().leaves;
  leaves[po] = fused;
  leaves.erase(leaves.begin() + pi);
  return fused;
}

void Stage::reorder(const std::vector<IterVar>& order) {
  std::vector<int> pos;
  for (const IterVar& iv : order) {
    int p = leaf_pos(iv, "reorder");
    if (std::find(pos.begin(), pos.end(), p) != pos.end())
      invalid(name(), "reorder names axis " + iv.name() + " twice");
    pos.push_back(p);
  }
  std::vector<int> slots = pos;
  std::sort(slots.begin(), slots.end());
  std::vector<IterVar> leaves = node().leaves;
  for (size_t i = 0; i < order.size(); ++i) leaves[slots[i]] = order[i];
  mut().leaves = std::move(leaves);
}

void Stage::vectorize(const IterVar& leaf) {
  leaf_pos(leaf, "vectorize");
  if (leaf.is_reduce()) invalid(name(), "cannot vectorize reduction axis " + leaf.name());
  mut().for_kinds[leaf.var.get()] = ForKind::kVectorized;
}

void Stage::unroll(const IterVar& leaf) {
  leaf_pos(leaf, "unroll");
  mut().for_kinds[leaf.var.get()] = ForKind::kUnrolled;
}

void Stage::parallel(const IterVar& leaf) {
  leaf_pos(leaf, "parallel");
  if (leaf.is_reduce()) invalid(name(), "cannot parallelize reduction axis " + leaf.name());
  mut().for_kinds[leaf.var.get()] = ForKind::kParallel;
}

void Stage::tensorize(const IterVar& leaf, const TensorIntrin& intrin) {
  leaf_pos(leaf, "tensorize");
  if (node().reduce_axes.empty())
    invalid(name(), "cannot tensorize " + leaf.name() + ": the stage is not a reduction");
  mut().tensorized[leaf.var.get()] = std::make_shared<const TensorIntrin>(intrin);
}

void Stage::compute_at(const Stage& parent, const IterVar& leaf) {
  const int self = index();
  const int parent_index = parent.index();
  if (node().is_placeholder) invalid(name(), "cannot compute_at a placeholder");
  if (node().is_output) invalid(name(), "cannot compute_at an output");
  if (parent.sched_ != sched_) invalid(name(), "compute_at into a stage of another schedule");
  if (parent_index == self) invalid(name(), "compute_at into itself (a cycle)");
  // A cycle: the target (transitively) feeds this stage.
  std::function<bool(int)> feeds_me = [&](int s) {
    std::vector<int> todo{self};
    std::unordered_set<int> seen;
    while (!todo.empty()) {
      int cur = todo.back();
      todo.pop_back();
      if (!seen.insert(cur).second) continue;
      if (cur == s && cur != self) return true;
      for (const TensorNode* t : reads_of(sched_->stages[cur].body)) {
        int j = sched_->find(t);
        if (j >= 0) todo.push_back(j);
      }
    }
    return false;
  };
  if (feeds_me(parent_index)) {
    invalid(name(), "compute_at into " + parent.name() + ", which it depends on (a cycle)");
  }
  // The target must use this stage (directly or through other stages); whether every consumer
  // runs inside the chosen loop is checked by lower(), once all attachments are known.
  std::vector<int> todo{parent_index};
  std::unordered_set<int> seen;
  bool downstream = false;
  while (!todo.empty() && !downstream) {
    int cur = todo.back();
    todo.pop_back();
    if (!seen.insert(cur).second) continue;
    for (const TensorNode* t : reads_of(sched_->stages[cur].body)) {
      int j = sched_->find(t);
      if (j == self) downstream = true;
      if (j >= 0) todo.push_back(j);
    }
  }
  if (!downstream) invalid(name(), "compute_at into " + parent.name() + ", which does not use it");
  bool found = false;
  for (const IterVar& l : parent.node().leaves) found |= l.same_as(leaf);
  if (!found)
    invalid(name(), "compute_at into " + parent.name() + " at " + leaf.name() + ": not a loop of " +
                        parent.name());
  mut().attach = AttachKind::kAt;
  mut().attach_stage = parent_index;
  mut().attach_ivar = leaf;
}

void Stage::compute_inline() {
  if (node().is_placeholder) invalid(name(), "cannot inline a placeholder");
  if (node().is_output) invalid(name(), "cannot inline an output");
  if (!node().reduce_axes.empty()) invalid(name(), "cannot inline a reduction");
  mut().attach = AttachKind::kInline;
  mut().attach_stage = -1;
}

void Stage::compute_root() {
  if (node().is_placeholder) invalid(name(), "cannot compute_root a placeholder");
  mut().attach = AttachKind::kRoot;
  mut().attach_stage = -1;
}

Tensor Schedule::cache_write(const Tensor& t, const std::string& suffix) {
  int idx = node_->find(t.get());
  if (idx < 0)
    throw Error(ErrorKind::kInvalidSchedule,
                "schedule: cache_write of " + t.name() + ": not in this schedule");
  StageNode& s = node_->stages[idx];
  if (s.is_placeholder) invalid(s.name, "cannot cache_write a placeholder");
  if (!s.relations.empty() || s.attach != AttachKind::kRoot)
    invalid(s.name, "cache_write must come before scheduling the stage");
  // The new tensor: fresh axes, the stage's body with its vars renamed.
  std::string nm = s.name + "." + suffix;
  auto node = std::make_shared<TensorNode>();
  node->name = nm;
  node->shape = t.shape();
  node->dtype = s.body.dtype();
  node->is_placeholder = false;
  std::vector<std::pair<Var, Expr>> sub;
  for (size_t d = 0; d < s.axes.size(); ++d) {
    node->axes.emplace_back(nm + "." + std::string(1, "ijklmn"[d % 6]));
    sub.emplace_back(s.axes[d].var, node->axes.back());
  }
  Expr body = s.body;
  if (const Reduce* r = body.as<Reduce>()) {
    std::vector<ReduceAxis> axes;
    for (const ReduceAxis& a : r->axes) {
      axes.push_back({Var(nm + "." + a.var.name()), a.min, a.extent});
      sub.emplace_back(a.var, axes.back().var);
    }
    body = Reduce::make(r->op, substitute(r->source, sub), axes);
  } else {
    body = substitute(body, sub);
  }
  node->body = body;
  {
    ReadCollector c;
    c.visit_expr(body);
    for (const Tensor& in : topo_order({t})) {
      if (c.reads.count(in.get())) node->inputs.push_back(in.ptr());
    }
  }
  Tensor local(node);
  StageNode ls = make_stage(local);
  // t now copies the local tensor.
  std::vector<Expr> indices;
  for (const IterVar& a : s.axes) indices.push_back(a.var);
  s.body = local.read(indices);
  s.reduce_axes.clear();
  s.leaves = s.axes;
  s.for_kinds.clear();
  s.tensorized.clear();
  insert_stage(idx, std::move(ls));
  return local;
}

void Schedule::insert_stage(int pos, StageNode stage) {
  for (StageNode& s : node_->stages) {
    if (s.attach == AttachKind::kAt && s.attach_stage >= pos) ++s.attach_stage;
  }
  node_->stages.insert(node_->stages.begin() + pos, std::move(stage));
}

Tensor Schedule::cache_read(const Tensor& t, const std::vector<Tensor>& readers,
                            const std::string& suffix) {
  int idx = node_->find(t.get());
  if (idx < 0)
    throw Error(ErrorKind::kInvalidSchedule,
                "schedule: cache_read of " + t.name() + ": not in this schedule");
  if (readers.empty()) invalid(t.name(), "cache_read with no readers");
  std::vector<int> rs;
  for (const Tensor& r : readers) {
    int ri = node_->find(r.get());
    if (ri < 0) invalid(t.name(), "cache_read: reader " + r.name() + " is not in this schedule");
    if (!reads_of(node_->stages[ri].body).count(t.get()))
      invalid(t.name(), "cache_read: " + r.name() + " does not read it");
    rs.push_back(ri);
  }
  std::string nm = node_->stages[idx].name + "." + suffix;
  Tensor copy = compute(
      t.shape(),
      [&](const std::vector<Var>& v) { return t.read(std::vector<Expr>(v.begin(), v.end())); }, nm);
  for (int ri : rs) {
    ReadRewriter rw(t.get(), copy.ptr());
    node_->stages[ri].body = rw.mutate(node_->stages[ri].body);
  }
  insert_stage(idx + 1, make_stage(copy));
  return copy;
}

}  // namespace ktune::te
