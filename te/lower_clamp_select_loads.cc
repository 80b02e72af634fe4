// Lowering pass: makes every Load under a Select operand in bounds (Select evaluates both sides).
#include <unordered_map>

#include "te/ir_visitor.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

class Clamper : public IRMutator {
 public:
  explicit Clamper(const std::vector<BufferArg>& args) {
    for (const BufferArg& a : args) sizes_[a.buffer.get()] = a.num_elements();
  }
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    const int64_t* m = as_const_int(op->min);
    const int64_t* x = as_const_int(op->extent);
    if (m && x) ranges_[op->var.get()] = {*m, *m + *x - 1};
    Stmt r = IRMutator::visit(op, s);
    ranges_.erase(op->var.get());
    return r;
  }
  Stmt visit(const Allocate* op, const Stmt& s) override {
    if (const int64_t* n = as_const_int(op->extent)) sizes_[op->buffer.get()] = *n;
    return IRMutator::visit(op, s);
  }
  Expr visit(const Select* op, const Expr& e) override {
    Expr c = mutate(op->condition);
    ++depth_;
    Expr t = mutate(op->true_value), f = mutate(op->false_value);
    --depth_;
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) return e;
    return Select::make(c, t, f);
  }
  Expr visit(const Load* op, const Expr& e) override {
    Expr base = IRMutator::visit(op, e);
    if (depth_ == 0) return base;
    const Load* l = base.as<Load>();
    auto it = sizes_.find(l->buffer.get());
    if (it == sizes_.end()) return base;
    auto b = const_bound(l->index, ranges_);
    if (b && b->first >= 0 && b->second < it->second) return base;
    DataType t = l->index.dtype();
    Expr hi = make_const(t, static_cast<double>(it->second - 1));
    Expr lo = make_const(t, 0);
    return Load::make(l->buffer, Max::make(Min::make(l->index, hi), lo));
  }

 private:
  std::unordered_map<const BufferNode*, int64_t> sizes_;
  VarRanges ranges_;
  int depth_ = 0;
};

}  // namespace

Stmt clamp_select_loads(const Stmt& s, const std::vector<BufferArg>& args) {
  Clamper c(args);
  return c.mutate(s);
}

}  // namespace ktune::te
