// Lowering pass: peels the last iteration of loops whose guards only fail there (split tails), so
// the main loop runs guard-free and stays vectorizable.
#include <unordered_set>

#include "te/ir_visitor.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

// Beyond this many peeled loops around one statement, code size wins over guard removal.
constexpr int kMaxNestedPartitions = 3;

// The conditions of the guards in a statement, with the ranges of the loops around each.
class GuardCollector : public IRVisitor {
 public:
  explicit GuardCollector(const VarRanges& outer) : ranges_(outer) {}
  std::vector<std::pair<Expr, VarRanges>> guards;

 protected:
  void visit(const For* op) override {
    const int64_t* m = as_const_int(op->min);
    const int64_t* x = as_const_int(op->extent);
    if (m && x) ranges_[op->var.get()] = {*m, *m + *x - 1};
    IRVisitor::visit(op);
    ranges_.erase(op->var.get());
  }
  void visit(const IfThenElse* op) override {
    guards.emplace_back(op->condition, ranges_);
    IRVisitor::visit(op);
  }

 private:
  VarRanges ranges_;
};

class Partitioner : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    const int64_t* m = as_const_int(op->min);
    const int64_t* x = as_const_int(op->extent);
    if (!m || !x) return IRMutator::visit(op, s);
    int64_t mn = *m, n = *x;
    ranges_[op->var.get()] = {mn, mn + n - 1};
    bool peel = false;
    if (n >= 2 && depth_ < kMaxNestedPartitions) {
      GuardCollector g(ranges_);
      g.visit_stmt(op->body);
      for (auto& [cond, r] : g.guards) {
        if (!uses_var(cond, op->var) || can_prove(cond, r)) continue;
        r[op->var.get()] = {mn, mn + n - 2};
        if (can_prove(cond, r)) {
          peel = true;
          break;
        }
      }
    }
    Stmt out;
    if (peel) {
      ++depth_;
      ranges_[op->var.get()] = {mn, mn + n - 2};
      Stmt main =
          For::make(op->var, op->min, IntImm::make(n - 1), op->for_kind, simplify_under(op->body));
      ranges_[op->var.get()] = {mn + n - 1, mn + n - 1};
      Stmt tail = mutate(substitute(op->body, {{op->var, IntImm::make(mn + n - 1)}}));
      --depth_;
      out = Block::make({main, tail});
    } else {
      Stmt body = mutate(op->body);
      out =
          body.same_as(op->body) ? s : For::make(op->var, op->min, op->extent, op->for_kind, body);
    }
    ranges_.erase(op->var.get());
    return out;
  }

 private:
  // The body with guards that the current ranges prove removed, then partitioned further.
  Stmt simplify_under(const Stmt& body) {
    class Prover : public IRMutator {
     public:
      explicit Prover(VarRanges r) : r_(std::move(r)) {}
      using IRMutator::mutate;

     protected:
      Stmt visit(const For* op, const Stmt& s) override {
        const int64_t* m = as_const_int(op->min);
        const int64_t* x = as_const_int(op->extent);
        if (m && x) r_[op->var.get()] = {*m, *m + *x - 1};
        Stmt out = IRMutator::visit(op, s);
        r_.erase(op->var.get());
        return out;
      }
      Stmt visit(const IfThenElse* op, const Stmt& s) override {
        if (!op->else_case.defined() && can_prove(op->condition, r_)) return mutate(op->then_case);
        return IRMutator::visit(op, s);
      }

     private:
      VarRanges r_;
    };
    Prover p(ranges_);
    return mutate(p.mutate(body));
  }

  VarRanges ranges_;
  int depth_ = 0;
};

}  // namespace

Stmt partition_loops(const Stmt& s) {
  Partitioner p;
  return p.mutate(s);
}

}  // namespace ktune::te
