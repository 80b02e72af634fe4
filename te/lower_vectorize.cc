// Lowering pass: turns vectorized loops into Ramp/Broadcast vector code (Halide's VectorizeLoops).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "te/ir_visitor.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

// Wider loops stay serial: no target has registers that wide and the IR would bloat.
constexpr int64_t kMaxLanes = 64;

struct CannotVectorize {};

Expr widen(const Expr& e, int lanes) {
  if (e.dtype().lanes == lanes) return e;
  return Broadcast::make(e, lanes);
}

// Replaces one variable by a Ramp and widens everything that depends on it.
class VectorizeBody : public IRMutator {
 public:
  VectorizeBody(const Var& v, Expr ramp, int lanes)
      : var_(v), ramp_(std::move(ramp)), lanes_(lanes) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const VarNode* op, const Expr& e) override { return op == var_.get() ? ramp_ : e; }
  Expr visit(const Ramp*, const Expr&) override { throw CannotVectorize{}; }
  Expr visit(const Broadcast*, const Expr&) override { throw CannotVectorize{}; }
  Expr visit(const Let* op, const Expr& e) override {
    Expr base = IRMutator::visit(op, e);
    if (base.as<Let>() && base.as<Let>()->value.dtype().is_vector()) throw CannotVectorize{};
    return base;
  }

  Expr visit(const Add* op, const Expr& e) override { return arith(op, e); }
  Expr visit(const Sub* op, const Expr& e) override { return arith(op, e); }
  Expr visit(const Mul* op, const Expr& e) override { return arith(op, e); }
  Expr visit(const Div* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const Mod* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const Min* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const Max* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const EQ* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const NE* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const LT* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const LE* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const GT* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const GE* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const And* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const Or* op, const Expr& e) override { return bin(op, e); }
  Expr visit(const Select* op, const Expr& e) override {
    Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value))
      return e;
    int n = std::max({c.dtype().lanes, t.dtype().lanes, f.dtype().lanes});
    return Select::make(c.dtype().is_vector() ? widen(c, n) : c, widen(t, n), widen(f, n));
  }
  Expr visit(const Call* op, const Expr& e) override {
    Expr base = IRMutator::visit(op, e);
    const Call* c = base.as<Call>();
    if (!c || c->args.size() < 2) return base;
    int n = std::max(c->args[0].dtype().lanes, c->args[1].dtype().lanes);
    return Call::make(c->op, {widen(c->args[0], n), widen(c->args[1], n)});
  }

  Stmt visit(const Store* op, const Stmt& s) override {
    Expr v = mutate(op->value), i = mutate(op->index);
    if (v.same_as(op->value) && i.same_as(op->index)) return s;
    if (i.dtype().is_scalar()) throw CannotVectorize{};  // every lane would store to one place
    return Store::make(op->buffer, widen(v, lanes_), i);
  }
  Stmt visit(const For* op, const Stmt& s) override {
    Stmt base = IRMutator::visit(op, s);
    const For* f = base.as<For>();
    if (f && (f->min.dtype().is_vector() || f->extent.dtype().is_vector())) throw CannotVectorize{};
    return base;
  }
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    Stmt base = IRMutator::visit(op, s);
    const IfThenElse* f = base.as<IfThenElse>();
    if (f && f->condition.dtype().is_vector()) throw CannotVectorize{};
    return base;
  }
  Stmt visit(const Allocate*, const Stmt&) override { throw CannotVectorize{}; }
  Stmt visit(const LetStmt* op, const Stmt& s) override {
    Stmt base = IRMutator::visit(op, s);
    if (base.as<LetStmt>() && base.as<LetStmt>()->value.dtype().is_vector())
      throw CannotVectorize{};
    return base;
  }

 private:
  template <typename T>
  Expr bin(const T* op, const Expr& e) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    int n = std::max(a.dtype().lanes, b.dtype().lanes);
    return T::make(widen(a, n), widen(b, n));
  }

  // Keeps index arithmetic as Ramps: ramp(b, s) + x = ramp(b + x, s), ramp(b, s) * x = ramp(b*x,
  // s*x).
  template <typename T>
  Expr arith(const T* op, const Expr& e) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    if (a.dtype().is_int() || a.dtype().is_uint()) {
      const Ramp* ra = a.as<Ramp>();
      const Ramp* rb = b.as<Ramp>();
      bool sa = a.dtype().is_scalar(), sb = b.dtype().is_scalar();
      constexpr NodeKind K = T::kKind;
      if (K == NodeKind::kAdd || K == NodeKind::kSub) {
        if (ra && sb) return Ramp::make(T::make(ra->base, b), ra->stride, ra->lanes);
        if (sa && rb) {
          Expr stride = K == NodeKind::kAdd ? rb->stride
                                            : Sub::make(make_zero(rb->stride.dtype()), rb->stride);
          return Ramp::make(T::make(a, rb->base), stride, rb->lanes);
        }
        if (ra && rb)
          return Ramp::make(T::make(ra->base, rb->base), T::make(ra->stride, rb->stride),
                            ra->lanes);
      } else if (K == NodeKind::kMul) {
        if (ra && sb)
          return Ramp::make(Mul::make(ra->base, b), Mul::make(ra->stride, b), ra->lanes);
        if (sa && rb)
          return Ramp::make(Mul::make(a, rb->base), Mul::make(a, rb->stride), rb->lanes);
      }
    }
    int n = std::max(a.dtype().lanes, b.dtype().lanes);
    return T::make(widen(a, n), widen(b, n));
  }

  Var var_;
  Expr ramp_;
  int lanes_;
};

class Vectorizer : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    Stmt base = IRMutator::visit(op, s);  // inner loops first
    const For* f = base.as<For>();
    if (!f || f->for_kind != ForKind::kVectorized) return base;
    const int64_t* x = as_const_int(f->extent);
    if (x && *x >= 2 && *x <= kMaxLanes) {
      int lanes = static_cast<int>(*x);
      try {
        VectorizeBody v(f->var, Ramp::make(f->min, make_const(f->min.dtype(), 1), lanes), lanes);
        return v.mutate(f->body);
      } catch (const CannotVectorize&) {
        spdlog::debug("te: loop {} not vectorized; it stays serial", f->var.name());
      }
    }
    return For::make(f->var, f->min, f->extent, ForKind::kSerial, f->body);
  }
};

}  // namespace

Stmt vectorize_loops(const Stmt& s) {
  Vectorizer v;
  return v.mutate(s);
}

}  // namespace ktune::te
