// sink_squeezes(): after lift_1d_windows each lifted conv or pool is wrapped in its own Squeeze
// and Unsqueeze, so the elementwise nodes between two of them (a bias Add, LeakyRelu, Max) run on
// [N, C, L] and a model build converts out of the channel-blocked layout and back around each.
// This pass moves each Squeeze of axis 2 below the elementwise nodes reading it (they then run on
// [N, C, 1, L], where a bias fuses into the conv and the rest stay blocked) and drops an Unsqueeze
// that undoes a Squeeze.
#include <algorithm>
#include <map>

#include "frontend/graph_passes.h"
#include "frontend/operators.h"

namespace ktune::frontend {
namespace {

std::vector<int64_t> with_row(std::vector<int64_t> nlc) {
  nlc.insert(nlc.begin() + 2, 1);
  return nlc;
}

}  // namespace

bool drops_row(const Graph& g, const Node& squeeze) {
  if (squeeze.op != "Squeeze" || !squeeze.domain.empty() || squeeze.outputs.size() != 1)
    return false;
  const auto in = g.shape(squeeze.inputs.at(0));
  const auto out = g.shape(squeeze.outputs[0]);
  return in && out && in->size() == 4 && (*in)[2] == 1 && out->size() == 3 && with_row(*out) == *in;
}

void sink_squeezes(Model& model) {
  Graph& g = model.graph;
  std::map<std::string, std::string> row_of;   // [N, C, L] tensor -> the [N, C, 1, L] one
  std::map<std::string, std::string> renamed;  // an Unsqueeze's output -> the tensor it restores
  std::vector<Node> nodes;
  int counter = 0;
  auto squeeze_after = [&](const std::string& from, const std::string& to, const Node& like) {
    Node s;
    s.op = "Squeeze";
    s.name = like.name + "/squeeze";
    s.inputs = {from};
    s.outputs = {to};
    if (g.opset >= 13) {
      const std::string axes = like.name + "/squeeze@axes";
      g.constants.insert(axes);
      g.shapes[axes] = {1};
      g.types[axes] = "int64";
      model.constants[axes] = ConstantValue{{1}, {}, {2}};
      s.inputs.push_back(axes);
    } else {
      s.attrs["axes"] = Attribute{{2}, {}, {}, {}};
    }
    return s;
  };
  for (Node& n : g.nodes) {
    for (std::string& in : n.inputs)
      if (auto r = renamed.find(in); r != renamed.end()) in = r->second;
    if (drops_row(g, n)) {
      row_of[n.outputs[0]] = n.inputs[0];
      nodes.push_back(std::move(n));
      continue;
    }
    if (n.op == "Unsqueeze" && n.domain.empty() && n.outputs.size() == 1 &&
        row_of.count(n.inputs.at(0)) && g.shape(n.outputs[0]) &&
        g.shape(row_of[n.inputs[0]]) == g.shape(n.outputs[0]) &&
        std::find(g.outputs.begin(), g.outputs.end(), n.outputs[0]) == g.outputs.end()) {
      renamed[n.outputs[0]] = row_of[n.inputs[0]];
      continue;
    }
    // An elementwise node whose tensor operands all have a [N, C, 1, L] form; a constant operand
    // gets a row axis too where broadcasting aligns it with C (rank 2 and up).
    const bool elementwise = n.domain.empty() && n.outputs.size() == 1 && !n.inputs.empty() &&
                             (in_family(n.op, OpFamily::kUnary) ||
                              (in_family(n.op, OpFamily::kBinary) && n.inputs.size() == 2));
    const auto out = elementwise ? g.shape(n.outputs[0]) : std::nullopt;
    bool sinks = out && out->size() == 3;
    bool reads_row = false;
    const size_t operands =
        in_family(n.op, OpFamily::kUnary) ? 1 : 2;  // Clip's bounds stay as they are
    for (size_t i = 0; sinks && i < operands; ++i) {
      const std::string& in = n.inputs[i];
      if (row_of.count(in)) {
        reads_row = true;
      } else {
        const auto s = g.shape(in);
        sinks = g.constants.count(in) && model.constants.count(in) && s && s->size() <= 3;
      }
    }
    if (!sinks || !reads_row) {
      nodes.push_back(std::move(n));
      continue;
    }
    for (size_t i = 0; i < operands; ++i) {
      std::string& in = n.inputs[i];
      if (row_of.count(in)) {
        in = row_of[in];
        continue;
      }
      const std::vector<int64_t> s = *g.shape(in);
      if (s.size() < 2) continue;  // aligned with L alone
      ConstantValue c = model.constants.at(in);
      c.shape.insert(c.shape.end() - 1, 1);
      const std::string name = in + "@row" + std::to_string(counter++);
      g.constants.insert(name);
      g.shapes[name] = c.shape;
      g.types[name] = g.type(in);
      model.constants[name] = std::move(c);
      in = name;
    }
    const std::string flat = n.outputs[0], row = flat + "@row";
    g.shapes[row] = with_row(*out);
    g.types[row] = g.type(flat);
    n.outputs[0] = row;
    row_of[flat] = row;
    Node s = squeeze_after(row, flat, n);
    nodes.push_back(std::move(n));
    nodes.push_back(std::move(s));
  }
  g.nodes = std::move(nodes);
  remove_dead_nodes(model);  // the Squeezes no node reads any more
}

}  // namespace ktune::frontend
