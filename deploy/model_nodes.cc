// What generated kernel a node without a task becomes: the registry of the operator families'
// files (model_nodes_<family>.cc), each reading the operator's form from the graph (shapes,
// attributes, constants) and turning it into one of model_ops' kernels; and what they share.
#include "deploy/model_nodes.h"

#include <functional>
#include <map>
#include <numeric>

#include "deploy/model_nodes_internal.h"
#include "deploy/model_ops.h"
#include "frontend/operators.h"
#include "support/error.h"

namespace ktune::deploy {
namespace nodes {

Error unsupported(const frontend::Node& n, const std::string& why) {
  return Error(ErrorKind::kUnsupported, "node '" + n.name + "' (" + n.op + "): " + why);
}

std::vector<int64_t> shape_of(const frontend::Graph& g, const frontend::Node& n,
                              const std::string& tensor) {
  auto s = g.shape(tensor);
  if (!s) throw unsupported(n, "tensor '" + tensor + "' has no known shape");
  return *s;
}

int64_t count_of(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

StepOperand operand(const frontend::Graph& g, const frontend::Node& n, const std::string& tensor,
                    const Constants& constants) {
  auto c = constants.find(tensor);
  if (c == constants.end()) return StepOperand{tensor, false, shape_of(g, n, tensor), {}};
  if (static_cast<int64_t>(c->second.f32.size()) != count_of(c->second.shape))
    throw unsupported(n, "input '" + tensor + "' is not a float32 constant");
  return StepOperand{tensor, true, c->second.shape, c->second.f32};
}

std::optional<std::vector<int64_t>> int_input(const frontend::Node& n, size_t index,
                                              const Constants& constants) {
  if (index >= n.inputs.size() || n.inputs[index].empty()) return std::nullopt;
  auto c = constants.find(n.inputs[index]);
  if (c == constants.end() ||
      static_cast<int64_t>(c->second.i64.size()) != count_of(c->second.shape))
    throw unsupported(n, "input '" + n.inputs[index] + "' is not an integer constant");
  return c->second.i64;
}

int64_t normalized_axis(const frontend::Node& n, int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    throw unsupported(n, "axis " + std::to_string(axis) + " out of range");
  return axis < 0 ? axis + r : axis;
}

GeneratedStep copy_step(const frontend::Graph& g, const frontend::Node& n, const std::string& input,
                        const std::string& output) {
  const std::vector<int64_t> shape = shape_of(g, n, input);
  const int64_t count = count_of(shape);
  GeneratedStep s{n.name, "copy", {StepOperand{input, false, shape, {}}}, output, {}};
  s.kernel = [count](const std::string& symbol) {
    return elementwise(symbol, ElementwiseOp{"copy"}, count);
  };
  return s;
}

}  // namespace nodes

std::vector<GeneratedStep> describe_node(const frontend::Graph& g, const frontend::Node& n,
                                         const Constants& constants) {
  // Each family of the operator table has its file: how it reads a node's forms and which kernel
  // computes it. Views, constants and the same-shape elementwise kernels are the planner's.
  using Family = std::vector<GeneratedStep> (*)(const frontend::Graph&, const frontend::Node&,
                                                const Constants&);
  static const std::map<frontend::OpFamily, Family> kFamilies = {
      {frontend::OpFamily::kBinary, nodes::binary_steps},        // model_nodes_binary.cc
      {frontend::OpFamily::kNormalize, nodes::normalize_steps},  // model_nodes_normalize.cc
      {frontend::OpFamily::kReduce, nodes::reduce_steps},        // model_nodes_reduce.cc
      {frontend::OpFamily::kQuantize, nodes::quantize_steps},    // model_nodes_quantize.cc
      {frontend::OpFamily::kData, nodes::data_steps},            // model_nodes_data.cc
  };
  const frontend::OperatorInfo* info = frontend::operator_info(n.op, n.domain);
  const auto family = info ? kFamilies.find(info->family) : kFamilies.end();
  return family == kFamilies.end() ? std::vector<GeneratedStep>{} : family->second(g, n, constants);
}

}  // namespace ktune::deploy
