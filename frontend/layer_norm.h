// Defines LayerNormGroup, a normalization over the last axis found in a Graph as one
// LayerNormalization node or as the nine nodes exporters write at opsets before 17, and
// find_layer_norms.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// y = (x - mean(x)) / sqrt(var(x) + epsilon) * gamma + beta over the last axis of x (var biased).
struct LayerNormGroup {
  std::vector<size_t> nodes;  // in graph order: the first reads `input`, the last writes `output`
  std::string input, output;
  std::string gamma, beta;  // constants of the last axis' extent; "" = none (1 and 0)
  double epsilon = 1e-5;
};

// Every LayerNorm of `graph`: LayerNormalization over the last axis (its Mean and InvStdDev
// outputs unused), and ReduceMean(x) -> Sub(x, mean) = d -> Pow(d, 2) (or d * d) -> ReduceMean
// -> Add(eps) -> Sqrt -> Div(d, .) -> then optionally Mul(gamma) and Add(beta), both reductions
// over the last axis with keepdims, each intermediate read only inside the group and no graph
// output. A group's nodes are in no other group. Shapes must be known.
std::vector<LayerNormGroup> find_layer_norms(const Graph& graph);

}  // namespace ktune::frontend
