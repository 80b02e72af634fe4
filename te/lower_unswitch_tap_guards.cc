// Lowering pass: the guarded intrinsic statements that tensorize leaves for an inlined zero
// padding (if (tap inside) dot) run unguarded in the tiles whose every tap is inside.
//
// The guard of a tap is a conjunction of comparisons affine in the loop variables. Over a whole
// reduction nest (the outermost loop whose stores are all guarded updates, so the accumulator's
// initialization stays outside), each comparison holds everywhere when its extreme over the
// nest's constant ranges does, a test on the enclosing variables alone: the nest becomes
// if (test) { nest without those comparisons } else { nest }. A comparison that no tile
// satisfies throughout (a tile as wide as the output meets both column borders) stays in both
// copies, so the rows of such tiles still unswitch. The guarded copy keeps its branches; the
// unroll pass folds those an unrolled copy decides.
#include <optional>
#include <unordered_set>
#include <vector>

#include "te/bound.h"
#include "te/ir_visitor.h"
#include "te/lower_padding_guards.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

using padding::conjuncts;

// A tap guard: if (c) with no else around the store of an intrinsic's call.
bool is_tap_guard(const IfThenElse* g) {
  if (g->else_case.defined()) return false;
  const Store* st = g->then_case.as<Store>();
  return st && st->value.as<Call>();
}

// Whether every store under a statement is a tap guard's, and the guards' conditions.
class GuardScan : public IRVisitor {
 public:
  bool only_guarded = true;
  std::vector<Expr> conditions;
  VarRanges nest;  // the constant ranges of the loops inside
  bool constant_loops = true;

 protected:
  void visit(const For* op) override {
    const int64_t* m = as_const_int(op->min);
    const int64_t* x = as_const_int(op->extent);
    if (m && x)
      nest[op->var.get()] = {*m, *m + *x - 1};
    else
      constant_loops = false;
    IRVisitor::visit(op);
  }
  void visit(const IfThenElse* op) override {
    if (is_tap_guard(op)) {
      conditions.push_back(op->condition);
      return;
    }
    IRVisitor::visit(op);
  }
  void visit(const Store*) override { only_guarded = false; }
};

// The test on the enclosing variables that c holds for every value of the nest's variables,
// or nullopt when c is not a comparison the interval analysis bounds.
std::optional<Expr> holds_throughout(const Expr& c, const VarRanges& nest) {
  auto extreme = [&](const Expr& a, const Expr& b, bool low) -> std::optional<Expr> {
    const std::optional<SymInterval> i = bound_symbolic(simplify(Sub::make(a, b)), nest, {});
    if (!i) return std::nullopt;
    return low ? i->lo : i->hi;
  };
  const Expr zero = IntImm::make(0);
  std::optional<Expr> e;
  if (const LT* o = c.as<LT>()) {
    if ((e = extreme(o->a, o->b, false))) return LT::make(*e, zero);
  } else if (const LE* o = c.as<LE>()) {
    if ((e = extreme(o->a, o->b, false))) return LE::make(*e, zero);
  } else if (const GT* o = c.as<GT>()) {
    if ((e = extreme(o->a, o->b, true))) return GT::make(*e, zero);
  } else if (const GE* o = c.as<GE>()) {
    if ((e = extreme(o->a, o->b, true))) return GE::make(*e, zero);
  }
  return std::nullopt;
}

// Removes the conjuncts in `dropped` from the tap guards, and guards left without any.
class DropConjuncts : public IRMutator {
 public:
  explicit DropConjuncts(const std::unordered_set<const ExprNode*>& dropped) : dropped_(dropped) {}

 protected:
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    if (!is_tap_guard(op)) return IRMutator::visit(op, s);
    std::vector<Expr> cs;
    conjuncts(op->condition, &cs);
    Expr kept;
    for (const Expr& c : cs)
      if (!dropped_.count(c.get())) kept = kept.defined() ? And::make(kept, c) : c;
    return kept.defined() ? IfThenElse::make(kept, op->then_case) : op->then_case;
  }

 private:
  const std::unordered_set<const ExprNode*>& dropped_;
};

class Unswitcher : public IRMutator {
 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    GuardScan scan;
    scan.visit_stmt(s);
    if (scan.conditions.empty()) return s;
    if (!scan.only_guarded || !scan.constant_loops) return IRMutator::visit(op, s);
    // The conjuncts some tile satisfies throughout leave the unswitched copy; one that no tile
    // does (a tile as wide as the output touches both column borders) stays in both copies.
    Expr test;
    std::unordered_set<const ExprNode*> dropped;
    for (const Expr& guard : scan.conditions) {
      std::vector<Expr> cs;
      conjuncts(guard, &cs);
      for (const Expr& c : cs) {
        const std::optional<Expr> t = holds_throughout(c, scan.nest);
        if (!t) continue;
        const Expr st = simplify(*t);
        if (is_const_int(st, 0)) continue;
        dropped.insert(c.get());
        test = test.defined() ? And::make(test, st) : st;
      }
    }
    if (!test.defined()) return s;
    return IfThenElse::make(simplify(test), DropConjuncts(dropped).mutate(s), s);
  }
};

}  // namespace

Stmt unswitch_tap_guards(const Stmt& s) { return Unswitcher().mutate(s); }

}  // namespace ktune::te
