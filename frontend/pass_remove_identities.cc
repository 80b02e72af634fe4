// remove_identities(): nodes that pass their input through unchanged are dropped and their readers
// rewired to the input.
#include <map>
#include <set>

#include "frontend/graph_passes.h"

namespace ktune::frontend {
namespace {

// Whether `n` computes nothing at inference: Identity, a Dropout whose mask nobody reads (the
// mask of an inference-mode Dropout is all ones, its output the input), a Cast to its input's type.
bool passes_through(const Node& n, const Graph& g, const std::set<std::string>& read) {
  if (!n.domain.empty() || n.inputs.empty() || n.inputs[0].empty() || n.outputs.empty())
    return false;
  if (n.op == "Identity") return true;
  if (n.op == "Dropout")
    // From opset 12 a training_mode input may turn it on; exporters write it off or leave it out.
    return (n.outputs.size() < 2 || !read.count(n.outputs[1])) &&
           (n.inputs.size() < 3 || n.inputs[2].empty() ||
            (g.values.count(n.inputs[2]) && g.values.at(n.inputs[2]) == std::vector<double>{0}));
  if (n.op == "Cast") {
    const std::string from = g.type(n.inputs[0]);
    return !from.empty() && from == g.type(n.outputs[0]);
  }
  return false;
}

}  // namespace

void remove_identities(Model& model) {
  Graph& g = model.graph;
  const std::set<std::string> outputs(g.outputs.begin(), g.outputs.end());
  std::set<std::string> read;
  for (const Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  std::map<std::string, std::string> renamed;  // output -> the tensor it passes through
  const auto source = [&](const std::string& t) {
    auto it = renamed.find(t);
    return it == renamed.end() ? t : it->second;
  };
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    for (std::string& in : n.inputs) in = source(in);
    if (passes_through(n, g, read)) {
      // A graph output keeps its node, as an Identity (a view in a model build): the model must
      // define it.
      if (outputs.count(n.outputs[0])) {
        n.op = "Identity";
        n.attrs.clear();
        n.onnx.clear();
        n.inputs.resize(1);
        n.outputs.resize(1);
      } else {
        renamed[n.outputs[0]] = n.inputs[0];
        continue;
      }
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
}

}  // namespace ktune::frontend
