// The normalize family's generated kernels: a BatchNormalization no conv took (a scale and shift
// per channel), Softmax and LogSoftmax on any axis (with attention's scaled scores), and the
// LayerNorm groups frontend/layer_norm.h finds.
#include <cmath>

#include "deploy/model_nodes_internal.h"
#include "deploy/model_ops.h"
#include "frontend/op_params.h"

namespace ktune::deploy {
namespace nodes {
namespace {

// A BatchNormalization no conv took (after a ConvTranspose, a Concat, an Add): scale and shift per
// channel, folded at build time in double precision.
GeneratedStep describe_batch_norm(const frontend::Graph& g, const frontend::Node& n,
                                  const Constants& constants) {
  if (n.inputs.size() < 5) throw unsupported(n, "fewer than five inputs");
  if (n.int_or("training_mode", 0) != 0) throw unsupported(n, "training mode");
  const std::vector<int64_t> shape = shape_of(g, n, n.inputs[0]);
  if (shape.size() < 2) throw unsupported(n, "an input without a channel axis");
  const size_t channels = static_cast<size_t>(shape[1]);
  std::vector<std::vector<float>> p;
  for (size_t k = 1; k < 5; ++k) {
    const StepOperand c = operand(g, n, n.inputs[k], constants);
    if (!c.constant || c.data.size() != channels)
      throw unsupported(n, "input '" + n.inputs[k] + "' is no constant of one value per channel");
    p.push_back(c.data);
  }
  const double eps = n.float_or("epsilon", 1e-5);
  std::vector<float> scale(channels), shift(channels);
  for (size_t c = 0; c < channels; ++c) {
    const double s = p[0][c] / std::sqrt(static_cast<double>(p[3][c]) + eps);
    scale[c] = static_cast<float>(s);
    shift[c] = static_cast<float>(p[1][c] - p[2][c] * s);
  }
  const std::vector<int64_t> extent = {shape[1]};
  GeneratedStep step{n.name,
                     "batch_norm",
                     {StepOperand{n.inputs[0], false, shape, {}},
                      StepOperand{n.name + "@scale", true, extent, scale},
                      StepOperand{n.name + "@shift", true, extent, shift}},
                     n.outputs.at(0),
                     {}};
  step.kernel = [shape](const std::string& symbol) { return channel_affine(symbol, shape); };
  return step;
}

// Softmax and LogSoftmax of `input` times `scale` over their axis (frontend/op_params.h); before
// opset 13 over the input flattened to 2-D at that axis, i.e. the last axis of [before axis, from
// axis on].
GeneratedStep describe_softmax(const frontend::Graph& g, const frontend::Node& n,
                               const std::string& input, float scale, const std::string& layer) {
  const std::vector<int64_t> shape = shape_of(g, n, input);
  const bool log = n.op == "LogSoftmax";
  const frontend::SoftmaxAxis read = frontend::read_softmax_axis(g, n);
  int64_t axis = normalized_axis(n, read.axis, shape.size());
  std::vector<int64_t> kernel_shape = shape;
  if (read.flattened) {
    int64_t rows = 1, cols = 1;
    for (size_t d = 0; d < shape.size(); ++d)
      (static_cast<int64_t>(d) < axis ? rows : cols) *= shape[d];
    kernel_shape = {rows, cols};
    axis = 1;
  }
  GeneratedStep s{layer,
                  log ? "log_softmax" : "softmax",
                  {StepOperand{input, false, shape, {}}},
                  n.outputs.at(0),
                  {}};
  s.kernel = [kernel_shape, axis, log, scale](const std::string& symbol) {
    return softmax(symbol, kernel_shape, axis, log, scale);
  };
  return s;
}

}  // namespace

std::vector<GeneratedStep> normalize_steps(const frontend::Graph& g, const frontend::Node& n,
                                           const Constants& constants) {
  if (n.op == "BatchNormalization") return {describe_batch_norm(g, n, constants)};
  if (n.op == "Softmax" || n.op == "LogSoftmax")
    return {describe_softmax(g, n, n.inputs.at(0), 1, n.name)};
  return {};
}

}  // namespace nodes

GeneratedStep describe_layer_norm(const frontend::Graph& g, const frontend::LayerNormGroup& group,
                                  const Constants& constants) {
  const frontend::Node& first = g.nodes.at(group.nodes.front());
  const std::vector<int64_t> shape = nodes::shape_of(g, first, group.input);
  const int64_t n = shape.back();
  GeneratedStep s;
  for (size_t k : group.nodes) s.layer += (s.layer.empty() ? "" : "+") + g.nodes[k].name;
  s.what = "layer_norm";
  s.output = group.output;
  s.inputs.push_back(StepOperand{group.input, false, shape, {}});
  // gamma and beta as [n] (their leading ones dropped), 1 and 0 when the graph has none.
  for (const auto& [tensor, fill] : {std::pair{group.gamma, 1.0f}, std::pair{group.beta, 0.0f}}) {
    StepOperand p{
        tensor.empty() ? group.input + (fill == 1.0f ? "@gamma" : "@beta") : tensor, true, {n}, {}};
    if (tensor.empty()) {
      p.data.assign(static_cast<size_t>(n), fill);
    } else {
      p.data = nodes::operand(g, first, tensor, constants).data;
      if (static_cast<int64_t>(p.data.size()) != n)
        throw nodes::unsupported(first, "a LayerNorm parameter of another extent");
    }
    s.inputs.push_back(std::move(p));
  }
  const float eps = static_cast<float>(group.epsilon);
  s.kernel = [shape, eps](const std::string& symbol) { return layer_norm(symbol, shape, eps); };
  return s;
}

GeneratedStep describe_scaled_softmax(const frontend::Graph& g, const frontend::ScaledSoftmax& m) {
  const frontend::Node& n = g.nodes.at(m.softmax);
  return nodes::describe_softmax(g, n, m.input, static_cast<float>(m.scale),
                                 g.nodes.at(m.scale_node).name + "+" + n.name);
}

}  // namespace ktune::deploy
