// The quantize family's generated kernels: QuantizeLinear and DequantizeLinear of an activation,
// per tensor or per axis; and the DequantizeLinear of a constant, folded into the weights.
#include <functional>
#include <numeric>

#include "deploy/model_nodes_internal.h"
#include "deploy/model_ops.h"

namespace ktune::deploy {
namespace nodes {
namespace {

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

std::vector<GeneratedStep> quantize_steps(const frontend::Graph& g, const frontend::Node& n,
                                          const Constants& constants) {
  return {describe_quantize(g, n, constants)};
}

}  // namespace nodes

Constants with_folded_dequantize(const frontend::Graph& g, const Constants& constants) {
  Constants out = constants;
  for (const frontend::Node& n : g.nodes) {
    if (n.op != "DequantizeLinear" || !n.domain.empty()) continue;
    auto x = out.find(n.inputs.at(0));
    if (x == out.end() || x->second.i64.empty()) continue;
    const frontend::ConstantValue& v = x->second;
    auto s = out.find(n.inputs.size() > 1 ? n.inputs[1] : "");
    if (s == out.end() || s->second.f32.empty())
      throw nodes::unsupported(n, "a scale that is not a float32 constant");
    const std::vector<float>& scale = s->second.f32;
    std::vector<int64_t> zero(scale.size(), 0);
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      auto z = out.find(n.inputs[2]);
      if (z == out.end() || z->second.i64.size() != scale.size())
        throw nodes::unsupported(n, "a zero point that is no constant of the scale's extent");
      zero = z->second.i64;
    }
    // Per axis: element i's channel is its index along `axis` (inner = the extent after it).
    int64_t inner = static_cast<int64_t>(v.i64.size()), channels = 1;
    if (scale.size() > 1) {
      int64_t axis = n.int_or("axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(v.shape.size());
      if (axis < 0 || axis >= static_cast<int64_t>(v.shape.size()) ||
          v.shape[static_cast<size_t>(axis)] != static_cast<int64_t>(scale.size()))
        throw nodes::unsupported(n, "a scale that does not match its axis");
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

}  // namespace ktune::deploy
