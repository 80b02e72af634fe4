// remove_dead_nodes(): a backward walk keeping the nodes that something downstream reads.
#include <set>

#include "frontend/graph_passes.h"

namespace ktune::frontend {

void remove_dead_nodes(Model& model) {
  Graph& g = model.graph;
  std::set<std::string> live(g.outputs.begin(), g.outputs.end());
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    for (const std::string& out : n.outputs) keep[i] = keep[i] || live.count(out) > 0;
    if (!keep[i]) continue;
    live.insert(n.inputs.begin(), n.inputs.end());
    // A branch reads the enclosing graph's tensors too.
    for (const Branch& b : n.branches)
      for (const Node& inner : b.nodes) live.insert(inner.inputs.begin(), inner.inputs.end());
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

}  // namespace ktune::frontend
