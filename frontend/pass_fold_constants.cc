// fold_constants(): a walk in graph order; a node whose inputs are all known values (or a Shape of
// a tensor of known shape) is evaluated once and its output becomes a constant.
#include "frontend/constant_eval.h"
#include "frontend/graph_passes.h"

namespace ktune::frontend {

void fold_constants(Model& model) {
  Graph& g = model.graph;
  std::vector<Node> kept;
  const std::set<std::string> outputs(g.outputs.begin(), g.outputs.end());
  for (Node& n : g.nodes) {
    // A Constant's value is already in Model::constants (read_onnx); one of a type that it does
    // not hold (a string tensor) keeps its node, and whoever reads it says so.
    if (n.op == "Constant" && n.domain.empty() && n.outputs.size() == 1 &&
        model.constants.count(n.outputs[0]))
      continue;
    std::vector<const ConstantValue*> inputs;
    for (const std::string& in : n.inputs) {
      auto c = model.constants.find(in);
      inputs.push_back(c == model.constants.end() ? nullptr : &c->second);
    }
    // A graph output stays computed by its node: the model returns an activation.
    const bool is_output = n.outputs.size() == 1 && outputs.count(n.outputs[0]);
    std::optional<std::vector<ConstantValue>> values =
        is_output ? std::nullopt : evaluate_constant(n, inputs, g);
    if (!values) {
      kept.push_back(std::move(n));
      continue;
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const std::string& out = n.outputs[k];
      ConstantValue& v = (*values)[k];
      g.constants.insert(out);
      g.shapes[out] = v.shape;
      if (static_cast<int64_t>(v.f32.size() + v.i64.size()) <= Graph::kMaxValueElements) {
        std::vector<double>& small = g.values[out];
        small.assign(v.f32.begin(), v.f32.end());
        small.insert(small.end(), v.i64.begin(), v.i64.end());
      }
      model.constants[out] = std::move(v);
    }
  }
  g.nodes = std::move(kept);
}

}  // namespace ktune::frontend
