// Implements simplify_graph(): the clean-up pipeline, one pass per file, in order; and
// load_model() and graph_text().
#include <cstdint>
#include <sstream>

#include "frontend/graph_passes.h"

namespace ktune::frontend {

void simplify_graph(Model& model, const PassObserver& observe) {
  auto after = [&](const char* pass) {
    if (observe) observe(pass, model);
  };
  after("read");
  // Each round's folding can decide more shapes (an Expand of a folded shape, an If's branch),
  // which shape inference then gives the tensors after them, whose Shape nodes the next round
  // folds: rounds run until one removes no node.
  for (size_t before = SIZE_MAX; model.graph.nodes.size() < before;) {
    before = model.graph.nodes.size();
    fold_constants(model);
    after("fold_constants");
    inline_constant_if(model);
    after("inline_constant_if");
    remove_identities(model);
    after("remove_identities");
    remove_dead_nodes(model);
    after("remove_dead_nodes");
    infer_shapes(model);
    after("infer_shapes");
  }
  lift_1d_windows(model);
  after("lift_1d_windows");
  sink_squeezes(model);
  after("sink_squeezes");
  reduce_as_global_pool(model);
  after("reduce_as_global_pool");
  conv_transpose_as_conv(model);
  after("conv_transpose_as_conv");
  hoist_over_depth_to_space(model);
  after("hoist_over_depth_to_space");
  fold_transpose_into_matmul(model);
  after("fold_transpose_into_matmul");
  move_scale_after_matmul(model);
  after("move_scale_after_matmul");
  read_heads_in_place(model);
  after("read_heads_in_place");
}

std::map<std::string, int> reader_counts(const Graph& g) {
  std::map<std::string, int> readers;
  for (const Node& n : g.nodes)
    for (const std::string& in : n.inputs) ++readers[in];
  for (const std::string& out : g.outputs) ++readers[out];
  return readers;
}

Model load_model(const std::string& path, const std::vector<InputShape>& inputs,
                 const PassObserver& observe) {
  Model model = read_onnx(path, inputs);
  simplify_graph(model, observe);
  return model;
}

namespace {

std::string tensor_text(const Model& m, const std::string& t) {
  if (t.empty()) return "-";
  std::string text = t;
  auto s = m.graph.shapes.find(t);
  text += " [" + (s == m.graph.shapes.end() ? std::string("?") : shape_text(s->second)) + "]";
  if (m.graph.constants.count(t)) text += " const";
  return text;
}

}  // namespace

std::string graph_text(const Model& m) {
  std::ostringstream out;
  out << m.graph.nodes.size() << " nodes, " << m.graph.inputs.size() << " inputs, "
      << m.graph.outputs.size() << " outputs\n";
  for (const std::string& in : m.graph.inputs) out << "  input  " << tensor_text(m, in) << "\n";
  for (const Node& n : m.graph.nodes) {
    out << "  " << n.name << ": " << (n.domain.empty() ? "" : n.domain + "::") << n.op << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i)
      out << (i ? ", " : "") << tensor_text(m, n.inputs[i]);
    out << ") -> ";
    for (size_t i = 0; i < n.outputs.size(); ++i)
      out << (i ? ", " : "") << tensor_text(m, n.outputs[i]);
    out << "\n";
  }
  for (const std::string& o : m.graph.outputs) out << "  output " << tensor_text(m, o) << "\n";
  return out.str();
}

}  // namespace ktune::frontend
