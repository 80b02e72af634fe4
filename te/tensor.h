// Defines te's tensor language: Tensor, placeholder, compute, reduce_axis, sum/max/min, operators.
#pragma once

#include <concepts>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "te/ir.h"

namespace ktune::te {

enum class IterKind : uint8_t { kSpatial, kReduce };

// An iteration variable over [min, min + extent): a compute axis, a reduction axis, or a loop of a
// schedule (split/fuse results). Converts to its Var as an Expr. Identity is the Var.
struct IterVar {
  Var var;
  int64_t min = 0;
  int64_t extent = 0;
  IterKind kind = IterKind::kSpatial;

  operator Expr() const { return var; }  // NOLINT
  const std::string& name() const { return var.name(); }
  bool same_as(const IterVar& o) const { return var.same_as(o.var); }
  bool is_reduce() const { return kind == IterKind::kReduce; }
};

// The definition of a tensor. A placeholder has no body; a compute has one Var per dimension
// (axes[d] ranges over [0, shape[d])) and a body that may be a Reduce at its top.
struct TensorNode {
  std::string name;
  std::vector<int64_t> shape;
  DataType dtype;
  bool is_placeholder = true;
  std::vector<Var> axes;
  Expr body;
  // The tensors the body reads, in first-use order (computed at construction).
  std::vector<std::shared_ptr<const TensorNode>> inputs;
};

// A handle to a tensor definition; identity is the node.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const TensorNode> n) : node_(std::move(n)) {}

  bool defined() const { return node_ != nullptr; }
  const TensorNode* get() const { return node_.get(); }
  const TensorNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const TensorNode>& ptr() const { return node_; }
  const std::string& name() const { return node_->name; }
  const std::vector<int64_t>& shape() const { return node_->shape; }
  int ndim() const { return static_cast<int>(node_->shape.size()); }
  DataType dtype() const { return node_->dtype; }
  bool is_placeholder() const { return node_->is_placeholder; }
  bool same_as(const Tensor& o) const { return node_ == o.node_; }
  bool operator==(const Tensor& o) const { return node_ == o.node_; }
  int64_t num_elements() const;

  // A read of this tensor; integer indices are cast to Int(64). Throws ktune::Error
  // (kInvalidArgument) when the number of indices differs from ndim().
  Expr read(std::vector<Expr> indices) const;
  template <typename... Args>
  Expr operator()(Args&&... args) const {
    return read(std::vector<Expr>{Expr(std::forward<Args>(args))...});
  }

 private:
  std::shared_ptr<const TensorNode> node_;
};

struct TensorHash {
  size_t operator()(const Tensor& t) const { return std::hash<const void*>()(t.get()); }
};

// An input tensor. Throws ktune::Error(kInvalidArgument) for a non-positive extent.
Tensor placeholder(std::vector<int64_t> shape, DataType dtype = Float(32),
                   std::string name = "placeholder");

// A tensor defined pointwise by fn(indices). The body's dtype is the tensor's dtype. A Reduce may
// appear only as the whole body. Throws ktune::Error(kInvalidArgument) for bad shapes, a nested
// or misplaced Reduce, or a body reading a reduction axis it does not reduce over.
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var>&)>& fn,
               std::string name = "compute");

template <typename F>
requires(!std::is_convertible_v<F, std::function<Expr(const std::vector<Var>&)>>) Tensor
    compute(std::vector<int64_t> shape, F&& fn, std::string name = "compute") {
  std::function<Expr(const std::vector<Var>&)> g = [&fn](const std::vector<Var>& v) -> Expr {
    if constexpr (std::invocable<F, Var>) {
      return fn(v.at(0));
    } else if constexpr (std::invocable<F, Var, Var>) {
      return fn(v.at(0), v.at(1));
    } else if constexpr (std::invocable<F, Var, Var, Var>) {
      return fn(v.at(0), v.at(1), v.at(2));
    } else if constexpr (std::invocable<F, Var, Var, Var, Var>) {
      return fn(v.at(0), v.at(1), v.at(2), v.at(3));
    } else if constexpr (std::invocable<F, Var, Var, Var, Var, Var>) {
      return fn(v.at(0), v.at(1), v.at(2), v.at(3), v.at(4));
    } else {
      static_assert(std::invocable<F, Var, Var, Var, Var, Var, Var>, "compute: fn takes 1..6 Vars");
      return fn(v.at(0), v.at(1), v.at(2), v.at(3), v.at(4), v.at(5));
    }
  };
  return compute(std::move(shape), g, std::move(name));
}

// A reduction axis over [min, min + extent). Throws ktune::Error(kInvalidArgument) if extent <= 0.
struct Range {
  int64_t min = 0;
  int64_t extent = 0;
};
IterVar reduce_axis(Range range, std::string name = "k");

// Reductions over axes (identities: 0, lowest, highest): sum(x, k), sum(x, {k}), sum(x, {r, s}) or
// a std::vector<IterVar>. Throws ktune::Error(kInvalidArgument) for an axis that is not a
// reduce_axis or an empty list.
Expr sum(Expr source, std::initializer_list<IterVar> axes);
Expr max(Expr source, std::initializer_list<IterVar> axes);
Expr min(Expr source, std::initializer_list<IterVar> axes);
Expr sum(Expr source, const std::vector<IterVar>& axes);
Expr max(Expr source, const std::vector<IterVar>& axes);
Expr min(Expr source, const std::vector<IterVar>& axes);
Expr sum(Expr source, const IterVar& axis);
Expr max(Expr source, const IterVar& axis);
Expr min(Expr source, const IterVar& axis);

// Arithmetic with C-like promotion: an immediate takes the other operand's type; int with float
// becomes the float type; two ints or two floats become the wider. / and % on integers are
// floor division and floor modulo. Throws ktune::Error(kInvalidArgument) on bool arithmetic.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
Expr max(Expr a, Expr b);
Expr min(Expr a, Expr b);
// cond ? t : f with both operands promoted to a common type.
Expr select(Expr cond, Expr t, Expr f);
Expr cast(DataType t, Expr value);
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr tanh(Expr x);
Expr abs(Expr x);
Expr pow(Expr x, Expr y);
Expr floor(Expr x);
Expr ceil(Expr x);
// Nearest integer, halves to even (2.5 -> 2, 3.5 -> 4, -2.5 -> -2).
Expr round_even(Expr x);
Expr sigmoid(Expr x);

// The tensors that `outputs` depend on (including themselves), producers before consumers.
std::vector<Tensor> topo_order(const std::vector<Tensor>& outputs);

}  // namespace ktune::te
