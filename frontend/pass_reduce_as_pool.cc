// reduce_as_global_pool(): a ReduceMean or ReduceMax over every spatial axis of [N, C, H, W] or
// [N, C, L] becomes GlobalAveragePool or GlobalMaxPool, then a Flatten (keepdims 0) or a Squeeze
// of the added row (a 3-D input, keepdims 1). tf2onnx and paddle2onnx write global pooling this
// way (Keras' GlobalAveragePooling1D/2D, paddle's adaptive pool to 1); as a reduction it runs as
// a generated kernel on the plain layout, after a layout step out of the channel-blocked one,
// while the pool template reads the blocked layout its producer wrote. The two ReduceMeans of a
// LayerNorm over [N, T, C] (paddle2onnx's transformer blocks) reduce the same last axis and stay:
// the LayerNorm is one kernel.
#include <algorithm>
#include <map>
#include <set>

#include "frontend/graph_passes.h"
#include "frontend/layer_norm.h"
#include "frontend/op_params.h"
#include "support/error.h"

namespace ktune::frontend {
namespace {

Node make(const std::string& op, const std::string& name, const std::string& in,
          const std::string& out) {
  Node n;
  n.op = op;
  n.name = name;
  n.inputs = {in};
  n.outputs = {out};
  return n;
}

}  // namespace

std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n) {
  const auto x = n.inputs.empty() ? std::nullopt : g.shape(n.inputs[0]);
  if (!x) return std::nullopt;
  std::vector<int64_t> axes;
  try {
    axes = read_axes(n, lookup_in(g));
  } catch (const Error&) {
    return std::nullopt;  // axes that are no constant
  }
  const auto rank = static_cast<int64_t>(x->size());
  if (axes.empty() && n.int_or("noop_with_empty_axes", 0) != 0) return axes;
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

void reduce_as_global_pool(Model& model) {
  Graph& g = model.graph;
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs) producer[o] = i;
  std::map<std::string, int> readers = reader_counts(g);

  std::set<size_t> in_layer_norm;
  for (const LayerNormGroup& ln : find_layer_norms(g))
    in_layer_norm.insert(ln.nodes.begin(), ln.nodes.end());
  // For each reduction rewritten, the nodes that replace it; the row Squeezes they bypass and that
  // nothing else reads go.
  std::map<size_t, std::vector<Node>> replaced;
  std::set<size_t> dropped;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!n.domain.empty() || (n.op != "ReduceMean" && n.op != "ReduceMax") ||
        n.outputs.size() != 1 || g.type(n.inputs.at(0)) != "float32" || in_layer_norm.count(i))
      continue;
    const auto x = g.shape(n.inputs[0]);
    const auto axes = reduce_axes(g, n);
    if (!x || !axes || (x->size() != 3 && x->size() != 4)) continue;
    std::vector<int64_t> spatial;
    for (int64_t d = 2; d < static_cast<int64_t>(x->size()); ++d) spatial.push_back(d);
    if (*axes != spatial) continue;

    const std::string& y = n.outputs[0];
    const bool keep = n.int_or("keepdims", 1) != 0;
    const std::string pooled = keep && x->size() == 4 ? y : y + "@pool";
    std::vector<Node> nodes;
    // The 4-D tensor the pool reads: the input, the tensor a row Squeeze made the input from, or
    // an Unsqueeze of the row.
    std::string rows = n.inputs[0];
    if (x->size() == 3) {
      auto p = producer.find(rows);
      const Node* squeeze = p == producer.end() ? nullptr : &g.nodes[p->second];
      if (squeeze && drops_row(g, *squeeze)) {
        rows = squeeze->inputs[0];
        if (readers[n.inputs[0]] == 1) dropped.insert(p->second);
      } else {
        rows = n.inputs[0] + "@rows";
        g.shapes[rows] = {(*x)[0], (*x)[1], 1, (*x)[2]};
        g.types[rows] = "float32";
        nodes.push_back(make("Unsqueeze", n.name + "/unsqueeze", n.inputs[0], rows));
        nodes.back().attrs["axes"] = ints_attr({2});
      }
    }
    const std::string op = n.op == "ReduceMean" ? "GlobalAveragePool" : "GlobalMaxPool";
    nodes.push_back(make(op, n.name, rows, pooled));
    g.shapes[pooled] = {(*x)[0], (*x)[1], 1, 1};
    g.types[pooled] = "float32";
    if (!keep) {
      nodes.push_back(make("Flatten", n.name + "/flatten", pooled, y));
      nodes.back().attrs["axis"] = ints_attr({1});
    } else if (x->size() == 3) {
      nodes.push_back(make("Squeeze", n.name + "/squeeze", pooled, y));
      nodes.back().attrs["axes"] = ints_attr({3});
    }
    replaced[i] = std::move(nodes);
  }

  std::vector<Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (dropped.count(i)) continue;
    auto r = replaced.find(i);
    if (r == replaced.end()) {
      nodes.push_back(std::move(g.nodes[i]));
      continue;
    }
    for (Node& n : r->second) nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
}

}  // namespace ktune::frontend
