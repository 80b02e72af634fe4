// Implements IRVisitor, IRMutator and substitution.
#include "te/ir_visitor.h"

#include <unordered_map>

#include "support/error.h"

namespace ktune::te {

// Lists of macro calls: kept as written.
// clang-format off
#define KTUNE_EXPR_CASES(X)                                                                        \
  X(IntImm) X(FloatImm) X(VarNode) X(Add) X(Sub) X(Mul) X(Div) X(Mod) X(Min) X(Max) X(EQ) X(NE)     \
  X(LT) X(LE) X(GT) X(GE) X(And) X(Or) X(Not) X(Select) X(Cast) X(Call) X(Ramp) X(Broadcast) X(Let) \
  X(Load) X(TensorRead) X(Reduce) X(BufferLoad)
#define KTUNE_STMT_CASES(X) \
  X(For) X(Store) X(Allocate) X(IfThenElse) X(LetStmt) X(Block) X(Evaluate) X(BufferStore) X(Realize)
// clang-format on

void IRVisitor::visit_expr(const Expr& e) {
  if (!e.defined()) return;
  switch (e.kind()) {
#define CASE(T)       \
  case T::kKind:      \
    visit(e.as<T>()); \
    return;
    KTUNE_EXPR_CASES(CASE)
#undef CASE
    default:
      throw Error(ErrorKind::kInternal, "IRVisitor: statement kind in an expression");
  }
}

void IRVisitor::visit_stmt(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
#define CASE(T)       \
  case T::kKind:      \
    visit(s.as<T>()); \
    return;
    KTUNE_STMT_CASES(CASE)
#undef CASE
    default:
      throw Error(ErrorKind::kInternal, "IRVisitor: expression kind in a statement");
  }
}

void IRVisitor::visit(const Not* op) { visit_expr(op->a); }
void IRVisitor::visit(const Select* op) {
  visit_expr(op->condition);
  visit_expr(op->true_value);
  visit_expr(op->false_value);
}
void IRVisitor::visit(const Cast* op) { visit_expr(op->value); }
void IRVisitor::visit(const Call* op) {
  for (const Expr& a : op->args) visit_expr(a);
}
void IRVisitor::visit(const Ramp* op) {
  visit_expr(op->base);
  visit_expr(op->stride);
}
void IRVisitor::visit(const Broadcast* op) { visit_expr(op->value); }
void IRVisitor::visit(const Let* op) {
  visit_expr(op->value);
  visit_expr(op->body);
}
void IRVisitor::visit(const Load* op) { visit_expr(op->index); }
void IRVisitor::visit(const TensorRead* op) {
  for (const Expr& i : op->indices) visit_expr(i);
}
void IRVisitor::visit(const Reduce* op) { visit_expr(op->source); }
void IRVisitor::visit(const BufferLoad* op) {
  for (const Expr& i : op->indices) visit_expr(i);
}
void IRVisitor::visit(const For* op) {
  visit_expr(op->min);
  visit_expr(op->extent);
  visit_stmt(op->body);
}
void IRVisitor::visit(const Store* op) {
  visit_expr(op->value);
  visit_expr(op->index);
}
void IRVisitor::visit(const Allocate* op) {
  visit_expr(op->extent);
  visit_stmt(op->body);
}
void IRVisitor::visit(const IfThenElse* op) {
  visit_expr(op->condition);
  visit_stmt(op->then_case);
  visit_stmt(op->else_case);
}
void IRVisitor::visit(const LetStmt* op) {
  visit_expr(op->value);
  visit_stmt(op->body);
}
void IRVisitor::visit(const Block* op) {
  for (const Stmt& s : op->stmts) visit_stmt(s);
}
void IRVisitor::visit(const Evaluate* op) { visit_expr(op->value); }
void IRVisitor::visit(const BufferStore* op) {
  visit_expr(op->value);
  for (const Expr& i : op->indices) visit_expr(i);
}
void IRVisitor::visit(const Realize* op) {
  for (const Expr& m : op->mins) visit_expr(m);
  visit_stmt(op->body);
}

// ---------------------------------------------------------------- mutator

Expr IRMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e.kind()) {
#define CASE(T)  \
  case T::kKind: \
    return visit(e.as<T>(), e);
    KTUNE_EXPR_CASES(CASE)
#undef CASE
    default:
      throw Error(ErrorKind::kInternal, "IRMutator: statement kind in an expression");
  }
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
#define CASE(T)  \
  case T::kKind: \
    return visit(s.as<T>(), s);
    KTUNE_STMT_CASES(CASE)
#undef CASE
    default:
      throw Error(ErrorKind::kInternal, "IRMutator: expression kind in a statement");
  }
}

#define BINARY_MUTATE(T)                                \
  Expr IRMutator::visit(const T* op, const Expr& e) {   \
    Expr a = mutate(op->a), b = mutate(op->b);          \
    if (a.same_as(op->a) && b.same_as(op->b)) return e; \
    return T::make(std::move(a), std::move(b));         \
  }
BINARY_MUTATE(Add)
BINARY_MUTATE(Sub)
BINARY_MUTATE(Mul)
BINARY_MUTATE(Div)
BINARY_MUTATE(Mod)
BINARY_MUTATE(Min)
BINARY_MUTATE(Max)
BINARY_MUTATE(EQ)
BINARY_MUTATE(NE)
BINARY_MUTATE(LT)
BINARY_MUTATE(LE)
BINARY_MUTATE(GT)
BINARY_MUTATE(GE)
BINARY_MUTATE(And)
BINARY_MUTATE(Or)
#undef BINARY_MUTATE

namespace {
bool mutate_all(IRMutator& m, const std::vector<Expr>& in, std::vector<Expr>* out) {
  bool changed = false;
  out->reserve(in.size());
  for (const Expr& x : in) {
    out->push_back(m.mutate(x));
    changed |= !out->back().same_as(x);
  }
  return changed;
}
}  // namespace

Expr IRMutator::visit(const Not* op, const Expr& e) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? e : Not::make(a);
}
Expr IRMutator::visit(const Select* op, const Expr& e) {
  Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
  if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) return e;
  return Select::make(c, t, f);
}
Expr IRMutator::visit(const Cast* op, const Expr& e) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? e : Cast::make(op->dtype.with_lanes(v.dtype().lanes), v);
}
Expr IRMutator::visit(const Call* op, const Expr& e) {
  std::vector<Expr> args;
  return mutate_all(*this, op->args, &args) ? Call::make(op->op, std::move(args)) : e;
}
Expr IRMutator::visit(const Ramp* op, const Expr& e) {
  Expr b = mutate(op->base), s = mutate(op->stride);
  if (b.same_as(op->base) && s.same_as(op->stride)) return e;
  return Ramp::make(b, s, op->lanes);
}
Expr IRMutator::visit(const Broadcast* op, const Expr& e) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? e : Broadcast::make(v, op->lanes);
}
Expr IRMutator::visit(const Let* op, const Expr& e) {
  Expr v = mutate(op->value), b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return e;
  return Let::make(op->var, v, b);
}
Expr IRMutator::visit(const Load* op, const Expr& e) {
  Expr i = mutate(op->index);
  return i.same_as(op->index) ? e : Load::make(op->buffer, i);
}
Expr IRMutator::visit(const TensorRead* op, const Expr& e) {
  std::vector<Expr> idx;
  if (!mutate_all(*this, op->indices, &idx)) return e;
  return Expr(std::make_shared<TensorRead>(op->dtype, op->tensor, std::move(idx)));
}
Expr IRMutator::visit(const Reduce* op, const Expr& e) {
  Expr s = mutate(op->source);
  return s.same_as(op->source) ? e : Reduce::make(op->op, s, op->axes);
}
Expr IRMutator::visit(const BufferLoad* op, const Expr& e) {
  std::vector<Expr> idx;
  return mutate_all(*this, op->indices, &idx) ? BufferLoad::make(op->buffer, std::move(idx)) : e;
}
Stmt IRMutator::visit(const For* op, const Stmt& s) {
  Expr m = mutate(op->min), x = mutate(op->extent);
  Stmt b = mutate(op->body);
  if (m.same_as(op->min) && x.same_as(op->extent) && b.same_as(op->body)) return s;
  return For::make(op->var, m, x, op->for_kind, b);
}
Stmt IRMutator::visit(const Store* op, const Stmt& s) {
  Expr v = mutate(op->value), i = mutate(op->index);
  if (v.same_as(op->value) && i.same_as(op->index)) return s;
  return Store::make(op->buffer, v, i);
}
Stmt IRMutator::visit(const Allocate* op, const Stmt& s) {
  Expr x = mutate(op->extent);
  Stmt b = mutate(op->body);
  if (x.same_as(op->extent) && b.same_as(op->body)) return s;
  return Allocate::make(op->buffer, x, b);
}
Stmt IRMutator::visit(const IfThenElse* op, const Stmt& s) {
  Expr c = mutate(op->condition);
  Stmt t = mutate(op->then_case), f = mutate(op->else_case);
  if (c.same_as(op->condition) && t.same_as(op->then_case) && f.same_as(op->else_case)) return s;
  return IfThenElse::make(c, t, f);
}
Stmt IRMutator::visit(const LetStmt* op, const Stmt& s) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return s;
  return LetStmt::make(op->var, v, b);
}
Stmt IRMutator::visit(const Block* op, const Stmt& s) {
  std::vector<Stmt> out;
  bool changed = false;
  for (const Stmt& x : op->stmts) {
    out.push_back(mutate(x));
    changed |= !out.back().same_as(x);
  }
  return changed ? Block::make(std::move(out)) : s;
}
Stmt IRMutator::visit(const Evaluate* op, const Stmt& s) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? s : Evaluate::make(v);
}
Stmt IRMutator::visit(const BufferStore* op, const Stmt& s) {
  Expr v = mutate(op->value);
  std::vector<Expr> idx;
  bool changed = mutate_all(*this, op->indices, &idx);
  if (!changed && v.same_as(op->value)) return s;
  return BufferStore::make(op->buffer, v, std::move(idx));
}
Stmt IRMutator::visit(const Realize* op, const Stmt& s) {
  std::vector<Expr> mins;
  bool changed = mutate_all(*this, op->mins, &mins);
  Stmt b = mutate(op->body);
  if (!changed && b.same_as(op->body)) return s;
  return Realize::make(op->buffer, std::move(mins), op->extents, b);
}

// ---------------------------------------------------------------- substitution

namespace {
class Substituter : public IRMutator {
 public:
  explicit Substituter(const std::vector<std::pair<Var, Expr>>& map) {
    for (const auto& [v, e] : map) map_[v.get()] = e;
  }
  using IRMutator::mutate;

 protected:
  Expr visit(const VarNode* op, const Expr& e) override {
    auto it = map_.find(op);
    return it == map_.end() ? e : it->second;
  }

 private:
  std::unordered_map<const VarNode*, Expr> map_;
};

class VarFinder : public IRVisitor {
 public:
  explicit VarFinder(const VarNode* v) : v_(v) {}
  bool found = false;

 protected:
  void visit(const VarNode* op) override { found |= op == v_; }

 private:
  const VarNode* v_;
};
}  // namespace

Expr substitute(const Expr& e, const std::vector<std::pair<Var, Expr>>& map) {
  if (map.empty()) return e;
  Substituter s(map);
  return s.mutate(e);
}
Stmt substitute(const Stmt& st, const std::vector<std::pair<Var, Expr>>& map) {
  if (map.empty()) return st;
  Substituter s(map);
  return s.mutate(st);
}
bool uses_var(const Expr& e, const Var& v) {
  VarFinder f(v.get());
  f.visit_expr(e);
  return f.found;
}
bool uses_var(const Stmt& s, const Var& v) {
  VarFinder f(v.get());
  f.visit_stmt(s);
  return f.found;
}

}  // namespace ktune::te
