// Scaled softmaxes: the pattern matcher over a Graph's nodes.
#include "frontend/scaled_softmax.h"

#include <cmath>
#include <map>
#include <optional>

namespace ktune::frontend {

std::vector<ScaledSoftmax> find_scaled_softmaxes(const Graph& g) {
  std::map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& in : g.nodes[i].inputs)
      if (!in.empty()) readers[in].push_back(i);
  for (const std::string& out : g.outputs) readers[out].push_back(g.nodes.size());
  const auto scalar = [&](const std::string& tensor) -> std::optional<double> {
    auto v = g.values.find(tensor);
    if (v == g.values.end() || v->second.size() != 1) return std::nullopt;
    return v->second[0];
  };
  std::vector<ScaledSoftmax> found;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if ((n.op != "Mul" && n.op != "Div") || !n.domain.empty() || n.inputs.size() != 2) continue;
    const auto& r = readers[n.outputs.at(0)];
    if (r.size() != 1 || r[0] >= g.nodes.size()) continue;
    const Node& s = g.nodes[r[0]];
    if ((s.op != "Softmax" && s.op != "LogSoftmax") || !s.domain.empty()) continue;
    ScaledSoftmax m{i, r[0], n.inputs[0], 1};
    if (const auto c = scalar(n.inputs[1])) {
      m.scale = n.op == "Mul" ? *c : 1 / *c;
    } else if (const auto c0 = scalar(n.inputs[0]); c0 && n.op == "Mul") {
      m.input = n.inputs[1];
      m.scale = *c0;
    } else {
      continue;
    }
    // The scores keep their shape: a constant of one element broadcasts without adding axes only
    // when its rank is at most theirs.
    const auto in = g.shape(m.input), out = g.shape(n.outputs[0]);
    if (!std::isfinite(m.scale) || g.type(m.input) != "float32" || !in || !out || *in != *out)
      continue;
    found.push_back(m);
  }
  return found;
}

}  // namespace ktune::frontend
