// Defines PaddingGuards, the guarded tap updates that tensorize and skip_padding_taps leave for
// the unswitch and cut_border_tiles, and the nest scan and conjunct helpers those passes share.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "te/ir.h"
#include "te/ir_visitor.h"
#include "te/simplify.h"

namespace ktune::te {

// The conditions (by node identity) of the guarded tap updates: If conditions around an update
// (skip_padding_taps' around a scalar or vector update, tensorize's around an intrinsic's) and
// lane Select conditions inside one. The passes rewrite guards without a structural match, so
// the nodes are kept alive here: no other expression can take their address.
struct PaddingGuards {
  std::unordered_set<const ExprNode*> conditions;
  std::vector<Expr> alive;

  bool contains(const Expr& c) const { return conditions.count(c.get()) != 0; }
  void add(const Expr& c) {
    conditions.insert(c.get());
    alive.push_back(c);
  }
};

namespace padding {

// Runs `visit` (a mutator's visit of the loop op) with op's variable in `outer` at its range when
// the range is constant: the passes test conditions against the loops enclosing a nest.
Stmt with_loop_range(VarRanges& outer, const For* op, const std::function<Stmt()>& visit);

// The conjuncts of c (c itself when it is not an And).
void conjuncts(const Expr& c, std::vector<Expr>* out);
// The And of cs; undefined for none.
Expr conjunction(const std::vector<Expr>& cs);
// An integer comparison as e >= 0, or nullopt.
std::optional<Expr> as_nonnegative(const Expr& c);
// The coefficient k when e = e0 + k * v with k constant and e0 free of v, or nullopt.
std::optional<int64_t> slope_in(const Expr& e, const Var& v);
// The variables an expression uses.
std::vector<Var> vars_of(const Expr& e);

// Beyond this many values of the enclosing variables, a test is kept without checking that some
// value passes it.
constexpr int64_t kMaxTestPoints = 4096;

// Whether `holds` is true for some values of `vars` in `ranges` (given as substitutions); true
// when that is not known (a variable without a range, more than kMaxTestPoints values).
bool some_point(const std::vector<Var>& vars, const VarRanges& ranges,
                const std::function<bool(const std::vector<std::pair<Var, Expr>>&)>& holds);

// One guard inside a candidate nest: its conjuncts, the constant ranges of the loops around it
// inside the nest, and the accumulator it guards.
struct Guard {
  std::vector<Expr> conjuncts;
  std::vector<std::pair<Var, std::pair<int64_t, int64_t>>> ranges;
  const BufferNode* accumulator = nullptr;
  bool branch = false;  // an If around the update (not a Select of lanes inside it)
};

// Scans a loop nest: its guards, the accumulators it initializes, the variables it binds.
class NestScan : public IRVisitor {
 public:
  explicit NestScan(const PaddingGuards& guards) : known_(guards) {}
  std::vector<Guard> found;
  std::unordered_set<const BufferNode*> initialized;
  std::unordered_set<const VarNode*> bound;
  int stores = 0, guarded_stores = 0;  // guarded: the whole store under a guard's If

 protected:
  void visit(const For* op) override {
    bound.insert(op->var.get());
    const int64_t* m = as_const_int(op->min);
    const int64_t* x = as_const_int(op->extent);
    const bool ranged = m && x && *x > 0;
    if (ranged) ranges_.push_back({op->var, {*m, *m + *x - 1}});
    IRVisitor::visit(op);
    if (ranged) ranges_.pop_back();
  }
  void visit(const LetStmt* op) override {
    bound.insert(op->var.get());
    IRVisitor::visit(op);
  }
  void visit(const Let* op) override {
    bound.insert(op->var.get());
    IRVisitor::visit(op);
  }
  void visit(const IfThenElse* op) override {
    if (known_.contains(op->condition)) {
      if (const Store* st = op->then_case.as<Store>()) {
        add(op->condition, st->buffer.get(), true);
        ++guarded_stores;
      }
    }
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    ++stores;
    bool reads_self = false;
    class Reads : public IRVisitor {
     public:
      explicit Reads(const BufferNode* b) : b_(b) {}
      bool hit = false;

     protected:
      void visit(const Load* l) override {
        hit = hit || l->buffer.get() == b_;
        IRVisitor::visit(l);
      }

     private:
      const BufferNode* b_;
    } reads(op->buffer.get());
    reads.visit_expr(op->value);
    reads_self = reads.hit;
    if (!reads_self) initialized.insert(op->buffer.get());
    store_ = op->buffer.get();
    IRVisitor::visit(op);
    store_ = nullptr;
  }
  void visit(const Select* op) override {
    if (store_ && known_.contains(op->condition)) add(op->condition, store_, false);
    IRVisitor::visit(op);
  }

 private:
  void add(const Expr& c, const BufferNode* acc, bool branch) {
    Guard g;
    g.branch = branch;
    conjuncts(c, &g.conjuncts);
    g.ranges = ranges_;
    g.accumulator = acc;
    found.push_back(std::move(g));
  }
  const PaddingGuards& known_;
  std::vector<std::pair<Var, std::pair<int64_t, int64_t>>> ranges_;
  const BufferNode* store_ = nullptr;
};

// Removes the conjuncts with the given keys from the recorded guards.
class DropConjuncts : public IRMutator {
 public:
  // The guards it rewrites stay guards: the tile cuts still find them.
  DropConjuncts(PaddingGuards& guards, const std::unordered_set<std::string>& proven)
      : guards_(guards), proven_(proven) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    if (!guards_.contains(op->condition)) return IRMutator::visit(op, s);
    const Expr c = keep(op->condition);
    Stmt then_case = mutate(op->then_case);
    return c.defined() ? IfThenElse::make(c, then_case) : then_case;
  }
  Expr visit(const Select* op, const Expr& e) override {
    if (!guards_.contains(op->condition)) return IRMutator::visit(op, e);
    const Expr c = keep(op->condition);
    Expr t = mutate(op->true_value);
    return c.defined() ? Select::make(c, t, mutate(op->false_value)) : t;
  }

 private:
  Expr keep(const Expr& c) const {
    std::vector<Expr> all, kept;
    conjuncts(c, &all);
    for (const Expr& x : all)
      if (!proven_.count(structural_key(x))) kept.push_back(x);
    const Expr r = conjunction(kept);
    if (r.defined()) guards_.add(r);
    return r;
  }
  PaddingGuards& guards_;
  const std::unordered_set<std::string>& proven_;
};

}  // namespace padding
}  // namespace ktune::te
