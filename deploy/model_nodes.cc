// What generated kernel a node without a task becomes: the operator's form read from the graph
// (shapes, attributes, constants) and turned into one of model_ops' kernels.
#include "deploy/model_nodes.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "deploy/model_nodes_internal.h"
#include "deploy/model_ops.h"
#include "frontend/op_params.h"
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

namespace {

using nodes::count_of;
using nodes::operand;
using nodes::shape_of;
using nodes::unsupported;

std::optional<GeneratedStep> describe_binary(const frontend::Graph& g, const frontend::Node& n,
                                             const Constants& constants) {
  // The operator table's binary family: Max, Min and Sum take any number of operands.
  const std::string op = frontend::operator_info(n.op)->kernel;
  const bool variadic = n.op == "Max" || n.op == "Min" || n.op == "Sum";
  const std::vector<int64_t> out = shape_of(g, n, n.outputs.at(0));
  if (variadic && n.inputs.size() == 1) return nodes::copy_step(g, n, n.inputs[0], n.outputs[0]);
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
  int64_t axis = nodes::normalized_axis(n, read.axis, shape.size());
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

// A reduction over its axes (frontend/op_params.h); none given reduces every axis, or copies with
// noop_with_empty_axes.
GeneratedStep describe_reduce(const frontend::Graph& g, const frontend::Node& n,
                              const Constants& constants) {
  const std::vector<int64_t> shape = shape_of(g, n, n.inputs.at(0));
  std::vector<int64_t> axes;
  try {
    axes = frontend::read_axes(n, frontend::lookup_in(constants));
  } catch (const Error& e) {
    throw nodes::unsupported(n, e.what());
  }
  if (axes.empty() && n.int_or("noop_with_empty_axes", 0) != 0)
    return nodes::copy_step(g, n, n.inputs[0], n.outputs.at(0));
  if (axes.empty())
    for (size_t d = 0; d < shape.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  for (int64_t& a : axes) a = nodes::normalized_axis(n, a, shape.size());
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const std::string op = frontend::operator_info(n.op)->kernel;
  GeneratedStep s{
      n.name, "reduce_" + op, {StepOperand{n.inputs[0], false, shape, {}}}, n.outputs.at(0), {}};
  s.kernel = [op, shape, axes](const std::string& symbol) {
    return reduce(symbol, op, shape, axes);
  };
  return s;
}

// The element type of a quantized tensor as te names it (uint8 or int8).
te::DataType quantized_type(const frontend::Graph& g, const frontend::Node& n,
                            const std::string& tensor) {
  const std::string t = g.type(tensor);
  if (t == "uint8") return te::UInt(8);
  if (t == "int8") return te::Int(8);
  throw unsupported(n, "tensor '" + tensor + "' is " + (t.empty() ? "of unknown type" : t) +
                           " (quantized tensors are uint8 or int8)");
}

// QuantizeLinear (float32 -> uint8/int8) or DequantizeLinear (uint8/int8 -> float32) of an
// activation, per tensor or per axis (the scales and zero points then the kernel's constants).
GeneratedStep describe_quantize(const frontend::Graph& g, const frontend::Node& n,
                                const Constants& constants) {
  const bool quantize = n.op == "QuantizeLinear";
  const std::string& x = n.inputs.at(0);
  const std::string scale = n.inputs.size() > 1 ? n.inputs[1] : "";
  const std::string zero = n.inputs.size() > 2 ? n.inputs[2] : "";
  auto s = constants.find(scale);
  if (s == constants.end() || s->second.f32.empty())
    throw unsupported(n, "a scale that is not a float32 constant");
  QuantParams p{s->second.f32, std::vector<int64_t>(s->second.f32.size(), 0), 1};
  if (!zero.empty()) {
    auto z = constants.find(zero);
    if (z == constants.end() || z->second.i64.size() != p.scale.size())
      throw unsupported(n, "a zero point that is no constant of the scale's extent");
    p.zero_point = z->second.i64;
  }
  // QuantizeLinear without a zero point quantizes to uint8.
  const te::DataType q = quantize ? (zero.empty() ? te::UInt(8) : quantized_type(g, n, zero))
                                  : quantized_type(g, n, x);
  const std::vector<int64_t> shape = shape_of(g, n, x);
  const int64_t count =
      std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  GeneratedStep step{n.name,
                     quantize ? "quantize_linear" : "dequantize_linear",
                     {StepOperand{x, false, shape, {}}},
                     n.outputs.at(0),
                     {}};
  if (p.per_axis()) {
    int64_t axis = n.int_or("axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(shape.size());
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) ||
        shape[static_cast<size_t>(axis)] != static_cast<int64_t>(p.scale.size()))
      throw unsupported(n, "a scale that does not match its axis");
    for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) p.inner *= shape[d];
    const std::vector<int64_t> extent = {static_cast<int64_t>(p.scale.size())};
    step.inputs.push_back(StepOperand{scale, true, extent, p.scale});
    step.inputs.push_back(
        StepOperand{n.name + "@zero_point", true, extent,
                    std::vector<float>(p.zero_point.begin(), p.zero_point.end())});
  }
  step.kernel = [quantize, q, p, count](const std::string& symbol) {
    return quantize ? quantize_linear(symbol, count, p, q) : dequantize_linear(symbol, count, p, q);
  };
  return step;
}

}  // namespace

Constants with_folded_dequantize(const frontend::Graph& g, const Constants& constants) {
  Constants out = constants;
  for (const frontend::Node& n : g.nodes) {
    if (n.op != "DequantizeLinear" || !n.domain.empty()) continue;
    auto x = out.find(n.inputs.at(0));
    if (x == out.end() || x->second.i64.empty()) continue;
    const frontend::ConstantValue& v = x->second;
    auto s = out.find(n.inputs.size() > 1 ? n.inputs[1] : "");
    if (s == out.end() || s->second.f32.empty())
      throw unsupported(n, "a scale that is not a float32 constant");
    const std::vector<float>& scale = s->second.f32;
    std::vector<int64_t> zero(scale.size(), 0);
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      auto z = out.find(n.inputs[2]);
      if (z == out.end() || z->second.i64.size() != scale.size())
        throw unsupported(n, "a zero point that is no constant of the scale's extent");
      zero = z->second.i64;
    }
    // Per axis: element i's channel is its index along `axis` (inner = the extent after it).
    int64_t inner = static_cast<int64_t>(v.i64.size()), channels = 1;
    if (scale.size() > 1) {
      int64_t axis = n.int_or("axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(v.shape.size());
      if (axis < 0 || axis >= static_cast<int64_t>(v.shape.size()) ||
          v.shape[static_cast<size_t>(axis)] != static_cast<int64_t>(scale.size()))
        throw unsupported(n, "a scale that does not match its axis");
      channels = v.shape[static_cast<size_t>(axis)];
      inner = 1;
      for (size_t d = static_cast<size_t>(axis) + 1; d < v.shape.size(); ++d) inner *= v.shape[d];
    }
    frontend::ConstantValue f;
    f.shape = v.shape;
    f.f32.resize(v.i64.size());
    for (size_t i = 0; i < v.i64.size(); ++i) {
      const size_t c = static_cast<size_t>(static_cast<int64_t>(i) / inner % channels);
      f.f32[i] = static_cast<float>(static_cast<int32_t>(v.i64[i] - zero[c])) * scale[c];
    }
    out[n.outputs.at(0)] = std::move(f);
  }
  return out;
}

GeneratedStep describe_layer_norm(const frontend::Graph& g, const frontend::LayerNormGroup& group,
                                  const Constants& constants) {
  const frontend::Node& first = g.nodes.at(group.nodes.front());
  const std::vector<int64_t> shape = shape_of(g, first, group.input);
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
      p.data = operand(g, first, tensor, constants).data;
      if (static_cast<int64_t>(p.data.size()) != n)
        throw unsupported(first, "a LayerNorm parameter of another extent");
    }
    s.inputs.push_back(std::move(p));
  }
  const float eps = static_cast<float>(group.epsilon);
  s.kernel = [shape, eps](const std::string& symbol) { return layer_norm(symbol, shape, eps); };
  return s;
}

GeneratedStep describe_scaled_softmax(const frontend::Graph& g, const frontend::ScaledSoftmax& m) {
  const frontend::Node& n = g.nodes.at(m.softmax);
  return describe_softmax(g, n, m.input, static_cast<float>(m.scale),
                          g.nodes.at(m.scale_node).name + "+" + n.name);
}

std::vector<GeneratedStep> describe_node(const frontend::Graph& g, const frontend::Node& n,
                                         const Constants& constants) {
  if (!n.domain.empty()) return {};
  const auto one = [](std::optional<GeneratedStep> step) {
    return step ? std::vector<GeneratedStep>{std::move(*step)} : std::vector<GeneratedStep>{};
  };
  if (frontend::in_family(n.op, frontend::OpFamily::kBinary))
    return one(describe_binary(g, n, constants));
  if (n.op == "QuantizeLinear" || n.op == "DequantizeLinear")
    return one(describe_quantize(g, n, constants));
  if (n.op == "BatchNormalization") return one(describe_batch_norm(g, n, constants));
  if (n.op == "Softmax" || n.op == "LogSoftmax")
    return one(describe_softmax(g, n, n.inputs.at(0), 1, n.name));
  if (frontend::in_family(n.op, frontend::OpFamily::kReduce))
    return one(describe_reduce(g, n, constants));
  if (n.op == "Transpose") {
    const std::vector<int64_t> shape = shape_of(g, n, n.inputs.at(0));
    if (shape.size() > 6) throw unsupported(n, "more than 6 axes");
    std::vector<int64_t> perm;
    try {
      perm = frontend::read_perm(n, shape.size());
    } catch (const Error& e) {
      throw unsupported(n, e.what());
    }
    GeneratedStep s{
        n.name, "transpose", {StepOperand{n.inputs[0], false, shape, {}}}, n.outputs.at(0), {}};
    s.kernel = [shape, perm](const std::string& symbol) { return transpose(symbol, shape, perm); };
    return {s};
  }
  return nodes::describe_data(g, n, constants);
}

}  // namespace ktune::deploy
