// The binary family's generated kernels (Add, Sub, Mul, Div, Pow, Max, Min, Sum, PRelu): an
// operand that broadcasts or is a constant, read as numpy broadcasts it; a one-element constant
// as an immediate. Two activations of one shape are the planner's elementwise kernel instead.
#include <optional>

#include "deploy/model_nodes_internal.h"
#include "deploy/model_ops.h"
#include "frontend/operators.h"

namespace ktune::deploy::nodes {
namespace {

std::optional<GeneratedStep> describe_binary(const frontend::Graph& g, const frontend::Node& n,
                                             const Constants& constants) {
  // The operator table's binary family: Max, Min and Sum take any number of operands.
  const std::string op = frontend::operator_info(n.op)->kernel;
  const bool variadic = n.op == "Max" || n.op == "Min" || n.op == "Sum";
  const std::vector<int64_t> out = shape_of(g, n, n.outputs.at(0));
  if (variadic && n.inputs.size() == 1) return copy_step(g, n, n.inputs[0], n.outputs[0]);
  if (variadic && n.inputs.size() > 2) {
    GeneratedStep s{n.name, op, {}, n.outputs.at(0), {}};
    std::vector<std::vector<int64_t>> shapes;
    for (const std::string& in : n.inputs) {
      s.inputs.push_back(operand(g, n, in, constants));
      shapes.push_back(s.inputs.back().shape);
    }
    s.kernel = [op, shapes, out](const std::string& symbol) {
      return broadcast_nary(symbol, op, shapes, out);
    };
    return s;
  }
  if (n.inputs.size() != 2) throw unsupported(n, "not two operands");
  StepOperand a = operand(g, n, n.inputs[0], constants), b = operand(g, n, n.inputs[1], constants);
  // Two activations of one shape are the same-shape elementwise kernel's (which keeps a blocked
  // layout); not described here.
  const bool same_shape_kernel =
      op == "add" || op == "sub" || op == "mul" || op == "div" || op == "max" || op == "min";
  if (!a.constant && !b.constant && a.shape == b.shape && same_shape_kernel) return std::nullopt;
  if (a.constant && b.constant) throw unsupported(n, "both operands are constants");
  GeneratedStep s;
  s.layer = n.name;
  s.output = n.outputs.at(0);
  const bool has_scalar_form =
      op == "add" || op == "sub" || op == "mul" || op == "div" || op == "pow";
  if (has_scalar_form && b.constant && b.data.size() == 1 && a.shape == out) {
    // x op c: the constant is an immediate of the kernel.
    ElementwiseOp e{op + "_scalar"};
    e.value = b.data.front();
    const int64_t count = count_of(out);
    s.what = e.op;
    s.inputs = {a};
    s.kernel = [e, count](const std::string& symbol) { return elementwise(symbol, e, count); };
    return s;
  }
  if (broadcast_shape(a.shape, b.shape) != out)
    throw unsupported(n, "operand shapes that do not broadcast to the output's");
  s.what = op;
  s.inputs = {a, b};
  s.kernel = [op, sa = a.shape, sb = b.shape, out](const std::string& symbol) {
    return broadcast_binary(symbol, op, sa, sb, out);
  };
  return s;
}

}  // namespace

std::vector<GeneratedStep> binary_steps(const frontend::Graph& g, const frontend::Node& n,
                                        const Constants& constants) {
  std::optional<GeneratedStep> step = describe_binary(g, n, constants);
  return step ? std::vector<GeneratedStep>{std::move(*step)} : std::vector<GeneratedStep>{};
}

}  // namespace ktune::deploy::nodes
