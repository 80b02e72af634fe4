// move_scale_after_matmul(): attention scales its scores by 1/sqrt(d), and exporters write the
// scaling where the model's code has it. torch and timm scale the product, which the Softmax
// kernel absorbs (scaled_softmax.h); paddle's text recognizers scale q before the product,
// Mul(q, c) -> MatMul(., k^T) -> Softmax, a generated pass over q of its own. A product is linear
// in each operand, so (c q) k^T = c (q k^T): this pass moves a scalar Mul or Div of an operand
// below the product when only a Softmax reads the product, where it joins the Softmax's kernel.
#include <map>
#include <optional>

#include "frontend/graph_passes.h"

namespace ktune::frontend {
namespace {

// The one-element float constant `tensor`, or nullopt.
std::optional<double> scalar_constant(const Graph& g, const std::string& tensor) {
  const auto v = g.values.find(tensor);
  if (!g.constants.count(tensor) || v == g.values.end() || v->second.size() != 1 ||
      g.type(tensor) != "float32")
    return std::nullopt;
  return v->second.front();
}

bool is_product(const Node& n) {
  return (n.op == "MatMul" && n.domain.empty()) ||
         (n.op == "FusedMatMul" && n.domain == "com.microsoft");
}

}  // namespace

void move_scale_after_matmul(Model& model) {
  Graph& g = model.graph;
  const std::map<std::string, int> readers = reader_counts(g);
  std::map<std::string, size_t> producer, softmax_reader;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const std::string& out : g.nodes[i].outputs) producer[out] = i;
    const Node& n = g.nodes[i];
    if (n.op == "Softmax" && n.domain.empty() && !n.inputs.empty()) softmax_reader[n.inputs[0]] = i;
  }
  std::vector<bool> moved(g.nodes.size(), false);
  std::map<size_t, Node> after;  // product node -> the scaling that now follows it
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& m = g.nodes[i];
    if (!is_product(m) || m.inputs.size() != 2 || m.outputs.size() != 1) continue;
    const std::string& out = m.outputs[0];
    if (!softmax_reader.count(out) || readers.at(out) != 1 || g.type(out) != "float32") continue;
    for (std::string& operand : m.inputs) {
      const auto p = producer.find(operand);
      if (p == producer.end() || moved[p->second] || readers.at(operand) != 1) continue;
      const Node& s = g.nodes[p->second];
      if (!s.domain.empty() || (s.op != "Mul" && s.op != "Div") || s.inputs.size() != 2) continue;
      // Mul by the constant on either side; Div only by it.
      const bool first_const = s.op == "Mul" && scalar_constant(g, s.inputs[0]).has_value();
      if (!first_const && !scalar_constant(g, s.inputs[1])) continue;
      const std::string& data = first_const ? s.inputs[1] : s.inputs[0];
      const std::string& scale = first_const ? s.inputs[0] : s.inputs[1];
      if (g.shape(data) != g.shape(operand)) continue;  // a broadcast changes the operand
      Node scaling = s;
      scaling.name = s.name;
      scaling.onnx.clear();
      const std::string unscaled = out + "@unscaled";
      scaling.inputs = {unscaled, scale};
      scaling.outputs = {out};
      g.shapes[unscaled] = g.shapes[out];
      g.types[unscaled] = "float32";
      m.outputs[0] = unscaled;
      m.onnx.clear();
      operand = data;
      moved[p->second] = true;
      after[i] = std::move(scaling);
      break;
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (moved[i]) continue;
    kept.push_back(std::move(g.nodes[i]));
    if (auto a = after.find(i); a != after.end()) kept.push_back(std::move(a->second));
  }
  g.nodes = std::move(kept);
}

}  // namespace ktune::frontend
