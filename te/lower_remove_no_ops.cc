// Lowering pass: removes statements without effect (empty loops, unused allocations).
#include "te/ir_visitor.h"
#include "te/lower_passes.h"

namespace ktune::te {

namespace {

class BufferUse : public IRVisitor {
 public:
  explicit BufferUse(const BufferNode* b) : b_(b) {}
  bool loaded = false;

 protected:
  void visit(const Load* op) override {
    loaded |= op->buffer.get() == b_;
    IRVisitor::visit(op);
  }

 private:
  const BufferNode* b_;
};

class StoreRemover : public IRMutator {
 public:
  explicit StoreRemover(const BufferNode* b) : b_(b) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const Store* op, const Stmt& s) override {
    return op->buffer.get() == b_ ? Stmt() : s;
  }

 private:
  const BufferNode* b_;
};

class NoOpRemover : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    Stmt b = mutate(op->body);
    if (!b.defined()) return Stmt();
    return b.same_as(op->body) ? s : For::make(op->var, op->min, op->extent, op->for_kind, b);
  }
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    Stmt t = mutate(op->then_case), f = mutate(op->else_case);
    if (!t.defined() && !f.defined()) return Stmt();
    if (!t.defined()) return IfThenElse::make(Not::make(op->condition), f);
    return t.same_as(op->then_case) && f.same_as(op->else_case)
               ? s
               : IfThenElse::make(op->condition, t, f);
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
  Stmt visit(const Evaluate* op, const Stmt& s) override {
    return op->value.as<IntImm>() || op->value.as<FloatImm>() ? Stmt() : s;
  }
  Stmt visit(const LetStmt* op, const Stmt& s) override {
    Stmt b = mutate(op->body);
    if (!b.defined()) return Stmt();
    return b.same_as(op->body) ? s : LetStmt::make(op->var, op->value, b);
  }
  Stmt visit(const Allocate* op, const Stmt& s) override {
    Stmt b = mutate(op->body);
    if (!b.defined()) return Stmt();
    BufferUse u(op->buffer.get());
    u.visit_stmt(b);
    // A buffer written but never read is dead, and so are the stores to it.
    if (!u.loaded) {
      StoreRemover r(op->buffer.get());
      return mutate(r.mutate(b));
    }
    return b.same_as(op->body) ? s : Allocate::make(op->buffer, op->extent, b);
  }
};

}  // namespace

Stmt remove_no_ops(const Stmt& s) {
  NoOpRemover r;
  Stmt out = r.mutate(s);
  return out.defined() ? out : Block::make({});
}

}  // namespace ktune::te
