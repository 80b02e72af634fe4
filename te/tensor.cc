// Implements te's tensor language.
#include "te/tensor.h"

#include <unordered_set>

#include "support/error.h"
#include "te/ir_visitor.h"

namespace ktune::te {

namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorKind::kInvalidArgument, what); }

bool is_imm(const Expr& e) { return e.as<IntImm>() || e.as<FloatImm>(); }

Expr convert_imm(const Expr& e, DataType t) {
  if (const IntImm* i = e.as<IntImm>()) return make_const(t, static_cast<double>(i->value));
  if (const FloatImm* f = e.as<FloatImm>()) return make_const(t, f->value);
  return Cast::make(t, e);
}

// Brings a and b to one type (see operator+ in tensor.h).
void promote(Expr& a, Expr& b) {
  if (!a.defined() || !b.defined()) bad("te: undefined operand");
  DataType ta = a.dtype(), tb = b.dtype();
  if (ta == tb) return;
  if (is_imm(b) && !is_imm(a)) {
    b = convert_imm(b, ta);
    return;
  }
  if (is_imm(a) && !is_imm(b)) {
    a = convert_imm(a, tb);
    return;
  }
  if (ta.lanes != tb.lanes) bad("te: operands of different lanes " + ta.str() + ", " + tb.str());
  DataType t;
  if (ta.is_float() != tb.is_float()) {
    t = ta.is_float() ? ta : tb;
  } else {
    t = ta.bits >= tb.bits ? ta : tb;
    if (ta.bits == tb.bits) t = ta.is_int() ? ta : tb;
  }
  a = convert_imm(a, t);
  b = convert_imm(b, t);
}

void no_bool(const Expr& a, const char* op) {
  if (a.dtype().is_bool()) bad(std::string("te: arithmetic '") + op + "' on bool");
}

// bfloat16 is for storage: kernels compute in float32, as the hardware's bf16 instructions do,
// and codegen converts only to and from float32.
void no_bfloat16(const Expr& a, const char* op) {
  if (a.dtype().is_bfloat16())
    bad(std::string("te: '") + op + "' on bfloat16: cast the operands to float32 first");
}

class ReduceChecker : public IRVisitor {
 public:
  int count = 0;
  std::vector<std::shared_ptr<const TensorNode>> inputs;
  std::unordered_set<const TensorNode*> seen;

 protected:
  void visit(const Reduce* op) override {
    ++count;
    IRVisitor::visit(op);
  }
  void visit(const TensorRead* op) override {
    if (seen.insert(op->tensor.get()).second) inputs.push_back(op->tensor);
    IRVisitor::visit(op);
  }
};

Expr make_reduce(ReduceOp op, Expr source, const std::vector<IterVar>& axes) {
  if (axes.empty()) bad("te: reduction over no axis");
  no_bfloat16(source, reduce_op_name(op));
  std::vector<ReduceAxis> ra;
  for (const IterVar& iv : axes) {
    if (!iv.is_reduce()) bad("te: " + iv.name() + " is not a reduce_axis");
    ra.push_back({iv.var, iv.min, iv.extent});
  }
  return Reduce::make(op, std::move(source), std::move(ra));
}

}  // namespace

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape()) n *= d;
  return n;
}

Expr Tensor::read(std::vector<Expr> indices) const {
  if (static_cast<int>(indices.size()) != ndim()) {
    bad("te: " + name() + " has " + std::to_string(ndim()) + " dimensions, read with " +
        std::to_string(indices.size()) + " indices");
  }
  for (Expr& i : indices) {
    if (!i.dtype().is_int() && !i.dtype().is_uint()) bad("te: non-integer index into " + name());
    i = convert_imm(i, kIndexType);
  }
  return Expr(std::make_shared<TensorRead>(dtype(), node_, std::move(indices)));
}

Tensor placeholder(std::vector<int64_t> shape, DataType dtype, std::string name) {
  for (int64_t d : shape) {
    if (d <= 0) bad("te: placeholder " + name + " has a non-positive extent");
  }
  auto n = std::make_shared<TensorNode>();
  n->name = std::move(name);
  n->shape = std::move(shape);
  n->dtype = dtype.element_of();
  n->is_placeholder = true;
  return Tensor(std::move(n));
}

Tensor compute(std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var>&)>& fn,
               std::string name) {
  if (shape.empty()) bad("te: compute " + name + " has no dimension");
  for (int64_t d : shape) {
    if (d <= 0) bad("te: compute " + name + " has a non-positive extent");
  }
  static const char* kAxisNames[] = {"i", "j", "k", "l", "m", "n"};
  std::vector<Var> axes;
  for (size_t d = 0; d < shape.size(); ++d) {
    axes.emplace_back(name + "." + (d < 6 ? kAxisNames[d] : "x" + std::to_string(d)));
  }
  Expr body = fn(axes);
  if (!body.defined()) bad("te: compute " + name + " returned an undefined expression");
  ReduceChecker rc;
  rc.visit_expr(body);
  const Reduce* top = body.as<Reduce>();
  if (rc.count > 1 || (rc.count == 1 && !top)) {
    bad("te: compute " + name + ": a reduction must be the whole body (split it into stages)");
  }
  auto n = std::make_shared<TensorNode>();
  n->name = std::move(name);
  n->shape = std::move(shape);
  n->dtype = body.dtype();
  n->is_placeholder = false;
  n->axes = std::move(axes);
  n->body = std::move(body);
  n->inputs = std::move(rc.inputs);
  return Tensor(std::move(n));
}

IterVar reduce_axis(Range range, std::string name) {
  if (range.extent <= 0) bad("te: reduce_axis " + name + " has a non-positive extent");
  return IterVar{Var(std::move(name)), range.min, range.extent, IterKind::kReduce};
}

Expr sum(Expr source, const std::vector<IterVar>& axes) {
  return make_reduce(ReduceOp::kSum, std::move(source), axes);
}
Expr max(Expr source, const std::vector<IterVar>& axes) {
  return make_reduce(ReduceOp::kMax, std::move(source), axes);
}
Expr min(Expr source, const std::vector<IterVar>& axes) {
  return make_reduce(ReduceOp::kMin, std::move(source), axes);
}
Expr sum(Expr source, std::initializer_list<IterVar> axes) {
  return sum(std::move(source), std::vector<IterVar>(axes));
}
Expr max(Expr source, std::initializer_list<IterVar> axes) {
  return max(std::move(source), std::vector<IterVar>(axes));
}
Expr min(Expr source, std::initializer_list<IterVar> axes) {
  return min(std::move(source), std::vector<IterVar>(axes));
}
Expr sum(Expr source, const IterVar& axis) {
  return sum(std::move(source), std::vector<IterVar>{axis});
}
Expr max(Expr source, const IterVar& axis) {
  return max(std::move(source), std::vector<IterVar>{axis});
}
Expr min(Expr source, const IterVar& axis) {
  return min(std::move(source), std::vector<IterVar>{axis});
}

#define ARITH(OP, NODE, SYM) \
  Expr OP(Expr a, Expr b) {  \
    promote(a, b);           \
    no_bool(a, SYM);         \
    no_bfloat16(a, SYM);     \
    return NODE::make(a, b); \
  }
ARITH(operator+, Add, "+")
ARITH(operator-, Sub, "-")
ARITH(operator*, Mul, "*")
ARITH(operator/, Div, "/")
ARITH(operator%, Mod, "%")
ARITH(max, Max, "max")
ARITH(min, Min, "min")
#undef ARITH

#define CMP(OP, NODE, SYM)   \
  Expr OP(Expr a, Expr b) {  \
    promote(a, b);           \
    no_bfloat16(a, SYM);     \
    return NODE::make(a, b); \
  }
CMP(operator<, LT, "<")
CMP(operator<=, LE, "<=")
CMP(operator>, GT, ">")
CMP(operator>=, GE, ">=")
CMP(operator==, EQ, "==")
CMP(operator!=, NE, "!=")
#undef CMP

Expr operator-(Expr a) { return make_zero(a.dtype()) - a; }

Expr operator&&(Expr a, Expr b) {
  if (!a.dtype().is_bool() || !b.dtype().is_bool()) bad("te: && on non-bool operands");
  return And::make(a, b);
}
Expr operator||(Expr a, Expr b) {
  if (!a.dtype().is_bool() || !b.dtype().is_bool()) bad("te: || on non-bool operands");
  return Or::make(a, b);
}
Expr operator!(Expr a) {
  if (!a.dtype().is_bool()) bad("te: ! on a non-bool operand");
  return Not::make(a);
}

Expr select(Expr cond, Expr t, Expr f) {
  if (!cond.dtype().is_bool()) bad("te: select condition is not bool");
  promote(t, f);
  return Select::make(cond, t, f);
}

Expr cast(DataType t, Expr value) { return Cast::make(t.with_lanes(value.dtype().lanes), value); }

namespace {
Expr float_call(CallOp op, Expr x) {
  if (!x.dtype().is_float() && op != CallOp::kAbs)
    bad(std::string("te: ") + call_op_name(op) + " of a non-float");
  no_bfloat16(x, call_op_name(op));
  return Call::make(op, {std::move(x)});
}
}  // namespace

Expr exp(Expr x) { return float_call(CallOp::kExp, std::move(x)); }
Expr log(Expr x) { return float_call(CallOp::kLog, std::move(x)); }
Expr sqrt(Expr x) { return float_call(CallOp::kSqrt, std::move(x)); }
Expr tanh(Expr x) { return float_call(CallOp::kTanh, std::move(x)); }
Expr abs(Expr x) { return float_call(CallOp::kAbs, std::move(x)); }
Expr floor(Expr x) { return float_call(CallOp::kFloor, std::move(x)); }
Expr ceil(Expr x) { return float_call(CallOp::kCeil, std::move(x)); }
Expr round_even(Expr x) { return float_call(CallOp::kRoundEven, std::move(x)); }
Expr sigmoid(Expr x) { return float_call(CallOp::kSigmoid, std::move(x)); }
Expr pow(Expr x, Expr y) {
  promote(x, y);
  if (!x.dtype().is_float()) bad("te: pow of a non-float");
  no_bfloat16(x, "pow");
  return Call::make(CallOp::kPow, {std::move(x), std::move(y)});
}

std::vector<Tensor> topo_order(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> order;
  std::unordered_set<const TensorNode*> done;
  std::function<void(const std::shared_ptr<const TensorNode>&)> go =
      [&](const std::shared_ptr<const TensorNode>& t) {
        if (done.count(t.get())) return;
        done.insert(t.get());
        for (const auto& in : t->inputs) go(in);
        order.emplace_back(t);
      };
  for (const Tensor& t : outputs) go(t.ptr());
  return order;
}

}  // namespace ktune::te
