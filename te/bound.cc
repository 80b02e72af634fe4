// Implements symbolic interval analysis for bounds inference.
#include "te/bound.h"

#include "te/ir_visitor.h"

namespace ktune::te {

namespace {

class RelaxedFinder : public IRVisitor {
 public:
  explicit RelaxedFinder(const VarRanges& r) : r_(r) {}
  bool found = false;

 protected:
  void visit(const VarNode* op) override { found |= r_.count(op) > 0; }

 private:
  const VarRanges& r_;
};

bool uses_relaxed(const Expr& e, const VarRanges& relaxed) {
  RelaxedFinder f(relaxed);
  f.visit_expr(e);
  return f.found;
}

using Opt = std::optional<SymInterval>;

Opt go(const Expr& e, const VarRanges& relaxed, const VarRanges& ranges) {
  if (!uses_relaxed(e, relaxed)) return SymInterval{e, e};
  switch (e.kind()) {
    case NodeKind::kVar: {
      auto r = relaxed.at(e.as<VarNode>());
      return SymInterval{IntImm::make(r.first), IntImm::make(r.second)};
    }
    case NodeKind::kAdd: {
      Opt a = go(e.as<Add>()->a, relaxed, ranges), b = go(e.as<Add>()->b, relaxed, ranges);
      if (!a || !b) return std::nullopt;
      return SymInterval{Add::make(a->lo, b->lo), Add::make(a->hi, b->hi)};
    }
    case NodeKind::kSub: {
      Opt a = go(e.as<Sub>()->a, relaxed, ranges), b = go(e.as<Sub>()->b, relaxed, ranges);
      if (!a || !b) return std::nullopt;
      return SymInterval{Sub::make(a->lo, b->hi), Sub::make(a->hi, b->lo)};
    }
    case NodeKind::kMul: {
      const Mul* op = e.as<Mul>();
      Expr fixed = op->a, var = op->b;
      if (uses_relaxed(fixed, relaxed)) std::swap(fixed, var);
      if (uses_relaxed(fixed, relaxed)) return std::nullopt;
      auto sign = const_bound(fixed, ranges);
      if (!sign) return std::nullopt;
      Opt v = go(var, relaxed, ranges);
      if (!v) return std::nullopt;
      if (sign->first >= 0) return SymInterval{Mul::make(v->lo, fixed), Mul::make(v->hi, fixed)};
      if (sign->second <= 0) return SymInterval{Mul::make(v->hi, fixed), Mul::make(v->lo, fixed)};
      return std::nullopt;
    }
    case NodeKind::kDiv: {
      const Div* op = e.as<Div>();
      Expr den = simplify(op->b);
      const int64_t* c = as_const_int(den);
      if (!c || *c <= 0) return std::nullopt;
      Opt a = go(op->a, relaxed, ranges);
      if (!a) return std::nullopt;
      return SymInterval{Div::make(a->lo, IntImm::make(*c)), Div::make(a->hi, IntImm::make(*c))};
    }
    case NodeKind::kMod: {
      const Mod* op = e.as<Mod>();
      Expr den = simplify(op->b);
      const int64_t* c = as_const_int(den);
      if (!c || *c <= 0) return std::nullopt;
      return SymInterval{IntImm::make(0), IntImm::make(*c - 1)};
    }
    case NodeKind::kMin: {
      Opt a = go(e.as<Min>()->a, relaxed, ranges), b = go(e.as<Min>()->b, relaxed, ranges);
      if (!a || !b) return std::nullopt;
      return SymInterval{Min::make(a->lo, b->lo), Min::make(a->hi, b->hi)};
    }
    case NodeKind::kMax: {
      Opt a = go(e.as<Max>()->a, relaxed, ranges), b = go(e.as<Max>()->b, relaxed, ranges);
      if (!a || !b) return std::nullopt;
      return SymInterval{Max::make(a->lo, b->lo), Max::make(a->hi, b->hi)};
    }
    default: {
      // Fall back to constant bounds over every variable.
      VarRanges all = ranges;
      for (const auto& kv : relaxed) all[kv.first] = kv.second;
      auto b = const_bound(e, all);
      if (!b) return std::nullopt;
      return SymInterval{IntImm::make(b->first), IntImm::make(b->second)};
    }
  }
}

}  // namespace

std::optional<SymInterval> bound_symbolic(const Expr& e, const VarRanges& relaxed,
                                          const VarRanges& ranges) {
  Opt r = go(e, relaxed, ranges);
  if (!r) return r;
  VarRanges none;
  return SymInterval{simplify(r->lo, none), simplify(r->hi, none)};
}

}  // namespace ktune::te
