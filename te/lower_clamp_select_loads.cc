// Lowering pass: makes every Load under a Select operand in bounds (Select evaluates both sides).
//
// A load clamped element by element, max(min(index, last), 0), becomes a gather once its loop is
// vectorized. Where the Selects above a load do not depend on the vectorized loop's variable v
// (the padding of a channel-blocked input: the condition is about the pixel, the lanes are
// channels) and the index is base + k v, the lanes are either all chosen or all discarded, so
// clamping the base alone keeps every lane in bounds and the load a dense vector:
// max(min(base, last - k v_max), -k v_min) + k v.
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "te/ir_visitor.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

class Clamper : public IRMutator {
 public:
  explicit Clamper(const std::vector<BufferArg>& args) {
    for (const BufferArg& a : args) sizes_[a.buffer.get()] = a.num_elements();
  }
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    const int64_t* m = as_const_int(op->min);
    const int64_t* x = as_const_int(op->extent);
    if (m && x) ranges_[op->var.get()] = {*m, *m + *x - 1};
    const bool vector = op->for_kind == ForKind::kVectorized;
    const int outer_opaque = opaque_at_loop_;
    if (vector) vector_loops_.push_back(op), opaque_at_loop_ = opaque_;
    Stmt r = IRMutator::visit(op, s);
    if (vector) vector_loops_.pop_back(), opaque_at_loop_ = outer_opaque;
    ranges_.erase(op->var.get());
    return r;
  }
  template <typename F>
  auto opaque(F f) {
    ++opaque_;
    auto r = f();
    --opaque_;
    return r;
  }

  // A guard or a binding inside the vectorized loop may hold lanes back from a load (a split
  // tail) or hide the lane variable from a Select's condition: such loads keep the per-lane clamp.
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    return opaque([&] { return IRMutator::visit(op, s); });
  }
  Stmt visit(const LetStmt* op, const Stmt& s) override {
    return opaque([&] { return IRMutator::visit(op, s); });
  }
  Expr visit(const Let* op, const Expr& e) override {
    return opaque([&] { return IRMutator::visit(op, e); });
  }
  Stmt visit(const Allocate* op, const Stmt& s) override {
    if (const int64_t* n = as_const_int(op->extent)) sizes_[op->buffer.get()] = *n;
    return IRMutator::visit(op, s);
  }
  Expr visit(const Select* op, const Expr& e) override {
    Expr c = mutate(op->condition);
    ++depth_;
    const bool lane_dependent =
        std::any_of(vector_loops_.begin(), vector_loops_.end(),
                    [&](const For* f) { return uses_var(op->condition, f->var); });
    if (lane_dependent) ++lane_dependent_;
    Expr t = mutate(op->true_value), f = mutate(op->false_value);
    if (lane_dependent) --lane_dependent_;
    --depth_;
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value))
      return e;
    return Select::make(c, t, f);
  }
  Expr visit(const Load* op, const Expr& e) override {
    Expr base = IRMutator::visit(op, e);
    if (depth_ == 0) return base;
    const Load* l = base.as<Load>();
    auto it = sizes_.find(l->buffer.get());
    if (it == sizes_.end()) return base;
    auto b = const_bound(l->index, ranges_);
    if (b && b->first >= 0 && b->second < it->second) return base;
    if (std::optional<Expr> index = clamp_base(l->index, it->second))
      return Load::make(l->buffer, *index);
    DataType t = l->index.dtype();
    Expr hi = make_const(t, static_cast<double>(it->second - 1));
    Expr lo = make_const(t, 0);
    return Load::make(l->buffer, Max::make(Min::make(l->index, hi), lo));
  }

  // The index with only its base clamped (see the top), when the load sits in exactly one
  // vectorized loop of constant bounds, no enclosing Select depends on its variable, and the
  // index is base + k v with a constant k >= 0 that keeps every lane within `size` elements.
  std::optional<Expr> clamp_base(const Expr& index, int64_t size) const {
    if (vector_loops_.size() != 1 || lane_dependent_ > 0 || opaque_ > opaque_at_loop_)
      return std::nullopt;
    const For* loop = vector_loops_.back();
    const int64_t* vmin = as_const_int(loop->min);
    const int64_t* vext = as_const_int(loop->extent);
    if (!vmin || !vext || !uses_var(index, loop->var)) return std::nullopt;
    const DataType t = index.dtype();
    const Expr base = simplify(substitute(index, {{loop->var, make_zero(t)}}));
    const Expr lane_part = simplify(Sub::make(index, base));
    const Expr step = simplify(substitute(lane_part, {{loop->var, make_const(t, 1)}}));
    const int64_t* k = as_const_int(step);
    if (!k || *k < 0) return std::nullopt;
    const Expr rest = simplify(
        Sub::make(lane_part, Mul::make(loop->var, make_const(t, static_cast<double>(*k)))));
    const int64_t* zero = as_const_int(rest);
    if (!zero || *zero != 0) return std::nullopt;
    const int64_t lo = -*k * *vmin, hi = size - 1 - *k * (*vmin + *vext - 1);
    if (hi < lo) return std::nullopt;
    return Add::make(Max::make(Min::make(base, make_const(t, static_cast<double>(hi))),
                               make_const(t, static_cast<double>(lo))),
                     lane_part);
  }

 private:
  std::unordered_map<const BufferNode*, int64_t> sizes_;
  VarRanges ranges_;
  int depth_ = 0;
  std::vector<const For*> vector_loops_;  // enclosing vectorized loops, innermost last
  int lane_dependent_ = 0;                // enclosing Selects whose condition uses one of them
  int opaque_ = 0;                        // enclosing guards and bindings
  int opaque_at_loop_ = 0;                // ... outside the innermost vectorized loop
};

}  // namespace

Stmt clamp_select_loads(const Stmt& s, const std::vector<BufferArg>& args) {
  Clamper c(args);
  return c.mutate(s);
}

}  // namespace ktune::te
