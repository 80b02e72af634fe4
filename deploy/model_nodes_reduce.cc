// The reduce family's generated kernel: ReduceSum, ReduceMean, ReduceMax, ReduceMin on any axes,
// the axes read in every opset's form (frontend/op_params.h).
#include <algorithm>

#include "deploy/model_nodes_internal.h"
#include "deploy/model_ops.h"
#include "frontend/op_params.h"
#include "frontend/operators.h"

namespace ktune::deploy::nodes {

// A reduction over its axes (frontend/op_params.h); none given reduces every axis, or copies with
// noop_with_empty_axes.
std::vector<GeneratedStep> reduce_steps(const frontend::Graph& g, const frontend::Node& n,
                                        const Constants& constants) {
  const std::vector<int64_t> shape = shape_of(g, n, n.inputs.at(0));
  std::vector<int64_t> axes;
  try {
    axes = frontend::read_axes(n, frontend::lookup_in(constants));
  } catch (const Error& e) {
    throw unsupported(n, e.what());
  }
  if (axes.empty() && n.int_or("noop_with_empty_axes", 0) != 0)
    return {copy_step(g, n, n.inputs[0], n.outputs.at(0))};
  if (axes.empty())
    for (size_t d = 0; d < shape.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  for (int64_t& a : axes) a = normalized_axis(n, a, shape.size());
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const std::string op = frontend::operator_info(n.op)->kernel;
  GeneratedStep s{
      n.name, "reduce_" + op, {StepOperand{n.inputs[0], false, shape, {}}}, n.outputs.at(0), {}};
  s.kernel = [op, shape, axes](const std::string& symbol) {
    return reduce(symbol, op, shape, axes);
  };
  return {s};
}

}  // namespace ktune::deploy::nodes
