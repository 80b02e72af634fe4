// The helpers that skip_padding_taps and cut_border_tiles share (te/lower_padding_guards.h).
#include "te/lower_padding_guards.h"

namespace ktune::te::padding {

Stmt with_loop_range(VarRanges& outer, const For* op, const std::function<Stmt()>& visit) {
  const int64_t* m = as_const_int(op->min);
  const int64_t* x = as_const_int(op->extent);
  if (m && x) outer[op->var.get()] = {*m, *m + *x - 1};
  Stmt r = visit();
  outer.erase(op->var.get());
  return r;
}

void conjuncts(const Expr& c, std::vector<Expr>* out) {
  if (const And* a = c.as<And>()) {
    conjuncts(a->a, out);
    conjuncts(a->b, out);
    return;
  }
  out->push_back(c);
}

Expr conjunction(const std::vector<Expr>& cs) {
  Expr r;
  for (const Expr& c : cs) r = r.defined() ? And::make(r, c) : c;
  return r;
}

std::optional<Expr> as_nonnegative(const Expr& c) {
  auto diff = [](const Expr& a, const Expr& b, int64_t minus) -> std::optional<Expr> {
    if (!a.dtype().is_int() || !b.dtype().is_int() || a.dtype().is_vector() ||
        b.dtype().is_vector())
      return std::nullopt;
    Expr d = Sub::make(a, b);
    if (minus) d = Sub::make(d, make_const(d.dtype(), static_cast<double>(minus)));
    return simplify(d);
  };
  if (const GE* o = c.as<GE>()) return diff(o->a, o->b, 0);
  if (const GT* o = c.as<GT>()) return diff(o->a, o->b, 1);
  if (const LE* o = c.as<LE>()) return diff(o->b, o->a, 0);
  if (const LT* o = c.as<LT>()) return diff(o->b, o->a, 1);
  return std::nullopt;
}

std::optional<int64_t> slope_in(const Expr& e, const Var& v) {
  const DataType t = v.dtype();
  const Expr at0 = simplify(substitute(e, {{v, make_zero(t)}}));
  const Expr at1 = simplify(substitute(e, {{v, make_const(t, 1)}}));
  const Expr slope = simplify(Sub::make(at1, at0));
  const int64_t* k = as_const_int(slope);
  if (!k) return std::nullopt;
  const Expr rest = simplify(Sub::make(e, Add::make(at0, Mul::make(slope, v))));
  if (!is_const_int(rest, 0)) return std::nullopt;
  return *k;
}

std::vector<Var> vars_of(const Expr& e) {
  class Collect : public IRVisitor {
   public:
    std::vector<Var> vars;
    void visit_expr(const Expr& e) override {
      if (const VarNode* v = e.as<VarNode>()) {
        for (const Var& x : vars)
          if (x.get() == v) return;
        vars.push_back(Var::from_expr(e));
        return;
      }
      IRVisitor::visit_expr(e);
    }
  };
  Collect c;
  c.visit_expr(e);
  return c.vars;
}

bool some_point(const std::vector<Var>& vars, const VarRanges& ranges,
                const std::function<bool(const std::vector<std::pair<Var, Expr>>&)>& holds) {
  std::vector<std::pair<int64_t, int64_t>> r;
  int64_t points = 1;
  for (const Var& v : vars) {
    auto it = ranges.find(v.get());
    if (it == ranges.end()) return true;
    r.push_back(it->second);
    points *= it->second.second - it->second.first + 1;
    if (points > kMaxTestPoints) return true;
  }
  std::vector<int64_t> at(vars.size());
  for (size_t i = 0; i < vars.size(); ++i) at[i] = r[i].first;
  for (int64_t p = 0; p < points; ++p) {
    std::vector<std::pair<Var, Expr>> map;
    for (size_t i = 0; i < vars.size(); ++i)
      map.emplace_back(vars[i], make_const(vars[i].dtype(), static_cast<double>(at[i])));
    if (holds(map)) return true;
    for (size_t i = 0; i < vars.size() && ++at[i] > r[i].second; ++i) at[i] = r[i].first;
  }
  return false;
}

}  // namespace ktune::te::padding
