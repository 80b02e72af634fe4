// Defines te's IR: DataType, the Expr/Stmt node structs and handles, Buffer and LoweredFunc.

// Contract for readers of the LOWERED IR (codegen, cost_model), i.e. what lower() returns:
//  * Only these nodes remain: IntImm FloatImm Var Add Sub Mul Div Mod Min Max EQ NE LT LE GT GE
//    And Or Not Select Cast Call Ramp Broadcast Let Load, and For Store Allocate IfThenElse
//    LetStmt Block Evaluate. TensorRead, Reduce, BufferLoad, BufferStore and Realize never do.
//  * All index arithmetic (loop variables, loop bounds, Load/Store indices, Ramp bases and
//    strides) is Int(64). Buffers are flat; an index counts ELEMENTS of the buffer's dtype.
//  * Every For has an IntImm min (0 after lowering) and an IntImm extent (static shapes).
//  * No For of kind kVectorized remains: vectorized loops are turned into Ramp/Broadcast vector
//    expressions (lanes = the loop extent). A loop that cannot be vectorized becomes kSerial.
//  * No For of kind kUnrolled remains either: te's unroll pass copies the body (codegen sees
//    straight-line code). kParallel loops stay; codegen outlines them. A parallel loop's body
//    may contain an Allocate: that buffer is private to each iteration.
//  * Select(c, t, f) evaluates both t and f (like a vector blend); te guarantees that every Load
//    it leaves in the IR is in bounds, even in the unselected operand.
//  * Integer Div/Mod are FLOOR division/modulo (q = floor(a/b), r = a - q*b, r has b's sign).
//    Float Div is true division; float Mod is a - b*floor(a/b).
//  * Allocate(buffer, extent, body): a local buffer of `extent` elements (constant), live in body.
//    The same Buffer may be allocated by several Allocates that do not nest (e.g. in a peeled
//    loop tail), and the same Var may be bound by several For loops that do not nest.
//  * Vector lanes are at most 64 and need not be a power of two (a peeled tail may have 8 or 5).
//  * Names of buffers and variables may contain '.' (e.g. "C.local", "C.i.o").
// Ownership: nodes are immutable and shared through std::shared_ptr<const ...>; handles are cheap
// to copy and safe to read from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ktune::te {

// A scalar or vector element type. kBFloat is bfloat16: float32's sign, exponent and top 7
// mantissa bits in 16 bits. It is a float (is_float()) for storage only: te refuses arithmetic,
// comparisons and reductions on it, so it meets codegen in loads, stores, selects, broadcasts,
// casts (from and to float32 through te/bfloat16.h's rounding) and dot_bf16.
struct DataType {
  enum Code : uint8_t { kInt, kUInt, kFloat, kBFloat };
  Code code = kInt;
  int bits = 64;
  int lanes = 1;

  constexpr DataType() = default;
  constexpr DataType(Code c, int b, int l = 1) : code(c), bits(b), lanes(l) {}
  static constexpr DataType Int(int bits, int lanes = 1) { return {kInt, bits, lanes}; }
  static constexpr DataType UInt(int bits, int lanes = 1) { return {kUInt, bits, lanes}; }
  static constexpr DataType Float(int bits, int lanes = 1) { return {kFloat, bits, lanes}; }
  static constexpr DataType Bool(int lanes = 1) { return {kUInt, 1, lanes}; }
  static constexpr DataType BFloat16(int lanes = 1) { return {kBFloat, 16, lanes}; }

  constexpr DataType with_lanes(int n) const { return {code, bits, n}; }
  constexpr DataType element_of() const { return with_lanes(1); }
  constexpr bool is_vector() const { return lanes > 1; }
  constexpr bool is_scalar() const { return lanes == 1; }
  constexpr bool is_float() const { return code == kFloat || code == kBFloat; }
  constexpr bool is_bfloat16() const { return code == kBFloat; }
  constexpr bool is_int() const { return code == kInt; }
  constexpr bool is_uint() const { return code == kUInt; }
  constexpr bool is_bool() const { return code == kUInt && bits == 1; }
  // Bytes of one element of one lane (a bool counts one byte).
  constexpr int bytes() const { return bits == 1 ? 1 : bits / 8; }
  constexpr bool operator==(const DataType&) const = default;
  // "float32", "int64x8", "bool", "bfloat16".
  std::string str() const;
};

inline constexpr DataType Float(int bits, int lanes = 1) { return DataType::Float(bits, lanes); }
inline constexpr DataType Int(int bits, int lanes = 1) { return DataType::Int(bits, lanes); }
inline constexpr DataType UInt(int bits, int lanes = 1) { return DataType::UInt(bits, lanes); }
inline constexpr DataType Bool(int lanes = 1) { return DataType::Bool(lanes); }
inline constexpr DataType BFloat16(int lanes = 1) { return DataType::BFloat16(lanes); }
// The type of every index expression (loop variables, indices, extents).
inline constexpr DataType kIndexType = DataType::Int(64);

enum class NodeKind : uint8_t {
  // Expressions.
  kIntImm,
  kFloatImm,
  kVar,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  kMin,
  kMax,
  kEQ,
  kNE,
  kLT,
  kLE,
  kGT,
  kGE,
  kAnd,
  kOr,
  kNot,
  kSelect,
  kCast,
  kCall,
  kRamp,
  kBroadcast,
  kLet,
  kLoad,
  kTensorRead,
  kReduce,
  kBufferLoad,  // before lowering only
  // Statements.
  kFor,
  kStore,
  kAllocate,
  kIfThenElse,
  kLetStmt,
  kBlock,
  kEvaluate,
  kBufferStore,
  kRealize,  // before flattening only
};

struct ExprNode {
  NodeKind kind;
  DataType dtype;
  ExprNode(NodeKind k, DataType t) : kind(k), dtype(t) {}
  virtual ~ExprNode() = default;
};

struct StmtNode {
  NodeKind kind;
  explicit StmtNode(NodeKind k) : kind(k) {}
  virtual ~StmtNode() = default;
};

// A handle to an immutable expression node (null when default-constructed).
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  // Immediates: an int becomes an Int(64) IntImm, a float a Float(32) FloatImm, a double a
  // Float(64) FloatImm. Arithmetic in tensor.h casts immediates to the other operand's type.
  Expr(int v);      // NOLINT
  Expr(int64_t v);  // NOLINT
  Expr(float v);    // NOLINT
  Expr(double v);   // NOLINT

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  NodeKind kind() const { return node_->kind; }
  DataType dtype() const { return node_->dtype; }
  bool same_as(const Expr& o) const { return node_ == o.node_; }
  // The node as T when its kind is T's, else nullptr.
  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  const std::shared_ptr<const ExprNode>& ptr() const { return node_; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

// A handle to an immutable statement node.
class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : node_(std::move(node)) {}
  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  NodeKind kind() const { return node_->kind; }
  bool same_as(const Stmt& o) const { return node_ == o.node_; }
  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

// ---------------------------------------------------------------- leaves

struct IntImm : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kIntImm;
  int64_t value;
  IntImm(DataType t, int64_t v) : ExprNode(kKind, t), value(v) {}
  // An integer immediate of type t (Int(64) unless told); the value is wrapped to t's bits.
  static Expr make(int64_t v, DataType t = kIndexType);
};

struct FloatImm : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kFloatImm;
  double value;
  FloatImm(DataType t, double v) : ExprNode(kKind, t), value(v) {}
  static Expr make(double v, DataType t = Float(32));
};

struct VarNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kVar;
  std::string name;
  VarNode(DataType t, std::string n) : ExprNode(kKind, t), name(std::move(n)) {}
};

// A variable; two Vars are the same variable iff they share the node (names may repeat).
class Var : public Expr {
 public:
  Var() = default;
  explicit Var(std::string name, DataType t = kIndexType);
  // Wraps an Expr that holds a VarNode (throws ktune::Error(kInternal) otherwise).
  static Var from_expr(const Expr& e);
  const VarNode* get() const { return static_cast<const VarNode*>(Expr::get()); }
  const VarNode* operator->() const { return get(); }
  const std::string& name() const { return get()->name; }
};

struct VarHash {
  size_t operator()(const Var& v) const { return std::hash<const void*>()(v.get()); }
};
struct VarEq {
  bool operator()(const Var& a, const Var& b) const { return a.get() == b.get(); }
};

// A flat storage buffer (an argument or a local allocation); identity is the node.
struct BufferNode {
  std::string name;
  DataType dtype;  // element type, scalar
};

class Buffer {
 public:
  Buffer() = default;
  static Buffer make(std::string name, DataType dtype);
  bool defined() const { return node_ != nullptr; }
  const BufferNode* get() const { return node_.get(); }
  const BufferNode* operator->() const { return node_.get(); }
  const std::string& name() const { return node_->name; }
  DataType dtype() const { return node_->dtype; }
  bool same_as(const Buffer& o) const { return node_ == o.node_; }
  bool operator==(const Buffer& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const BufferNode> node_;
};

struct BufferHash {
  size_t operator()(const Buffer& b) const { return std::hash<const void*>()(b.get()); }
};

// ---------------------------------------------------------------- arithmetic and logic

// Binary nodes: a and b have the same dtype; comparisons yield Bool(lanes).
template <NodeKind K>
struct BinaryNode : ExprNode {
  static constexpr NodeKind kKind = K;
  Expr a, b;
  BinaryNode(DataType t, Expr x, Expr y) : ExprNode(K, t), a(std::move(x)), b(std::move(y)) {}
  // Throws ktune::Error(kInternal) when the operand types differ.
  static Expr make(Expr a, Expr b);
};

using Add = BinaryNode<NodeKind::kAdd>;
using Sub = BinaryNode<NodeKind::kSub>;
using Mul = BinaryNode<NodeKind::kMul>;
using Div = BinaryNode<NodeKind::kDiv>;  // floor division for integers
using Mod = BinaryNode<NodeKind::kMod>;  // floor modulo for integers
using Min = BinaryNode<NodeKind::kMin>;
using Max = BinaryNode<NodeKind::kMax>;
using EQ = BinaryNode<NodeKind::kEQ>;
using NE = BinaryNode<NodeKind::kNE>;
using LT = BinaryNode<NodeKind::kLT>;
using LE = BinaryNode<NodeKind::kLE>;
using GT = BinaryNode<NodeKind::kGT>;
using GE = BinaryNode<NodeKind::kGE>;
using And = BinaryNode<NodeKind::kAnd>;  // operands are Bool
using Or = BinaryNode<NodeKind::kOr>;

struct Not : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kNot;
  Expr a;
  Not(DataType t, Expr x) : ExprNode(kKind, t), a(std::move(x)) {}
  static Expr make(Expr a);
};

// cond ? t : f, lane-wise; cond is Bool with the lanes of t (or scalar Bool).
struct Select : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kSelect;
  Expr condition, true_value, false_value;
  Select(DataType t, Expr c, Expr x, Expr y)
      : ExprNode(kKind, t),
        condition(std::move(c)),
        true_value(std::move(x)),
        false_value(std::move(y)) {}
  static Expr make(Expr c, Expr t, Expr f);
};

// Conversion with C semantics (float->int truncates toward zero, int->narrower int wraps).
struct Cast : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kCast;
  Expr value;
  Cast(DataType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  // Returns value unchanged when it already has type t.
  static Expr make(DataType t, Expr value);
};

// Math intrinsics on floats (abs also on ints). pow takes two arguments, the rest one.
// sigmoid(x) = 1 / (1 + exp(-x)). round_even(x) rounds to the nearest integer, halves to even
// (IEEE roundTiesToEven: nearbyint under the default rounding mode, ONNX's QuantizeLinear).
// dot_u8s8(acc, a, b), a tensor intrinsic's body (te/tensor_intrin.h): acc int32 x n; a uint8 x 4,
// b int8 x 4n: lane l is acc[l] + sum_q a[q] * b[4l + q]; or a uint8, b int8 x kn (k <= 4 rows of
// n): acc[l] + sum_{q<k} a[qn + l] * b[qn + l]; int32, wrapping (vpdpbusd's sums cannot saturate).
// dot_s8s8(acc, a, b): dot_u8s8 with a int8 (either form), what AArch64's sdot multiplies.
// dot_bf16(acc, a, b): acc is float32 x n, a bfloat16 x 2, b bfloat16 x 2n; lane l of the result
// is (acc[l] + a[1] * b[2l + 1]) + a[0] * b[2l] in float32, each sum rounded once (x86's
// vdpbf16ps, in its order; a product of two bfloat16 values is exact in float32). vdpbf16ps
// also flushes denormal inputs and results to zero, which this definition does not.
enum class CallOp : uint8_t {
  kExp,
  kLog,
  kSqrt,
  kTanh,
  kAbs,
  kPow,
  kFloor,
  kCeil,
  kRoundEven,
  kSigmoid,
  kDotU8S8,
  kDotS8S8,
  kDotBF16
};
const char* call_op_name(CallOp op);

struct Call : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kCall;
  CallOp op;
  std::vector<Expr> args;
  Call(DataType t, CallOp o, std::vector<Expr> a) : ExprNode(kKind, t), op(o), args(std::move(a)) {}
  // The result has the type of args[0]; throws ktune::Error(kInternal) on a wrong arity (or
  // wrong operand types of dot_u8s8, dot_s8s8 or dot_bf16).
  static Expr make(CallOp op, std::vector<Expr> args);
};

// The vector <base, base+stride, ..., base+(lanes-1)*stride>; base and stride are scalars.
struct Ramp : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kRamp;
  Expr base, stride;
  int lanes;
  Ramp(DataType t, Expr b, Expr s, int l)
      : ExprNode(kKind, t), base(std::move(b)), stride(std::move(s)), lanes(l) {}
  static Expr make(Expr base, Expr stride, int lanes);
};

// A scalar repeated in every lane.
struct Broadcast : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kBroadcast;
  Expr value;
  int lanes;
  Broadcast(DataType t, Expr v, int l) : ExprNode(kKind, t), value(std::move(v)), lanes(l) {}
  static Expr make(Expr value, int lanes);
};

// let var = value in body.
struct Let : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kLet;
  Var var;
  Expr value, body;
  Let(DataType t, Var v, Expr x, Expr b)
      : ExprNode(kKind, t), var(std::move(v)), value(std::move(x)), body(std::move(b)) {}
  static Expr make(Var var, Expr value, Expr body);
};

// buffer[index] from a flat buffer. A vector index (lanes n) loads n elements: a Ramp with
// stride 1 is a contiguous load, another Ramp a strided load, anything else a gather.
struct Load : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kLoad;
  Buffer buffer;
  Expr index;
  Load(DataType t, Buffer b, Expr i)
      : ExprNode(kKind, t), buffer(std::move(b)), index(std::move(i)) {}
  // dtype = buffer element type with the index's lanes.
  static Expr make(Buffer buffer, Expr index);
};

// ---------------------------------------------------------------- before lowering

struct TensorNode;  // tensor.h

// A read of a te Tensor at multi-dimensional indices, inside a compute body.
struct TensorRead : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kTensorRead;
  std::shared_ptr<const TensorNode> tensor;
  std::vector<Expr> indices;
  TensorRead(DataType t, std::shared_ptr<const TensorNode> tn, std::vector<Expr> i)
      : ExprNode(kKind, t), tensor(std::move(tn)), indices(std::move(i)) {}
};

enum class ReduceOp : uint8_t { kSum, kMax, kMin };
const char* reduce_op_name(ReduceOp op);
// The identity of op for type t: 0, the lowest value, the highest value (-inf/+inf for floats).
Expr reduce_identity(ReduceOp op, DataType t);
// combine(acc, x) for op.
Expr reduce_combine(ReduceOp op, Expr acc, Expr x);

// One reduction axis: var ranges over [min, min + extent).
struct ReduceAxis {
  Var var;
  int64_t min = 0;
  int64_t extent = 0;
};

// op over the axes of source; only as the whole body of a compute.
struct Reduce : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kReduce;
  ReduceOp op;
  Expr source;
  std::vector<ReduceAxis> axes;
  Reduce(DataType t, ReduceOp o, Expr s, std::vector<ReduceAxis> a)
      : ExprNode(kKind, t), op(o), source(std::move(s)), axes(std::move(a)) {}
  static Expr make(ReduceOp op, Expr source, std::vector<ReduceAxis> axes);
};

// A multi-dimensional read of a buffer (between schedule_ops and storage flattening).
struct BufferLoad : ExprNode {
  static constexpr NodeKind kKind = NodeKind::kBufferLoad;
  Buffer buffer;
  std::vector<Expr> indices;
  BufferLoad(DataType t, Buffer b, std::vector<Expr> i)
      : ExprNode(kKind, t), buffer(std::move(b)), indices(std::move(i)) {}
  static Expr make(Buffer buffer, std::vector<Expr> indices);
};

// ---------------------------------------------------------------- statements

enum class ForKind : uint8_t { kSerial, kParallel, kVectorized, kUnrolled };
const char* for_kind_name(ForKind k);

// for (var = min; var < min + extent; ++var) body
struct For : StmtNode {
  static constexpr NodeKind kKind = NodeKind::kFor;
  Var var;
  Expr min, extent;
  ForKind for_kind;
  Stmt body;
  For(Var v, Expr m, Expr e, ForKind k, Stmt b)
      : StmtNode(kKind),
        var(std::move(v)),
        min(std::move(m)),
        extent(std::move(e)),
        for_kind(k),
        body(std::move(b)) {}
  static Stmt make(Var var, Expr min, Expr extent, ForKind kind, Stmt body);
};

// buffer[index] = value; a vector index (e.g. a Ramp) stores value's lanes.
struct Store : StmtNode {
  static constexpr NodeKind kKind = NodeKind::kStore;
  Buffer buffer;
  Expr value, index;
  Store(Buffer b, Expr v, Expr i)
      : StmtNode(kKind), buffer(std::move(b)), value(std::move(v)), index(std::move(i)) {}
  static Stmt make(Buffer buffer, Expr value, Expr index);
};

// A local buffer of `extent` elements (an IntImm after lowering), live inside body.
struct Allocate : StmtNode {
  static constexpr NodeKind kKind = NodeKind::kAllocate;
  Buffer buffer;
  Expr extent;
  Stmt body;
  Allocate(Buffer b, Expr e, Stmt s)
      : StmtNode(kKind), buffer(std::move(b)), extent(std::move(e)), body(std::move(s)) {}
  static Stmt make(Buffer buffer, Expr extent, Stmt body);
};

// if (condition) then_case else else_case; else_case may be undefined.
struct IfThenElse : StmtNode {
  static constexpr NodeKind kKind = NodeKind::kIfThenElse;
  Expr condition;
  Stmt then_case, else_case;
  IfThenElse(Expr c, Stmt t, Stmt e)
      : StmtNode(kKind),
        condition(std::move(c)),
        then_case(std::move(t)),
        else_case(std::move(e)) {}
  static Stmt make(Expr condition, Stmt then_case, Stmt else_case = Stmt());
};

struct LetStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::kLetStmt;
  Var var;
  Expr value;
  Stmt body;
  LetStmt(Var v, Expr x, Stmt b)
      : StmtNode(kKind), var(std::move(v)), value(std::move(x)), body(std::move(b)) {}
  static Stmt make(Var var, Expr value, Stmt body);
};

// Statements in sequence.
struct Block : StmtNode {
  static constexpr NodeKind kKind = NodeKind::kBlock;
  std::vector<Stmt> stmts;
  explicit Block(std::vector<Stmt> s) : StmtNode(kKind), stmts(std::move(s)) {}
  // Flattens nested Blocks and drops undefined statements; one statement is returned as is.
  static Stmt make(std::vector<Stmt> stmts);
};
using Seq = Block;

struct Evaluate : StmtNode {
  static constexpr NodeKind kKind = NodeKind::kEvaluate;
  Expr value;
  explicit Evaluate(Expr v) : StmtNode(kKind), value(std::move(v)) {}
  static Stmt make(Expr value);
};

// buffer[indices...] = value (multi-dimensional; before flattening).
struct BufferStore : StmtNode {
  static constexpr NodeKind kKind = NodeKind::kBufferStore;
  Buffer buffer;
  Expr value;
  std::vector<Expr> indices;
  BufferStore(Buffer b, Expr v, std::vector<Expr> i)
      : StmtNode(kKind), buffer(std::move(b)), value(std::move(v)), indices(std::move(i)) {}
  static Stmt make(Buffer buffer, Expr value, std::vector<Expr> indices);
};

// Storage for the region [mins[d], mins[d] + extents[d]) of buffer, live in body (before
// flattening; becomes an Allocate of prod(extents) elements).
struct Realize : StmtNode {
  static constexpr NodeKind kKind = NodeKind::kRealize;
  Buffer buffer;
  std::vector<Expr> mins;
  std::vector<int64_t> extents;
  Stmt body;
  Realize(Buffer b, std::vector<Expr> m, std::vector<int64_t> e, Stmt s)
      : StmtNode(kKind),
        buffer(std::move(b)),
        mins(std::move(m)),
        extents(std::move(e)),
        body(std::move(s)) {}
  static Stmt make(Buffer buffer, std::vector<Expr> mins, std::vector<int64_t> extents, Stmt body);
};

// ---------------------------------------------------------------- functions

// One kernel argument: a dense row-major tensor.
struct BufferArg {
  Buffer buffer;
  std::vector<int64_t> shape;
  DataType dtype;  // == buffer.dtype()
  bool is_output = false;
  int64_t num_elements() const;
};

// A lowered kernel: args in the order the user passed the tensors (the kernel ABI: one pointer
// per arg), and a body over flat Loads/Stores of those buffers and its own Allocates.
struct LoweredFunc {
  std::string name;
  std::vector<BufferArg> args;
  Stmt body;
};

// Small helpers used everywhere.
// The IntImm value of e, or nullptr when e is not an IntImm.
inline const int64_t* as_const_int(const Expr& e) {
  const IntImm* i = e.as<IntImm>();
  return i ? &i->value : nullptr;
}
inline bool is_const_int(const Expr& e, int64_t v) {
  const int64_t* p = as_const_int(e);
  return p && *p == v;
}
// A constant of type t with value v (IntImm or FloatImm; vector types are Broadcast).
Expr make_const(DataType t, double v);
inline Expr make_zero(DataType t) { return make_const(t, 0); }

}  // namespace ktune::te
