// inline_constant_if(): an If on a known condition becomes the nodes of the branch it takes.
#include <map>

#include "frontend/graph_passes.h"

namespace ktune::frontend {

void inline_constant_if(Model& model) {
  Graph& g = model.graph;
  std::vector<Node> nodes;
  for (Node& n : g.nodes) {
    auto cond = n.op == "If" && n.domain.empty() && n.inputs.size() == 1
                    ? model.constants.find(n.inputs[0])
                    : model.constants.end();
    const bool known = cond != model.constants.end() && cond->second.i64.size() == 1;
    const Branch* taken =
        known ? n.branch(cond->second.i64[0] ? "then_branch" : "else_branch") : nullptr;
    if (!taken || taken->outputs.size() != n.outputs.size()) {
      nodes.push_back(std::move(n));
      continue;
    }
    // The branch's outputs take the If's names; one the branch does not compute (an outer tensor
    // or a constant) is passed on by an Identity, which remove_identities drops.
    std::map<std::string, std::string> rename;
    for (size_t k = 0; k < n.outputs.size(); ++k) rename[taken->outputs[k]] = n.outputs[k];
    std::map<std::string, bool> computed;
    for (Node inner : taken->nodes) {
      for (std::string& t : inner.inputs)
        if (auto r = rename.find(t); r != rename.end() && computed[t]) t = r->second;
      for (std::string& t : inner.outputs)
        if (auto r = rename.find(t); r != rename.end()) {
          computed[t] = true;
          t = r->second;
        }
      nodes.push_back(std::move(inner));
    }
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (!computed[taken->outputs[k]]) {
        Node pass;
        pass.op = "Identity";
        pass.name = n.name + "/" + taken->name + "/" + std::to_string(k);
        pass.inputs = {taken->outputs[k]};
        pass.outputs = {n.outputs[k]};
        nodes.push_back(std::move(pass));
      }
  }
  g.nodes = std::move(nodes);
}

}  // namespace ktune::frontend
