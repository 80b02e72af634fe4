// Implements the node constructors of te/ir.h.
#include "te/ir.h"

#include <cmath>
#include <limits>

#include "support/error.h"
#include "te/bfloat16.h"

namespace ktune::te {

namespace {
[[noreturn]] void internal(const std::string& what) {
  throw Error(ErrorKind::kInternal, "te IR: " + what);
}

int64_t wrap_to(int64_t v, DataType t) {
  if (t.is_float() || t.bits >= 64) return v;
  if (t.bits == 1) return v != 0;
  uint64_t mask = (uint64_t{1} << t.bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if (t.is_int() && (u >> (t.bits - 1)) != 0) return static_cast<int64_t>(u | ~mask);
  return static_cast<int64_t>(u);
}
}  // namespace

std::string DataType::str() const {
  std::string s;
  if (is_bool()) {
    s = "bool";
  } else if (is_bfloat16()) {
    s = "bfloat16";
  } else {
    s = code == kInt ? "int" : code == kUInt ? "uint" : "float";
    s += std::to_string(bits);
  }
  if (lanes > 1) s += "x" + std::to_string(lanes);
  return s;
}

Expr::Expr(int v) : Expr(IntImm::make(v)) {}
Expr::Expr(int64_t v) : Expr(IntImm::make(v)) {}
Expr::Expr(float v) : Expr(FloatImm::make(v, Float(32))) {}
Expr::Expr(double v) : Expr(FloatImm::make(v, Float(64))) {}

Expr IntImm::make(int64_t v, DataType t) {
  if (t.is_float() || t.is_vector()) internal("IntImm of type " + t.str());
  return Expr(std::make_shared<IntImm>(t, wrap_to(v, t)));
}

Expr FloatImm::make(double v, DataType t) {
  if (!t.is_float() || t.is_vector()) internal("FloatImm of type " + t.str());
  if (t.bits == 32) v = static_cast<float>(v);
  if (t.is_bfloat16()) v = round_to_bfloat16(static_cast<float>(v));
  return Expr(std::make_shared<FloatImm>(t, v));
}

Var::Var(std::string name, DataType t) : Expr(std::make_shared<VarNode>(t, std::move(name))) {}

Var Var::from_expr(const Expr& e) {
  if (!e.as<VarNode>()) internal("not a Var");
  Var v;
  static_cast<Expr&>(v) = e;
  return v;
}

Buffer Buffer::make(std::string name, DataType dtype) {
  Buffer b;
  b.node_ = std::make_shared<BufferNode>(BufferNode{std::move(name), dtype.element_of()});
  return b;
}

template <NodeKind K>
Expr BinaryNode<K>::make(Expr a, Expr b) {
  if (!a.defined() || !b.defined()) internal("undefined operand");
  if (a.dtype() != b.dtype())
    internal("operand types differ: " + a.dtype().str() + " vs " + b.dtype().str());
  DataType t = a.dtype();
  if constexpr (K == NodeKind::kEQ || K == NodeKind::kNE || K == NodeKind::kLT ||
                K == NodeKind::kLE || K == NodeKind::kGT || K == NodeKind::kGE) {
    t = Bool(t.lanes);
  }
  return Expr(std::make_shared<BinaryNode<K>>(t, std::move(a), std::move(b)));
}

template struct BinaryNode<NodeKind::kAdd>;
template struct BinaryNode<NodeKind::kSub>;
template struct BinaryNode<NodeKind::kMul>;
template struct BinaryNode<NodeKind::kDiv>;
template struct BinaryNode<NodeKind::kMod>;
template struct BinaryNode<NodeKind::kMin>;
template struct BinaryNode<NodeKind::kMax>;
template struct BinaryNode<NodeKind::kEQ>;
template struct BinaryNode<NodeKind::kNE>;
template struct BinaryNode<NodeKind::kLT>;
template struct BinaryNode<NodeKind::kLE>;
template struct BinaryNode<NodeKind::kGT>;
template struct BinaryNode<NodeKind::kGE>;
template struct BinaryNode<NodeKind::kAnd>;
template struct BinaryNode<NodeKind::kOr>;

Expr Not::make(Expr a) {
  DataType t = a.dtype();
  return Expr(std::make_shared<Not>(t, std::move(a)));
}

Expr Select::make(Expr c, Expr t, Expr f) {
  if (t.dtype() != f.dtype())
    internal("select operand types differ: " + t.dtype().str() + " vs " + f.dtype().str());
  if (!c.dtype().is_bool()) internal("select condition is not bool");
  DataType ty = t.dtype();
  return Expr(std::make_shared<Select>(ty, std::move(c), std::move(t), std::move(f)));
}

Expr Cast::make(DataType t, Expr value) {
  if (value.dtype() == t) return value;
  return Expr(std::make_shared<Cast>(t, std::move(value)));
}

const char* call_op_name(CallOp op) {
  switch (op) {
    case CallOp::kExp:
      return "exp";
    case CallOp::kLog:
      return "log";
    case CallOp::kSqrt:
      return "sqrt";
    case CallOp::kTanh:
      return "tanh";
    case CallOp::kAbs:
      return "abs";
    case CallOp::kPow:
      return "pow";
    case CallOp::kFloor:
      return "floor";
    case CallOp::kCeil:
      return "ceil";
    case CallOp::kRoundEven:
      return "round_even";
    case CallOp::kSigmoid:
      return "sigmoid";
    case CallOp::kDotU8S8:
      return "dot_u8s8";
    case CallOp::kDotS8S8:
      return "dot_s8s8";
    case CallOp::kDotBF16:
      return "dot_bf16";
  }
  return "?";
}

Expr Call::make(CallOp op, std::vector<Expr> args) {
  const bool byte_dot = op == CallOp::kDotU8S8 || op == CallOp::kDotS8S8;
  const bool dot = byte_dot || op == CallOp::kDotBF16;
  size_t want = op == CallOp::kPow ? 2 : dot ? 3 : 1;
  if (args.size() != want) internal(std::string("wrong arity for ") + call_op_name(op));
  if (op == CallOp::kPow && args[0].dtype() != args[1].dtype())
    internal("pow operand types differ");
  if (byte_dot) {
    const int n = args[0].dtype().lanes;
    const int k = args[1].dtype().lanes / n;
    const bool s8 = op == CallOp::kDotS8S8;
    const auto a_type = [&](int lanes) { return s8 ? Int(8, lanes) : UInt(8, lanes); };
    const bool broadcast = args[1].dtype() == a_type(4) && args[2].dtype() == Int(8, 4 * n);
    const bool rows =
        k >= 1 && k <= 4 && args[1].dtype() == a_type(k * n) && args[2].dtype() == Int(8, k * n);
    if (args[0].dtype() != Int(32, n) || !(broadcast || rows))
      internal(std::string(call_op_name(op)) + " takes int32 x n and " + (s8 ? "int8" : "uint8") +
               " x 4, int8 x 4n or " + (s8 ? "int8" : "uint8") + ", int8 x kn (k <= 4)");
  }
  if (op == CallOp::kDotBF16) {
    const int n = args[0].dtype().lanes;
    if (args[0].dtype() != Float(32, n) || args[1].dtype() != BFloat16(2) ||
        args[2].dtype() != BFloat16(2 * n))
      internal("dot_bf16 takes float32 x n, bfloat16 x 2 and bfloat16 x 2n");
  }
  DataType t = args[0].dtype();
  return Expr(std::make_shared<Call>(t, op, std::move(args)));
}

Expr Ramp::make(Expr base, Expr stride, int lanes) {
  if (base.dtype().is_vector() || stride.dtype() != base.dtype()) internal("bad ramp operands");
  DataType t = base.dtype().with_lanes(lanes);
  return Expr(std::make_shared<Ramp>(t, std::move(base), std::move(stride), lanes));
}

Expr Broadcast::make(Expr value, int lanes) {
  if (value.dtype().is_vector()) internal("broadcast of a vector");
  DataType t = value.dtype().with_lanes(lanes);
  return Expr(std::make_shared<Broadcast>(t, std::move(value), lanes));
}

Expr Let::make(Var var, Expr value, Expr body) {
  DataType t = body.dtype();
  return Expr(std::make_shared<Let>(t, std::move(var), std::move(value), std::move(body)));
}

Expr Load::make(Buffer buffer, Expr index) {
  if (!index.dtype().is_int()) internal("load index is not an integer");
  DataType t = buffer.dtype().with_lanes(index.dtype().lanes);
  return Expr(std::make_shared<Load>(t, std::move(buffer), std::move(index)));
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

Expr reduce_identity(ReduceOp op, DataType t) {
  if (op == ReduceOp::kSum) return make_zero(t);
  bool lowest = op == ReduceOp::kMax;
  if (t.is_float()) {
    double inf = std::numeric_limits<double>::infinity();
    return make_const(t, lowest ? -inf : inf);
  }
  int64_t lo, hi;
  if (t.is_uint()) {
    lo = 0;
    hi = t.bits >= 64 ? std::numeric_limits<int64_t>::max()
                      : static_cast<int64_t>((uint64_t{1} << t.bits) - 1);
  } else {
    lo = t.bits >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (t.bits - 1));
    hi = t.bits >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (t.bits - 1)) - 1;
  }
  Expr c = IntImm::make(lowest ? lo : hi, t.element_of());
  return t.is_vector() ? Broadcast::make(c, t.lanes) : c;
}

Expr reduce_combine(ReduceOp op, Expr acc, Expr x) {
  switch (op) {
    case ReduceOp::kSum:
      return Add::make(std::move(acc), std::move(x));
    case ReduceOp::kMax:
      return Max::make(std::move(acc), std::move(x));
    case ReduceOp::kMin:
      return Min::make(std::move(acc), std::move(x));
  }
  internal("bad reduce op");
}

Expr Reduce::make(ReduceOp op, Expr source, std::vector<ReduceAxis> axes) {
  DataType t = source.dtype();
  return Expr(std::make_shared<Reduce>(t, op, std::move(source), std::move(axes)));
}

Expr BufferLoad::make(Buffer buffer, std::vector<Expr> indices) {
  DataType t = buffer.dtype();
  return Expr(std::make_shared<BufferLoad>(t, std::move(buffer), std::move(indices)));
}

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
  }
  return "?";
}

Stmt For::make(Var var, Expr min, Expr extent, ForKind kind, Stmt body) {
  return Stmt(std::make_shared<For>(std::move(var), std::move(min), std::move(extent), kind,
                                    std::move(body)));
}

Stmt Store::make(Buffer buffer, Expr value, Expr index) {
  if (value.dtype().lanes != index.dtype().lanes)
    internal("store value/index lanes differ in " + buffer.name());
  if (value.dtype().element_of() != buffer.dtype())
    internal("store of " + value.dtype().str() + " into " + buffer.name());
  return Stmt(std::make_shared<Store>(std::move(buffer), std::move(value), std::move(index)));
}

Stmt Allocate::make(Buffer buffer, Expr extent, Stmt body) {
  return Stmt(std::make_shared<Allocate>(std::move(buffer), std::move(extent), std::move(body)));
}

Stmt IfThenElse::make(Expr condition, Stmt then_case, Stmt else_case) {
  return Stmt(std::make_shared<IfThenElse>(std::move(condition), std::move(then_case),
                                           std::move(else_case)));
}

Stmt LetStmt::make(Var var, Expr value, Stmt body) {
  return Stmt(std::make_shared<LetStmt>(std::move(var), std::move(value), std::move(body)));
}

Stmt Block::make(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    if (!s.defined()) continue;
    if (const Block* b = s.as<Block>()) {
      flat.insert(flat.end(), b->stmts.begin(), b->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<Block>(std::move(flat)));
}

Stmt Evaluate::make(Expr value) { return Stmt(std::make_shared<Evaluate>(std::move(value))); }

Stmt BufferStore::make(Buffer buffer, Expr value, std::vector<Expr> indices) {
  return Stmt(
      std::make_shared<BufferStore>(std::move(buffer), std::move(value), std::move(indices)));
}

Stmt Realize::make(Buffer buffer, std::vector<Expr> mins, std::vector<int64_t> extents, Stmt body) {
  return Stmt(std::make_shared<Realize>(std::move(buffer), std::move(mins), std::move(extents),
                                        std::move(body)));
}

int64_t BufferArg::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Expr make_const(DataType t, double v) {
  Expr s = t.is_float() ? FloatImm::make(v, t.element_of())
                        : IntImm::make(static_cast<int64_t>(v), t.element_of());
  return t.is_vector() ? Broadcast::make(s, t.lanes) : s;
}

}  // namespace ktune::te
