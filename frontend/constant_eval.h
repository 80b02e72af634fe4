// Defines evaluate_constant(): ONNX's shape and arithmetic operators computed on constant tensors
// at build time, what fold_constants needs to turn exporters' shape subgraphs into constants.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// Whether evaluate_constant computes `op` (of the default domain).
bool is_foldable_op(const std::string& op);

// The outputs of node `n` of `graph` (opset graph.opset), given the values of its inputs (nullptr
// for an omitted optional input): each float output (float32, float64 or float16 in graph.types)
// as f32, any other as i64 (bool as 0 and 1). Shape and Size read only their input's shape from
// graph.shapes (their input may be an activation: `inputs` holds nullptr for it). nullopt when
// the node takes a form this does not compute (an attribute or an input it does not read, a shape
// not known, more than 2^24 output elements): the node then stays in the graph.
std::optional<std::vector<ConstantValue>> evaluate_constant(
    const Node& n, const std::vector<const ConstantValue*>& inputs, const Graph& graph);

}  // namespace ktune::frontend
