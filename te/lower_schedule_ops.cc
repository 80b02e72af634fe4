// Lowering pass 1: schedule -> loop nests (inlining, bounds inference, split/fuse, reductions).
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "support/error.h"
#include "te/bound.h"
#include "te/ir_printer.h"
#include "te/ir_visitor.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

[[noreturn]] void invalid(const std::string& stage, const std::string& what) {
  throw Error(ErrorKind::kInvalidSchedule, "schedule: stage " + stage + ": " + what);
}

// Per-stage lowering state.
struct StageInfo {
  Expr body;  // after inlining
  Buffer buffer;
  std::vector<Expr> region_min;  // global coordinates of the computed region
  std::vector<int64_t> region_ext;
  std::unordered_map<const VarNode*, int64_t> extent;  // every iter var of the stage
  std::unordered_map<const VarNode*, Expr> value;      // root and intermediate vars, in leaves
  std::vector<std::pair<Expr, bool>> guards;           // (condition, involves a reduction var)
  std::vector<int> attached_here;                      // stages attached to this one
};

class Inliner : public IRMutator {
 public:
  Inliner(const std::unordered_map<const TensorNode*, std::pair<std::vector<Var>, Expr>>& defs)
      : defs_(defs) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const TensorRead* op, const Expr& e) override {
    Expr base = IRMutator::visit(op, e);
    const TensorRead* r = base.as<TensorRead>();
    auto it = defs_.find(r->tensor.get());
    if (it == defs_.end()) return base;
    std::vector<std::pair<Var, Expr>> sub;
    for (size_t d = 0; d < r->indices.size(); ++d)
      sub.emplace_back(it->second.first[d], r->indices[d]);
    return substitute(it->second.second, sub);
  }

 private:
  const std::unordered_map<const TensorNode*, std::pair<std::vector<Var>, Expr>>& defs_;
};

class ReadFinder : public IRVisitor {
 public:
  explicit ReadFinder(const TensorNode* t) : t_(t) {}
  std::vector<const TensorRead*> reads;
  std::unordered_set<const TensorNode*> all;

 protected:
  void visit(const TensorRead* op) override {
    if (op->tensor.get() == t_) reads.push_back(op);
    all.insert(op->tensor.get());
    IRVisitor::visit(op);
  }

 private:
  const TensorNode* t_;
};

class Lowerer {
 public:
  Lowerer(const ScheduleNode& s, const std::vector<Tensor>& tensors)
      : s_(s), tensors_(tensors), info_(s.stages.size()) {}

  Stmt run(std::vector<BufferArg>* args) {
    inline_bodies();
    make_buffers(args);
    check_attachments();
    for (int i = static_cast<int>(s_.stages.size()) - 1; i >= 0; --i) {
      const StageNode& st = s_.stages[i];
      if (st.is_placeholder || st.attach == AttachKind::kInline) continue;
      infer_region(i);
      derive_loops(i);
    }
    std::vector<Stmt> top;
    std::vector<int> realize;
    for (size_t i = 0; i < s_.stages.size(); ++i) {
      const StageNode& st = s_.stages[i];
      if (st.is_placeholder || st.attach != AttachKind::kRoot) continue;
      top.push_back(emit_stage(static_cast<int>(i)));
      if (!is_arg_[i]) realize.push_back(static_cast<int>(i));
    }
    Stmt body = Block::make(std::move(top));
    for (auto it = realize.rbegin(); it != realize.rend(); ++it) body = wrap_realize(*it, body);
    return body;
  }

 private:
  void inline_bodies() {
    std::unordered_map<const TensorNode*, std::pair<std::vector<Var>, Expr>> defs;
    for (size_t i = 0; i < s_.stages.size(); ++i) {
      const StageNode& st = s_.stages[i];
      if (st.is_placeholder) continue;
      Inliner in(defs);
      info_[i].body = in.mutate(st.body);
      if (st.attach == AttachKind::kInline) {
        std::vector<Var> axes;
        for (const IterVar& a : st.axes) axes.push_back(a.var);
        defs[st.tensor.get()] = {axes, info_[i].body};
      }
    }
  }

  void make_buffers(std::vector<BufferArg>* args) {
    is_arg_.assign(s_.stages.size(), false);
    args->clear();
    for (const Tensor& t : tensors_) {
      int i = s_.find(t.get());
      if (i < 0)
        throw Error(ErrorKind::kInvalidArgument,
                    "lower: argument " + t.name() + " is not in the schedule");
      if (is_arg_[i])
        throw Error(ErrorKind::kInvalidArgument,
                    "lower: argument " + t.name() + " is passed twice");
      if (s_.stages[i].attach != AttachKind::kRoot && !s_.stages[i].is_placeholder) {
        invalid(t.name(), "a kernel argument must be computed at root (it is inlined or attached)");
      }
      is_arg_[i] = true;
      info_[i].buffer = Buffer::make(t.name(), t.dtype());
      args->push_back(BufferArg{info_[i].buffer, t.shape(), t.dtype(), !t.is_placeholder()});
    }
    for (size_t i = 0; i < s_.stages.size(); ++i) {
      if (is_arg_[i]) continue;
      const StageNode& st = s_.stages[i];
      if (st.is_placeholder) continue;  // checked when read
      info_[i].buffer = Buffer::make(st.name, st.tensor.dtype());
    }
  }

  // Which live stages read stage j (after inlining).
  std::vector<int> consumers(int j) {
    std::vector<int> out;
    for (size_t i = 0; i < s_.stages.size(); ++i) {
      const StageNode& st = s_.stages[i];
      if (st.is_placeholder || st.attach == AttachKind::kInline) continue;
      ReadFinder f(s_.stages[j].tensor.get());
      f.visit_expr(info_[i].body);
      if (!f.reads.empty()) out.push_back(static_cast<int>(i));
    }
    return out;
  }

  static int leaf_index(const StageNode& st, const IterVar& leaf) {
    for (size_t l = 0; l < st.leaves.size(); ++l) {
      if (st.leaves[l].same_as(leaf)) return static_cast<int>(l);
    }
    return -1;
  }

  // True when stage k runs inside loop `leaf` of stage t: k is t, or k is attached (directly or
  // through other attached stages) to t at `leaf` or a loop nested in it.
  bool inside(int k, int t, const IterVar& leaf) {
    if (k == t) return true;
    int x = leaf_index(s_.stages[t], leaf);
    for (int cur = k, hops = 0; hops <= static_cast<int>(s_.stages.size()); ++hops) {
      const StageNode& cs = s_.stages[cur];
      if (cs.attach != AttachKind::kAt) return false;
      if (cs.attach_stage == t) return leaf_index(s_.stages[t], cs.attach_ivar) >= x;
      cur = cs.attach_stage;
    }
    return false;
  }

  void check_attachments() {
    for (size_t i = 0; i < s_.stages.size(); ++i) {
      const StageNode& st = s_.stages[i];
      if (st.is_placeholder || st.attach == AttachKind::kInline) continue;
      ReadFinder f(nullptr);
      f.visit_expr(info_[i].body);
      for (const TensorNode* t : f.all) {
        int j = s_.find(t);
        if (j < 0)
          throw Error(ErrorKind::kInvalidSchedule, "schedule: stage " + st.name + " reads " +
                                                       t->name + ", unknown to the schedule");
        if (s_.stages[j].is_placeholder && !is_arg_[j]) {
          throw Error(ErrorKind::kInvalidArgument,
                      "lower: placeholder " + t->name + " is read but not an argument");
        }
      }
      if (st.attach != AttachKind::kAt) continue;
      int c = st.attach_stage;
      const StageNode& target = s_.stages[c];
      if (target.attach == AttachKind::kInline)
        invalid(st.name, "attached to " + target.name + ", which is inlined");
      bool leaf = false;
      for (const IterVar& l : target.leaves) leaf |= l.same_as(st.attach_ivar);
      if (!leaf)
        invalid(st.name, "attached at " + st.attach_ivar.name() + ", which is not a loop of " +
                             target.name + " (split or fused since)");
      for (int k : consumers(static_cast<int>(i))) {
        if (!inside(k, c, st.attach_ivar)) {
          invalid(st.name, "compute_at into " + target.name + " at " + st.attach_ivar.name() +
                               ": consumer " + s_.stages[k].name + " is not inside that loop");
        }
      }
      info_[c].attached_here.push_back(static_cast<int>(i));
    }
  }

  // The value of each root/reduce axis of stage i in global coordinates, in terms of its leaves.
  std::vector<std::pair<Var, Expr>> axis_values(int i) {
    const StageNode& st = s_.stages[i];
    const StageInfo& in = info_[i];
    std::vector<std::pair<Var, Expr>> sub;
    for (size_t d = 0; d < st.axes.size(); ++d) {
      sub.emplace_back(st.axes[d].var,
                       simplify(Add::make(in.region_min[d], in.value.at(st.axes[d].var.get()))));
    }
    for (const IterVar& r : st.reduce_axes) {
      sub.emplace_back(r.var, simplify(Add::make(IntImm::make(r.min), in.value.at(r.var.get()))));
    }
    return sub;
  }

  void infer_region(int i) {
    const StageNode& st = s_.stages[i];
    StageInfo& in = info_[i];
    const auto& shape = st.tensor.shape();
    in.region_min.assign(shape.size(), IntImm::make(0));
    in.region_ext = shape;
    if (st.attach != AttachKind::kAt) return;
    int c = st.attach_stage;
    const StageNode& cs = s_.stages[c];
    size_t a = static_cast<size_t>(leaf_index(cs, st.attach_ivar));
    VarRanges relaxed;
    auto relax = [&](int stage, size_t from) {
      const StageNode& rs = s_.stages[stage];
      for (size_t l = from; l < rs.leaves.size(); ++l) {
        relaxed[rs.leaves[l].var.get()] = {0, info_[stage].extent.at(rs.leaves[l].var.get()) - 1};
      }
    };
    relax(c, a + 1);
    // Each consumer's reads, in its own loop variables; loops of stages nested inside the attach
    // loop are relaxed too.
    std::vector<std::pair<std::vector<std::pair<Var, Expr>>, std::vector<const TensorRead*>>> uses;
    for (int k : consumers(i)) {
      for (int cur = k; cur != c; cur = s_.stages[cur].attach_stage) relax(cur, 0);
      ReadFinder f(st.tensor.get());
      f.visit_expr(info_[k].body);
      uses.emplace_back(axis_values(k), f.reads);
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      Expr lo, hi;
      bool ok = true;
      for (const auto& [sub, reads] : uses) {
        for (const TensorRead* r : reads) {
          auto iv = bound_symbolic(substitute(r->indices[d], sub), relaxed, ranges_);
          if (!iv) {
            ok = false;
            break;
          }
          lo = lo.defined() ? Min::make(lo, iv->lo) : iv->lo;
          hi = hi.defined() ? Max::make(hi, iv->hi) : iv->hi;
        }
        if (!ok) break;
      }
      if (!ok || !lo.defined()) continue;  // the whole dimension
      lo = simplify(lo, ranges_);
      spdlog::debug("te: region of {} dim {}: lo {} hi {}", st.name, d, to_string(lo),
                    to_string(hi));
      Expr ext = simplify(Add::make(Sub::make(hi, lo), IntImm::make(1)), ranges_);
      int64_t e;
      if (const int64_t* k = as_const_int(ext)) {
        e = *k;
      } else {
        auto b = const_bound(ext, ranges_);
        if (!b) continue;
        e = b->second;
      }
      if (e >= shape[d] || e <= 0) continue;
      in.region_min[d] = lo;
      in.region_ext[d] = e;
    }
  }

  void derive_loops(int i) {
    const StageNode& st = s_.stages[i];
    StageInfo& in = info_[i];
    std::unordered_set<const VarNode*> reduce_vars;
    for (size_t d = 0; d < st.axes.size(); ++d) in.extent[st.axes[d].var.get()] = in.region_ext[d];
    for (const IterVar& r : st.reduce_axes) {
      in.extent[r.var.get()] = r.extent;
      reduce_vars.insert(r.var.get());
    }
    for (const IterRelation& rel : st.relations) {
      if (rel.is_split) {
        const SplitRelation& sp = rel.split;
        int64_t e = in.extent.at(sp.parent.var.get());
        int64_t f = sp.factor > 0 ? std::min(sp.factor, e) : (e + sp.nparts - 1) / sp.nparts;
        in.extent[sp.inner.var.get()] = f;
        in.extent[sp.outer.var.get()] = (e + f - 1) / f;
        if (reduce_vars.count(sp.parent.var.get())) {
          reduce_vars.insert(sp.inner.var.get());
          reduce_vars.insert(sp.outer.var.get());
        }
      } else {
        const FuseRelation& fu = rel.fuse;
        in.extent[fu.fused.var.get()] =
            in.extent.at(fu.outer.var.get()) * in.extent.at(fu.inner.var.get());
        if (reduce_vars.count(fu.outer.var.get())) reduce_vars.insert(fu.fused.var.get());
      }
    }
    for (const IterVar& l : st.leaves) {
      in.value[l.var.get()] = l.var;
      ranges_[l.var.get()] = {0, in.extent.at(l.var.get()) - 1};
    }
    for (auto it = st.relations.rbegin(); it != st.relations.rend(); ++it) {
      if (it->is_split) {
        const SplitRelation& sp = it->split;
        int64_t f = in.extent.at(sp.inner.var.get());
        Expr v = Add::make(Mul::make(in.value.at(sp.outer.var.get()), IntImm::make(f)),
                           in.value.at(sp.inner.var.get()));
        in.value[sp.parent.var.get()] = v;
        int64_t e = in.extent.at(sp.parent.var.get());
        if (in.extent.at(sp.outer.var.get()) * f != e) {
          in.guards.emplace_back(LT::make(v, IntImm::make(e)),
                                 reduce_vars.count(sp.parent.var.get()) > 0);
        }
      } else {
        const FuseRelation& fu = it->fuse;
        Expr fv = in.value.at(fu.fused.var.get());
        int64_t ie = in.extent.at(fu.inner.var.get());
        in.value[fu.outer.var.get()] = Div::make(fv, IntImm::make(ie));
        in.value[fu.inner.var.get()] = Mod::make(fv, IntImm::make(ie));
      }
    }
    for (const IterVar& l : st.leaves)
      leaf_reduce_[l.var.get()] = reduce_vars.count(l.var.get()) > 0;
    // Domain guards: an attached region may stick out of the tensor.
    if (st.attach == AttachKind::kAt) {
      for (size_t d = 0; d < st.axes.size(); ++d) {
        Expr g = Add::make(in.region_min[d], in.value.at(st.axes[d].var.get()));
        in.guards.emplace_back(And::make(GE::make(g, IntImm::make(0)),
                                         LT::make(g, IntImm::make(st.tensor.shape()[d]))),
                               false);
      }
    }
    // vectorize must be on the innermost leaf.
    for (size_t l = 0; l < st.leaves.size(); ++l) {
      auto k = st.for_kinds.find(st.leaves[l].var.get());
      if (k != st.for_kinds.end() && k->second == ForKind::kVectorized &&
          l + 1 != st.leaves.size()) {
        invalid(st.name, "cannot vectorize " + st.leaves[l].name() + ": not the innermost loop");
      }
    }
  }

  class ReadLowerer : public IRMutator {
   public:
    explicit ReadLowerer(Lowerer& l) : l_(l) {}
    using IRMutator::mutate;

   protected:
    Expr visit(const TensorRead* op, const Expr& e) override {
      Expr base = IRMutator::visit(op, e);
      const TensorRead* r = base.as<TensorRead>();
      int j = l_.s_.find(r->tensor.get());
      return BufferLoad::make(l_.info_[j].buffer, r->indices);
    }

   private:
    Lowerer& l_;
  };

  Stmt wrap_realize(int j, const Stmt& body) {
    return Realize::make(info_[j].buffer, info_[j].region_min, info_[j].region_ext, body);
  }

  ForKind kind_of(const StageNode& st, const IterVar& l) {
    auto it = st.for_kinds.find(l.var.get());
    return it == st.for_kinds.end() ? ForKind::kSerial : it->second;
  }

  Stmt guarded(const std::vector<Expr>& conds, Stmt s) {
    for (auto it = conds.rbegin(); it != conds.rend(); ++it) s = IfThenElse::make(*it, s);
    return s;
  }

  // The position of the innermost leaf of st that e uses (-1 when none): a guard is placed
  // right inside that loop, so that it is tested as early as possible.
  static int guard_depth(const StageNode& st, const Expr& e) {
    class Finder : public IRVisitor {
     public:
      std::unordered_set<const VarNode*> vars;

     protected:
      void visit(const VarNode* op) override { vars.insert(op); }
    } f;
    f.visit_expr(e);
    int depth = -1;
    for (size_t l = 0; l < st.leaves.size(); ++l) {
      if (f.vars.count(st.leaves[l].var.get())) depth = static_cast<int>(l);
    }
    return depth;
  }

  Stmt emit_stage(int i) {
    const StageNode& st = s_.stages[i];
    StageInfo& in = info_[i];
    auto sub = axis_values(i);
    std::vector<Expr> idx;
    for (size_t d = 0; d < st.axes.size(); ++d) idx.push_back(sub[d].second);
    ReadLowerer rl(*this);
    int n = static_cast<int>(st.leaves.size());
    // Guards by depth (index n+1 holds those that use no leaf).
    std::vector<std::vector<Expr>> guards_at(n + 1);
    for (const auto& [g, red] : in.guards) {
      Expr c = simplify(g);
      int d = guard_depth(st, c);
      guards_at[d < 0 ? n : d].push_back(c);
    }
    const Reduce* red = in.body.as<Reduce>();
    Stmt update, init;
    int p = n;
    if (red) {
      Expr src = rl.mutate(substitute(red->source, sub));
      Expr acc = BufferLoad::make(in.buffer, idx);
      update = BufferStore::make(in.buffer, reduce_combine(red->op, acc, src), idx);
      init = BufferStore::make(in.buffer, reduce_identity(red->op, st.tensor.dtype()), idx);
      for (int l = 0; l < n; ++l) {
        if (leaf_reduce_.at(st.leaves[l].var.get())) {
          p = l;
          break;
        }
      }
      // The init nest: the spatial loops inside the first reduction loop.
      for (int l = n; l-- > p;) {
        const IterVar& lv = st.leaves[l];
        if (leaf_reduce_.at(lv.var.get())) continue;
        init = guarded(guards_at[l], init);
        init = For::make(lv.var, IntImm::make(0), IntImm::make(in.extent.at(lv.var.get())),
                         kind_of(st, lv), init);
      }
    } else {
      Expr v = rl.mutate(substitute(in.body, sub));
      update = BufferStore::make(in.buffer, Cast::make(st.tensor.dtype(), v), idx);
    }
    Stmt body = update;
    for (int l = n; l-- > 0;) {
      const IterVar& lv = st.leaves[l];
      body = guarded(guards_at[l], body);
      std::vector<int> here;
      for (int j : in.attached_here) {
        if (s_.stages[j].attach_ivar.same_as(lv)) here.push_back(j);
      }
      for (auto it = here.rbegin(); it != here.rend(); ++it)
        body = wrap_realize(*it, Block::make({emit_stage(*it), body}));
      body = For::make(lv.var, IntImm::make(0), IntImm::make(in.extent.at(lv.var.get())),
                       kind_of(st, lv), body);
      if (red && l == p) body = Block::make({init, body});
    }
    if (red && p == n) body = Block::make({init, body});
    return guarded(guards_at[n], body);
  }

  const ScheduleNode& s_;
  const std::vector<Tensor>& tensors_;
  std::vector<StageInfo> info_;
  std::vector<bool> is_arg_;
  VarRanges ranges_;
  std::unordered_map<const VarNode*, bool> leaf_reduce_;
};

}  // namespace

Stmt schedule_ops(const Schedule& sched, const std::vector<Tensor>& tensors,
                  std::vector<BufferArg>* args) {
  Lowerer l(sched.node(), tensors);
  return l.run(args);
}

}  // namespace ktune::te
