// Defines IRVisitor (read-only walk) and IRMutator (rebuilding walk) over te's IR, Halide style.
#pragma once

#include "te/ir.h"

namespace ktune::te {

// Walks an IR tree; override visit() for the nodes of interest and call the base to recurse.
class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  // Dispatches on the node kind; undefined handles are skipped.
  virtual void visit_expr(const Expr& e);
  virtual void visit_stmt(const Stmt& s);

 protected:
  virtual void visit(const IntImm*) {}
  virtual void visit(const FloatImm*) {}
  virtual void visit(const VarNode*) {}
  virtual void visit(const Add* op) { binary(op->a, op->b); }
  virtual void visit(const Sub* op) { binary(op->a, op->b); }
  virtual void visit(const Mul* op) { binary(op->a, op->b); }
  virtual void visit(const Div* op) { binary(op->a, op->b); }
  virtual void visit(const Mod* op) { binary(op->a, op->b); }
  virtual void visit(const Min* op) { binary(op->a, op->b); }
  virtual void visit(const Max* op) { binary(op->a, op->b); }
  virtual void visit(const EQ* op) { binary(op->a, op->b); }
  virtual void visit(const NE* op) { binary(op->a, op->b); }
  virtual void visit(const LT* op) { binary(op->a, op->b); }
  virtual void visit(const LE* op) { binary(op->a, op->b); }
  virtual void visit(const GT* op) { binary(op->a, op->b); }
  virtual void visit(const GE* op) { binary(op->a, op->b); }
  virtual void visit(const And* op) { binary(op->a, op->b); }
  virtual void visit(const Or* op) { binary(op->a, op->b); }
  virtual void visit(const Not* op);
  virtual void visit(const Select* op);
  virtual void visit(const Cast* op);
  virtual void visit(const Call* op);
  virtual void visit(const Ramp* op);
  virtual void visit(const Broadcast* op);
  virtual void visit(const Let* op);
  virtual void visit(const Load* op);
  virtual void visit(const TensorRead* op);
  virtual void visit(const Reduce* op);
  virtual void visit(const BufferLoad* op);
  virtual void visit(const For* op);
  virtual void visit(const Store* op);
  virtual void visit(const Allocate* op);
  virtual void visit(const IfThenElse* op);
  virtual void visit(const LetStmt* op);
  virtual void visit(const Block* op);
  virtual void visit(const Evaluate* op);
  virtual void visit(const BufferStore* op);
  virtual void visit(const Realize* op);

 private:
  void binary(const Expr& a, const Expr& b) {
    visit_expr(a);
    visit_expr(b);
  }
};

// Rebuilds an IR tree bottom-up; a node whose children did not change is returned as is
// (same pointer), so callers can test same_as() to see whether anything changed.
class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
  // Each visit gets the node and its handle (to return unchanged).
  virtual Expr visit(const IntImm*, const Expr& e) { return e; }
  virtual Expr visit(const FloatImm*, const Expr& e) { return e; }
  virtual Expr visit(const VarNode*, const Expr& e) { return e; }
  virtual Expr visit(const Add* op, const Expr& e);
  virtual Expr visit(const Sub* op, const Expr& e);
  virtual Expr visit(const Mul* op, const Expr& e);
  virtual Expr visit(const Div* op, const Expr& e);
  virtual Expr visit(const Mod* op, const Expr& e);
  virtual Expr visit(const Min* op, const Expr& e);
  virtual Expr visit(const Max* op, const Expr& e);
  virtual Expr visit(const EQ* op, const Expr& e);
  virtual Expr visit(const NE* op, const Expr& e);
  virtual Expr visit(const LT* op, const Expr& e);
  virtual Expr visit(const LE* op, const Expr& e);
  virtual Expr visit(const GT* op, const Expr& e);
  virtual Expr visit(const GE* op, const Expr& e);
  virtual Expr visit(const And* op, const Expr& e);
  virtual Expr visit(const Or* op, const Expr& e);
  virtual Expr visit(const Not* op, const Expr& e);
  virtual Expr visit(const Select* op, const Expr& e);
  virtual Expr visit(const Cast* op, const Expr& e);
  virtual Expr visit(const Call* op, const Expr& e);
  virtual Expr visit(const Ramp* op, const Expr& e);
  virtual Expr visit(const Broadcast* op, const Expr& e);
  virtual Expr visit(const Let* op, const Expr& e);
  virtual Expr visit(const Load* op, const Expr& e);
  virtual Expr visit(const TensorRead* op, const Expr& e);
  virtual Expr visit(const Reduce* op, const Expr& e);
  virtual Expr visit(const BufferLoad* op, const Expr& e);
  virtual Stmt visit(const For* op, const Stmt& s);
  virtual Stmt visit(const Store* op, const Stmt& s);
  virtual Stmt visit(const Allocate* op, const Stmt& s);
  virtual Stmt visit(const IfThenElse* op, const Stmt& s);
  virtual Stmt visit(const LetStmt* op, const Stmt& s);
  virtual Stmt visit(const Block* op, const Stmt& s);
  virtual Stmt visit(const Evaluate* op, const Stmt& s);
  virtual Stmt visit(const BufferStore* op, const Stmt& s);
  virtual Stmt visit(const Realize* op, const Stmt& s);
};

// Replaces free occurrences of variables (by identity) with expressions.
Expr substitute(const Expr& e, const std::vector<std::pair<Var, Expr>>& map);
Stmt substitute(const Stmt& s, const std::vector<std::pair<Var, Expr>>& map);
// True when e uses v.
bool uses_var(const Expr& e, const Var& v);
bool uses_var(const Stmt& s, const Var& v);

}  // namespace ktune::te
