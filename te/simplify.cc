// Implements the simplifier: linear forms for index arithmetic, interval bounds, guard removal.
#include "te/simplify.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "te/ir_visitor.h"

namespace ktune::te {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

namespace {

class KeyPrinter : public IRVisitor {
 public:
  std::ostringstream os;

 protected:
  void visit_expr_open(const Expr& e) {
    os << "(" << static_cast<int>(e.kind()) << ":" << e.dtype().str() << " ";
  }
  void visit(const IntImm* op) override { os << op->value; }
  void visit(const FloatImm* op) override { os << op->value << "f"; }
  void visit(const VarNode* op) override { os << "v" << static_cast<const void*>(op); }
  void visit(const Load* op) override {
    os << "L" << static_cast<const void*>(op->buffer.get());
    IRVisitor::visit(op);
  }
  void visit(const BufferLoad* op) override {
    os << "B" << static_cast<const void*>(op->buffer.get());
    IRVisitor::visit(op);
  }
  void visit(const TensorRead* op) override {
    os << "T" << static_cast<const void*>(op->tensor.get());
    IRVisitor::visit(op);
  }
  void visit(const Call* op) override {
    os << "C" << static_cast<int>(op->op);
    IRVisitor::visit(op);
  }
  void visit(const Ramp* op) override {
    os << "R" << op->lanes;
    IRVisitor::visit(op);
  }
  void visit(const Broadcast* op) override {
    os << "X" << op->lanes;
    IRVisitor::visit(op);
  }

 public:
  void visit_expr(const Expr& e) override {
    if (!e.defined()) return;
    visit_expr_open(e);
    IRVisitor::visit_expr(e);
    os << ")";
  }
};

bool is_index(const Expr& e) { return e.dtype() == kIndexType; }

// sum(coef * atom) + constant
struct Linear {
  std::vector<std::pair<Expr, int64_t>> terms;
  std::vector<std::string> keys;
  int64_t c = 0;

  void add_term(const Expr& atom, const std::string& key, int64_t coef) {
    if (coef == 0) return;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) {
        terms[i].second += coef;
        if (terms[i].second == 0) {
          terms.erase(terms.begin() + i);
          keys.erase(keys.begin() + i);
        }
        return;
      }
    }
    terms.emplace_back(atom, coef);
    keys.push_back(key);
  }
  void add(const Linear& o, int64_t scale) {
    for (size_t i = 0; i < o.terms.size(); ++i)
      add_term(o.terms[i].first, o.keys[i], o.terms[i].second * scale);
    c += o.c * scale;
  }
  bool is_const() const { return terms.empty(); }
};

Expr build(const Linear& l) {
  Expr out;
  for (const auto& [atom, coef] : l.terms) {
    if (!out.defined()) {
      out = coef == 1 ? atom : Mul::make(atom, IntImm::make(coef));
    } else if (coef > 0) {
      out = Add::make(out, coef == 1 ? atom : Mul::make(atom, IntImm::make(coef)));
    } else {
      out = Sub::make(out, coef == -1 ? atom : Mul::make(atom, IntImm::make(-coef)));
    }
  }
  if (!out.defined()) return IntImm::make(l.c);
  if (l.c > 0) return Add::make(out, IntImm::make(l.c));
  if (l.c < 0) return Sub::make(out, IntImm::make(-l.c));
  return out;
}

std::optional<std::pair<int64_t, int64_t>> bound_impl(const Expr& e, const VarRanges& r);

class Simplifier : public IRMutator {
 public:
  explicit Simplifier(const VarRanges& r) : ranges_(r) {}
  using IRMutator::mutate;

  Expr mutate(const Expr& e) override {
    if (e.defined() && is_index(e) && is_arith(e)) return build(linearize(e));
    return IRMutator::mutate(e);
  }

  Linear linearize(const Expr& e) {
    Linear l;
    switch (e.kind()) {
      case NodeKind::kIntImm:
        l.c = e.as<IntImm>()->value;
        return l;
      case NodeKind::kAdd: {
        const Add* op = e.as<Add>();
        l = linearize(op->a);
        l.add(linearize(op->b), 1);
        return l;
      }
      case NodeKind::kSub: {
        const Sub* op = e.as<Sub>();
        l = linearize(op->a);
        l.add(linearize(op->b), -1);
        return l;
      }
      case NodeKind::kMul: {
        const Mul* op = e.as<Mul>();
        Linear a = linearize(op->a), b = linearize(op->b);
        if (b.is_const()) {
          l.add(a, b.c);
          return l;
        }
        if (a.is_const()) {
          l.add(b, a.c);
          return l;
        }
        return atom(Mul::make(build(a), build(b)));
      }
      case NodeKind::kDiv:
      case NodeKind::kMod:
        return divmod(e);
      case NodeKind::kMin:
      case NodeKind::kMax:
        return minmax(e);
      default:
        return atom(IRMutator::mutate(e));
    }
  }

 protected:
  Expr visit(const LT* op, const Expr& e) override { return cmp(op, e); }
  Expr visit(const LE* op, const Expr& e) override { return cmp(op, e); }
  Expr visit(const GT* op, const Expr& e) override { return cmp(op, e); }
  Expr visit(const GE* op, const Expr& e) override { return cmp(op, e); }
  Expr visit(const EQ* op, const Expr& e) override { return cmp(op, e); }
  Expr visit(const NE* op, const Expr& e) override { return cmp(op, e); }
  Expr visit(const And* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_const_int(a, 0) || is_const_int(b, 0)) return IntImm::make(0, e.dtype());
    if (is_const_int(a, 1)) return b;
    if (is_const_int(b, 1)) return a;
    return a.same_as(op->a) && b.same_as(op->b) ? e : And::make(a, b);
  }
  Expr visit(const Or* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_const_int(a, 1) || is_const_int(b, 1)) return IntImm::make(1, e.dtype());
    if (is_const_int(a, 0)) return b;
    if (is_const_int(b, 0)) return a;
    return a.same_as(op->a) && b.same_as(op->b) ? e : Or::make(a, b);
  }
  Expr visit(const Not* op, const Expr& e) override {
    Expr a = mutate(op->a);
    if (const int64_t* v = as_const_int(a)) return IntImm::make(*v ? 0 : 1, e.dtype());
    return a.same_as(op->a) ? e : Not::make(a);
  }
  Expr visit(const Select* op, const Expr& e) override {
    Expr c = mutate(op->condition);
    if (const int64_t* v = as_const_int(c)) return mutate(*v ? op->true_value : op->false_value);
    Expr t = mutate(op->true_value), f = mutate(op->false_value);
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value))
      return e;
    return Select::make(c, t, f);
  }
  Expr visit(const Cast* op, const Expr& e) override {
    Expr v = mutate(op->value);
    if (op->dtype.is_scalar()) {
      if (const IntImm* i = v.as<IntImm>()) {
        if (op->dtype.is_float()) return FloatImm::make(static_cast<double>(i->value), op->dtype);
        return IntImm::make(i->value, op->dtype);
      }
      if (const FloatImm* f = v.as<FloatImm>()) {
        if (op->dtype.is_float()) return FloatImm::make(f->value, op->dtype);
      }
    }
    return v.same_as(op->value) ? e : Cast::make(op->dtype, v);
  }
  // Float arithmetic: fold two immediates and the identities x*1, x+0.
  Expr visit(const Add* op, const Expr& e) override { return farith(op, e); }
  Expr visit(const Sub* op, const Expr& e) override { return farith(op, e); }
  Expr visit(const Mul* op, const Expr& e) override { return farith(op, e); }

 private:
  static bool is_arith(const Expr& e) {
    switch (e.kind()) {
      case NodeKind::kIntImm:
      case NodeKind::kAdd:
      case NodeKind::kSub:
      case NodeKind::kMul:
      case NodeKind::kDiv:
      case NodeKind::kMod:
      case NodeKind::kMin:
      case NodeKind::kMax:
        return true;
      default:
        return false;
    }
  }

  Linear atom(const Expr& e) {
    Linear l;
    if (const IntImm* i = e.as<IntImm>()) {
      l.c = i->value;
      return l;
    }
    l.add_term(e, structural_key(e), 1);
    return l;
  }

  std::optional<std::pair<int64_t, int64_t>> bound(const Linear& l) {
    return bound_impl(build(l), ranges_);
  }

  Linear divmod(const Expr& e) {
    bool is_div = e.kind() == NodeKind::kDiv;
    Expr a = is_div ? e.as<Div>()->a : e.as<Mod>()->a;
    Expr b = is_div ? e.as<Div>()->b : e.as<Mod>()->b;
    Linear num = linearize(a), den = linearize(b);
    if (den.is_const() && den.c > 0) {
      int64_t c = den.c;
      if (num.is_const()) {
        Linear l;
        l.c = is_div ? floor_div(num.c, c) : floor_mod(num.c, c);
        return l;
      }
      // num = c*X + R with R the non-divisible part.
      Linear x, rest;
      for (size_t i = 0; i < num.terms.size(); ++i) {
        if (num.terms[i].second % c == 0) {
          x.add_term(num.terms[i].first, num.keys[i], num.terms[i].second / c);
        } else {
          rest.add_term(num.terms[i].first, num.keys[i], num.terms[i].second);
        }
      }
      x.c = floor_div(num.c, c);
      rest.c = floor_mod(num.c, c);
      auto rb = bound(rest);
      if (rb && floor_div(rb->first, c) == floor_div(rb->second, c)) {
        int64_t m = floor_div(rb->first, c);
        if (is_div) {
          x.c += m;
          return x;
        }
        rest.c -= m * c;
        return rest;
      }
      if (is_div) {
        // Keep the divisible part outside: (c*X + R) / c = X + R / c.
        Linear l = x;
        l.add(atom(Div::make(build(rest), IntImm::make(c))), 1);
        return l;
      }
      return atom(Mod::make(build(rest), IntImm::make(c)));
    }
    Expr ea = build(num), eb = build(den);
    return atom(is_div ? Div::make(ea, eb) : Mod::make(ea, eb));
  }

  Linear minmax(const Expr& e) {
    bool is_min = e.kind() == NodeKind::kMin;
    Expr a = is_min ? e.as<Min>()->a : e.as<Max>()->a;
    Expr b = is_min ? e.as<Min>()->b : e.as<Max>()->b;
    Linear la = linearize(a), lb = linearize(b);
    Linear d = la;
    d.add(lb, -1);
    auto db = bound(d);
    if (db && db->second <= 0) return is_min ? la : lb;  // a <= b
    if (db && db->first >= 0) return is_min ? lb : la;   // a >= b
    Expr ea = build(la), eb = build(lb);
    return atom(is_min ? Min::make(ea, eb) : Max::make(ea, eb));
  }

  template <typename T>
  Expr cmp(const T* op, const Expr& e) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_index(a)) {
      Linear d = linearize(a);
      d.add(linearize(b), -1);
      auto db = bound(d);
      if (db) {
        int64_t lo = db->first, hi = db->second;
        std::optional<bool> r;
        switch (T::kKind) {
          case NodeKind::kLT:
            if (hi < 0)
              r = true;
            else if (lo >= 0)
              r = false;
            break;
          case NodeKind::kLE:
            if (hi <= 0)
              r = true;
            else if (lo > 0)
              r = false;
            break;
          case NodeKind::kGT:
            if (lo > 0)
              r = true;
            else if (hi <= 0)
              r = false;
            break;
          case NodeKind::kGE:
            if (lo >= 0)
              r = true;
            else if (hi < 0)
              r = false;
            break;
          case NodeKind::kEQ:
            if (lo == 0 && hi == 0)
              r = true;
            else if (lo > 0 || hi < 0)
              r = false;
            break;
          case NodeKind::kNE:
            if (lo > 0 || hi < 0)
              r = true;
            else if (lo == 0 && hi == 0)
              r = false;
            break;
          default:
            break;
        }
        if (r) return IntImm::make(*r ? 1 : 0, Bool());
      }
    } else if (a.dtype().is_scalar()) {
      const FloatImm* fa = a.as<FloatImm>();
      const FloatImm* fb = b.as<FloatImm>();
      if (fa && fb) {
        double x = fa->value, y = fb->value;
        bool r = false;
        switch (T::kKind) {
          case NodeKind::kLT:
            r = x < y;
            break;
          case NodeKind::kLE:
            r = x <= y;
            break;
          case NodeKind::kGT:
            r = x > y;
            break;
          case NodeKind::kGE:
            r = x >= y;
            break;
          case NodeKind::kEQ:
            r = x == y;
            break;
          case NodeKind::kNE:
            r = x != y;
            break;
          default:
            break;
        }
        return IntImm::make(r ? 1 : 0, Bool());
      }
    }
    return a.same_as(op->a) && b.same_as(op->b) ? e : T::make(a, b);
  }

  template <typename T>
  Expr farith(const T* op, const Expr& e) {
    Expr a = mutate(op->a), b = mutate(op->b);
    const FloatImm* fa = a.as<FloatImm>();
    const FloatImm* fb = b.as<FloatImm>();
    if (fa && fb) {
      double x = fa->value, y = fb->value;
      double r = T::kKind == NodeKind::kAdd ? x + y : T::kKind == NodeKind::kSub ? x - y : x * y;
      return FloatImm::make(r, a.dtype());
    }
    if (a.dtype().is_float()) {
      if (T::kKind == NodeKind::kMul && fb && fb->value == 1.0) return a;
      if (T::kKind == NodeKind::kMul && fa && fa->value == 1.0) return b;
      if (T::kKind != NodeKind::kMul && fb && fb->value == 0.0) return a;
      if (T::kKind == NodeKind::kAdd && fa && fa->value == 0.0) return b;
    }
    return a.same_as(op->a) && b.same_as(op->b) ? e : T::make(a, b);
  }

  const VarRanges& ranges_;
};

using Bound = std::optional<std::pair<int64_t, int64_t>>;

Bound bound_impl(const Expr& e, const VarRanges& r) {
  if (!e.defined()) return std::nullopt;
  auto bin = [&](const Expr& a, const Expr& b)
      -> std::optional<std::pair<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>>> {
    Bound x = bound_impl(a, r), y = bound_impl(b, r);
    if (!x || !y) return std::nullopt;
    return std::make_pair(*x, *y);
  };
  switch (e.kind()) {
    case NodeKind::kIntImm:
      return std::make_pair(e.as<IntImm>()->value, e.as<IntImm>()->value);
    case NodeKind::kVar: {
      auto it = r.find(e.as<VarNode>());
      if (it == r.end()) return std::nullopt;
      return it->second;
    }
    case NodeKind::kAdd: {
      auto p = bin(e.as<Add>()->a, e.as<Add>()->b);
      if (!p) return std::nullopt;
      return std::make_pair(p->first.first + p->second.first, p->first.second + p->second.second);
    }
    case NodeKind::kSub: {
      auto p = bin(e.as<Sub>()->a, e.as<Sub>()->b);
      if (!p) return std::nullopt;
      return std::make_pair(p->first.first - p->second.second, p->first.second - p->second.first);
    }
    case NodeKind::kMul: {
      auto p = bin(e.as<Mul>()->a, e.as<Mul>()->b);
      if (!p) return std::nullopt;
      int64_t c[4] = {p->first.first * p->second.first, p->first.first * p->second.second,
                      p->first.second * p->second.first, p->first.second * p->second.second};
      return std::make_pair(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
    }
    case NodeKind::kDiv: {
      auto p = bin(e.as<Div>()->a, e.as<Div>()->b);
      if (!p || p->second.first <= 0) return std::nullopt;
      int64_t d1 = p->second.first, d2 = p->second.second;
      int64_t c[4] = {floor_div(p->first.first, d1), floor_div(p->first.first, d2),
                      floor_div(p->first.second, d1), floor_div(p->first.second, d2)};
      return std::make_pair(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
    }
    case NodeKind::kMod: {
      Bound d = bound_impl(e.as<Mod>()->b, r);
      if (!d || d->first <= 0) return std::nullopt;
      Bound a = bound_impl(e.as<Mod>()->a, r);
      if (a && d->first == d->second &&
          floor_div(a->first, d->first) == floor_div(a->second, d->first)) {
        return std::make_pair(floor_mod(a->first, d->first), floor_mod(a->second, d->first));
      }
      return std::make_pair(int64_t{0}, d->second - 1);
    }
    case NodeKind::kMin: {
      auto p = bin(e.as<Min>()->a, e.as<Min>()->b);
      if (!p) return std::nullopt;
      return std::make_pair(std::min(p->first.first, p->second.first),
                            std::min(p->first.second, p->second.second));
    }
    case NodeKind::kMax: {
      auto p = bin(e.as<Max>()->a, e.as<Max>()->b);
      if (!p) return std::nullopt;
      return std::make_pair(std::max(p->first.first, p->second.first),
                            std::max(p->first.second, p->second.second));
    }
    case NodeKind::kSelect: {
      auto p = bin(e.as<Select>()->true_value, e.as<Select>()->false_value);
      if (!p) return std::nullopt;
      return std::make_pair(std::min(p->first.first, p->second.first),
                            std::max(p->first.second, p->second.second));
    }
    case NodeKind::kRamp: {
      const Ramp* op = e.as<Ramp>();
      auto p = bin(op->base, op->stride);
      if (!p) return std::nullopt;
      int64_t n = op->lanes - 1;
      return std::make_pair(p->first.first + std::min<int64_t>(0, n * p->second.first),
                            p->first.second + std::max<int64_t>(0, n * p->second.second));
    }
    case NodeKind::kBroadcast:
      return bound_impl(e.as<Broadcast>()->value, r);
    case NodeKind::kCast: {
      const Cast* op = e.as<Cast>();
      if (op->dtype.is_int() && op->dtype.bits == 64 && !op->value.dtype().is_float())
        return bound_impl(op->value, r);
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

// When s is `if (v + k < 0) then` (no else) for loop variable v, returns -k: v's exclusive bound.
std::optional<int64_t> upper_limit(const Stmt& s, const Var& v) {
  const IfThenElse* op = s.as<IfThenElse>();
  if (!op || op->else_case.defined()) return std::nullopt;
  const LT* lt = op->condition.as<LT>();
  if (!lt || lt->a.dtype() != kIndexType) return std::nullopt;
  Expr d = simplify(Sub::make(lt->a, lt->b));
  if (d.same_as(v) || (d.as<VarNode>() && d.as<VarNode>() == v.get())) return 0;
  if (const Add* a = d.as<Add>()) {
    const int64_t* k = as_const_int(a->b);
    if (a->a.as<VarNode>() == v.get() && k) return -*k;
  }
  if (const Sub* a = d.as<Sub>()) {
    const int64_t* k = as_const_int(a->b);
    if (a->a.as<VarNode>() == v.get() && k) return *k;
  }
  return std::nullopt;
}

class StmtSimplifier : public IRMutator {
 public:
  using IRMutator::mutate;
  Expr mutate(const Expr& e) override { return simplify(e, ranges_); }

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    Expr mn = mutate(op->min), ext = mutate(op->extent);
    const int64_t* m = as_const_int(mn);
    const int64_t* x = as_const_int(ext);
    if (x && *x <= 0) return Stmt();
    if (x && *x == 1) return mutate(substitute(op->body, {{op->var, mn}}));
    if (m && x) ranges_[op->var.get()] = {*m, *m + *x - 1};
    Stmt body = mutate(op->body);
    ranges_.erase(op->var.get());
    if (!body.defined()) return Stmt();
    // for (x, m, n) { if (x < c) S } -> for (x, m, min(n, c - m)) S: a peeled tail's guard
    // becomes its loop bound.
    if (m && x) {
      if (std::optional<int64_t> c = upper_limit(body, op->var)) {
        int64_t ext = std::clamp<int64_t>(*c - *m, 0, *x);
        if (ext == 0) return Stmt();
        Stmt inner = body.as<IfThenElse>()->then_case;
        if (ext == 1) return mutate(substitute(inner, {{op->var, mn}}));
        ranges_[op->var.get()] = {*m, *m + ext - 1};
        inner = mutate(inner);
        ranges_.erase(op->var.get());
        return For::make(op->var, mn, IntImm::make(ext), op->for_kind, inner);
      }
    }
    if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return s;
    return For::make(op->var, mn, ext, op->for_kind, body);
  }
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    Expr c = mutate(op->condition);
    if (const int64_t* v = as_const_int(c))
      return *v ? mutate(op->then_case) : mutate(op->else_case);
    Stmt t = mutate(op->then_case), f = mutate(op->else_case);
    if (!t.defined() && !f.defined()) return Stmt();
    if (!t.defined()) return IfThenElse::make(simplify(Not::make(c), ranges_), f);
    if (c.same_as(op->condition) && t.same_as(op->then_case) && f.same_as(op->else_case)) return s;
    return IfThenElse::make(c, t, f);
  }
  Stmt visit(const Block* op, const Stmt& s) override {
    std::vector<Stmt> out;
    bool changed = false;
    for (const Stmt& x : op->stmts) {
      out.push_back(mutate(x));
      changed |= !out.back().same_as(x);
    }
    return changed ? Block::make(std::move(out)) : s;
  }
  Stmt visit(const Allocate* op, const Stmt& s) override {
    Stmt b = mutate(op->body);
    if (!b.defined()) return Stmt();
    return b.same_as(op->body) ? s : Allocate::make(op->buffer, op->extent, b);
  }
  Stmt visit(const Realize* op, const Stmt& s) override {
    Stmt b = IRMutator::visit(op, s);
    const Realize* r = b.as<Realize>();
    if (!r->body.defined()) return Stmt();
    return b;
  }

 private:
  VarRanges ranges_;
};

}  // namespace

std::string structural_key(const Expr& e) {
  KeyPrinter p;
  p.visit_expr(e);
  return p.os.str();
}

Expr simplify(const Expr& e, const VarRanges& ranges) {
  if (!e.defined()) return e;
  Simplifier s(ranges);
  return s.mutate(e);
}

Stmt simplify(const Stmt& s) {
  StmtSimplifier m;
  return m.mutate(s);
}

std::optional<std::pair<int64_t, int64_t>> const_bound(const Expr& e, const VarRanges& ranges) {
  return bound_impl(simplify(e, ranges), ranges);
}

bool can_prove(const Expr& cond, const VarRanges& ranges) {
  return is_const_int(simplify(cond, ranges), 1);
}

}  // namespace ktune::te
