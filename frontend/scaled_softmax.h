// Defines ScaledSoftmax, attention's Softmax of its scores times a constant (timm's and
// torch's `(q @ k.transpose(-2, -1)) * scale`, BERT's `/ sqrt(d)`), and find_scaled_softmaxes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// Softmax(x * scale) as one kernel: the scaling costs a multiply in the pass the Softmax makes
// anyway, where on its own it is a pass over the whole score tensor.
struct ScaledSoftmax {
  size_t scale_node = 0;  // the Mul or Div by a one-element float constant
  size_t softmax = 0;     // the Softmax or LogSoftmax that alone reads its output
  std::string input;      // the tensor the Mul or Div scales
  double scale = 1;       // its constant (a Div's: the reciprocal)
};

// Every Mul (either operand the constant) or Div (the divisor the constant) of a tensor by a
// one-element float constant whose output only a Softmax or LogSoftmax reads (and no graph
// output is). Shapes must be known.
std::vector<ScaledSoftmax> find_scaled_softmaxes(const Graph& graph);

}  // namespace ktune::frontend
