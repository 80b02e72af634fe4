// Lowering pass: tensorize — each loop nest a schedule tensorized becomes its intrinsic's
// statement.
#include <unordered_map>

#include "support/error.h"
#include "te/ir_printer.h"
#include "te/ir_visitor.h"
#include "te/lower_padding_guards.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

struct Request {
  std::string stage;
  std::shared_ptr<const TensorIntrin> intrin;
  bool done = false;
};

// The row-major flat index of a read of t at `indices`.
Expr flat_index(const TensorNode& t, const std::vector<Expr>& indices) {
  Expr flat = IntImm::make(0);
  int64_t stride = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    flat = Add::make(flat, Mul::make(indices[d], IntImm::make(stride)));
    stride *= t.shape[d];
  }
  return simplify(flat);
}

// value with vars[d] = (d == which ? 1 : 0) for every d (which = -1: all zero), simplified.
Expr at_unit(const Expr& e, const std::vector<Var>& vars, int which) {
  std::vector<std::pair<Var, Expr>> sub;
  for (size_t d = 0; d < vars.size(); ++d)
    sub.emplace_back(vars[d], IntImm::make(static_cast<int>(d) == which ? 1 : 0));
  return simplify(substitute(e, sub));
}

// Matches one loop nest against an intrinsic: the intrinsic's axes (spatial, then reduction)
// pair with the nest's loops from the outside in, its input reads with the nest's loads.
class Matcher {
 public:
  Matcher(const Stmt& loop, const std::string& stage, const TensorIntrin& intrin,
          PaddingGuards& guards)
      : loop_(loop), stage_(stage), in_(intrin), guards_(guards) {
    const TensorNode& out = *in_.output.get();
    red_ = out.body.as<Reduce>();
    if (!red_ || red_->op != ReduceOp::kSum)
      throw Error(ErrorKind::kInternal, "tensor intrinsic " + in_.name + " is not a sum");
    for (size_t d = 0; d < out.axes.size(); ++d) {
      axes_.push_back(out.axes[d]);
      extents_.push_back(out.shape[d]);
    }
    for (const ReduceAxis& r : red_->axes) {
      axes_.push_back(r.var);
      extents_.push_back(r.extent);
    }
    buffers_.resize(in_.inputs.size() + 1);
    offsets_.resize(in_.inputs.size() + 1);
  }

  // The intrinsic's statement, or the nest unchanged when it is the reduction's init (it stores
  // a constant; the intrinsic accumulates).
  Stmt run() {
    Stmt cur = loop_;
    for (size_t d = 0; d < axes_.size(); ++d) {
      const For* f = cur.as<For>();
      if (!f) {
        if (is_init(cur)) return loop_;
        fail("the intrinsic has " + std::to_string(axes_.size()) + " loops, the nest has " +
             std::to_string(d) + " and then " + describe(cur));
      }
      const int64_t* e = as_const_int(f->extent);
      if (!e || *e != extents_[d] || !is_const_int(f->min, 0))
        fail("loop " + f->var.name() + " has extent " + to_string(f->extent) +
             ", the intrinsic's axis " + axes_[d].name() + " has " + std::to_string(extents_[d]));
      vars_.push_back(f->var);
      cur = f->body;
    }
    const Store* st = cur.as<Store>();
    if (!st)
      fail("inside the intrinsic's " + std::to_string(axes_.size()) + " loops: " + describe(cur));
    return match_update(st);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::kInvalidSchedule, "schedule: stage " + stage_ + ": tensorize " +
                                                 in_.name + " at loop " +
                                                 loop_.as<For>()->var.name() + ": " + what);
  }

  static bool is_init(const Stmt& s) {
    const Store* st = s.as<Store>();
    return st && (st->value.as<IntImm>() || st->value.as<FloatImm>());
  }

  static std::string describe(const Stmt& s) {
    if (const IfThenElse* g = s.as<IfThenElse>())
      return "a guard if (" + to_string(g->condition) + ") (a split that does not divide)";
    if (s.as<For>()) return "more loops (loop " + s.as<For>()->var.name() + ")";
    if (s.as<Block>()) return "several statements";
    return "a statement that is not the update: " + to_string(s);
  }

  Stmt match_update(const Store* st) {
    const TensorNode& out = *in_.output.get();
    if (st->buffer.dtype() != out.dtype)
      fail("the nest stores " + st->buffer->dtype.str() + " into " + st->buffer.name() +
           ", the intrinsic's " + out.name + " is " + out.dtype.str());
    const Add* add = st->value.as<Add>();
    Expr rest;
    if (add) {
      if (is_acc(add->a, st))
        rest = add->b;
      else if (is_acc(add->b, st))
        rest = add->a;
    }
    if (!rest.defined())
      fail("the nest does not accumulate into " + st->buffer.name() + ": " + to_string(st->value));
    std::vector<Expr> out_index;
    for (const Var& v : out.axes) out_index.push_back(v);
    if (!bind(in_.inputs.size(), st->buffer, out.name, flat_index(out, out_index), st->index))
      fail(why_);
    if (!match(red_->source, rest))
      fail(why_ + " (the nest adds " + to_string(rest) + ", the intrinsic " +
           to_string(red_->source) + ")");
    std::vector<Expr> offsets;
    for (size_t i = 0; i < offsets_.size(); ++i) offsets.push_back(offsets_[i]);
    const Stmt update = in_.emit(buffers_, offsets);
    if (!guard_.defined()) return update;
    guards_.add(guard_);
    return IfThenElse::make(guard_, update);
  }

  static bool is_zero(const Expr& e) {
    if (const FloatImm* f = e.as<FloatImm>()) return f->value == 0;
    return is_const_int(e, 0);
  }

  // A factor read select(c, x, 0) whose condition no loop of the nest changes (an inlined
  // padding: c says the tap is inside the input) makes the whole update a no-op where c fails:
  // the nest reads x, and the intrinsic runs under if (c).
  Expr skip_zero_select(const Expr& e) {
    const Select* sel = e.as<Select>();
    if (!sel || !is_zero(simplify(sel->false_value))) return e;
    for (const Var& v : vars_)
      if (uses_var(sel->condition, v)) return e;
    guard_ = guard_.defined() ? And::make(guard_, sel->condition) : sel->condition;
    return sel->true_value;
  }

  static bool is_acc(const Expr& e, const Store* st) {
    const Load* l = e.as<Load>();
    return l && l->buffer.same_as(st->buffer) &&
           is_const_int(simplify(Sub::make(l->index, st->index)), 0);
  }

  // Binds slot i (an input, or the output at inputs.size()) to buffer b read at `index`, which
  // must step over the nest's loops as `pattern` steps over the intrinsic's axes. Returns false
  // with why_ set when it does not, or when slot i is bound to another buffer.
  bool bind(size_t i, const Buffer& b, const std::string& name, const Expr& pattern,
            const Expr& index) {
    if (buffers_[i].defined() && !buffers_[i].same_as(b)) {
      why_ = name + " would be both " + buffers_[i].name() + " and " + b.name();
      return false;
    }
    const Expr base = at_unit(index, vars_, -1), pbase = at_unit(pattern, axes_, -1);
    Expr linear = base;
    for (size_t d = 0; d < vars_.size(); ++d) {
      const Expr step = simplify(Sub::make(at_unit(index, vars_, static_cast<int>(d)), base));
      const Expr want = simplify(Sub::make(at_unit(pattern, axes_, static_cast<int>(d)), pbase));
      if (!is_const_int(simplify(Sub::make(step, want)), 0))
        return why(b.name() + "'s index steps by " + to_string(step) + " over loop " +
                   vars_[d].name() + ", the intrinsic's " + name + " by " + to_string(want) +
                   " over its axis " + axes_[d].name());
      linear = Add::make(linear, Mul::make(step, vars_[d]));
    }
    if (!is_const_int(simplify(Sub::make(index, linear)), 0))
      return why(b.name() + "'s index " + to_string(index) + " is not linear in the nest's loops");
    buffers_[i] = b;
    offsets_[i] = base;
    return true;
  }

  // Structural match of the intrinsic's source `p` with the nest's `e` (Add and Mul in either
  // operand order). Bindings made by a failed try are undone.
  // `factor`: p is a factor of a product (through casts), where a zero read zeroes the update.
  bool match(const Expr& p, const Expr& e, bool factor = false) {
    if (const TensorRead* r = p.as<TensorRead>()) {
      const Load* l = (factor ? skip_zero_select(e) : e).as<Load>();
      if (!l) return why(to_string(e) + " is not a load");
      size_t i = 0;
      while (i < in_.inputs.size() && in_.inputs[i].get() != r->tensor.get()) ++i;
      if (i == in_.inputs.size())
        throw Error(ErrorKind::kInternal, "tensor intrinsic " + in_.name + " reads a non-input");
      if (l->dtype != r->dtype)
        return why("the nest reads " + l->buffer.name() + " as " + l->dtype.str() +
                   ", the intrinsic's " + r->tensor->name + " is " + r->dtype.str());
      return bind(i, l->buffer, r->tensor->name, flat_index(*r->tensor, r->indices), l->index);
    }
    if (p.kind() != e.kind() || p.dtype() != e.dtype())
      return why(to_string(e) + " is not like " + to_string(p));
    switch (p.kind()) {
      case NodeKind::kCast:
        return match(p.as<Cast>()->value, e.as<Cast>()->value, factor);
      case NodeKind::kIntImm:
        return p.as<IntImm>()->value == e.as<IntImm>()->value || why("a different constant");
      case NodeKind::kAdd:
        return match_pair<Add>(p, e, true);
      case NodeKind::kMul:
        return match_pair<Mul>(p, e, true, true);
      case NodeKind::kSub:
        return match_pair<Sub>(p, e, false);
      default:
        return why("the intrinsic's " + to_string(p) + " is not matched");
    }
  }

  template <typename T>
  bool match_pair(const Expr& p, const Expr& e, bool commutes, bool factors = false) {
    const T* x = p.as<T>();
    const T* y = e.as<T>();
    const auto saved_b = buffers_;
    const auto saved_o = offsets_;
    const Expr saved_g = guard_;
    if (match(x->a, y->a, factors) && match(x->b, y->b, factors)) return true;
    const std::string first = why_;
    buffers_ = saved_b;
    offsets_ = saved_o;
    guard_ = saved_g;
    if (commutes && match(x->a, y->b, factors) && match(x->b, y->a, factors)) return true;
    buffers_ = saved_b;
    offsets_ = saved_o;
    guard_ = saved_g;
    return why(first);  // the operands in their written order explain best what differs
  }

  bool why(const std::string& w) {
    why_ = w;
    return false;
  }

  const Stmt loop_;
  const std::string stage_;
  const TensorIntrin& in_;
  PaddingGuards& guards_;
  const Reduce* red_ = nullptr;
  std::vector<Var> axes_;  // the intrinsic's, spatial then reduction
  std::vector<int64_t> extents_;
  std::vector<Var> vars_;  // the nest's loops, outermost first
  std::vector<Buffer> buffers_;
  std::vector<Expr> offsets_;
  Expr guard_;  // the conditions of the zero selects read through, or undefined
  std::string why_;
};

class Tensorizer : public IRMutator {
 public:
  Tensorizer(std::unordered_map<const VarNode*, Request>& requests, PaddingGuards& guards)
      : requests_(requests), guards_(guards) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    auto it = requests_.find(op->var.get());
    if (it == requests_.end()) return IRMutator::visit(op, s);
    Stmt out = Matcher(s, it->second.stage, *it->second.intrin, guards_).run();
    if (!out.same_as(s)) it->second.done = true;
    return out;
  }

 private:
  std::unordered_map<const VarNode*, Request>& requests_;
  PaddingGuards& guards_;
};

}  // namespace

Stmt tensorize(const Stmt& s, const Schedule& sched, PaddingGuards& guards) {
  std::unordered_map<const VarNode*, Request> requests;
  std::unordered_map<const VarNode*, std::string> names;
  for (const StageNode& st : sched.node().stages) {
    for (const auto& [var, intrin] : st.tensorized) requests[var] = {st.name, intrin};
    for (const IterVar& l : st.leaves) names[l.var.get()] = l.name();
  }
  if (requests.empty()) return s;
  Tensorizer t(requests, guards);
  Stmt out = t.mutate(s);
  for (const auto& [var, r] : requests) {
    if (r.done) continue;
    auto n = names.find(var);
    throw Error(
        ErrorKind::kInvalidSchedule,
        "schedule: stage " + r.stage + ": tensorize " + r.intrin->name + ": " +
            (n == names.end() ? std::string("the loop") : "loop " + n->second) +
            (n == names.end() ? " was split or fused since" : " holds no update to replace"));
  }
  return out;
}

}  // namespace ktune::te
