// LayerNorm groups: the pattern matcher over a Graph's nodes.
#include "frontend/layer_norm.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "frontend/graph_passes.h"

namespace ktune::frontend {
namespace {

class LayerNormMatcher {
 public:
  explicit LayerNormMatcher(const Graph& g) : g_(g) {
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (const auto& in : g_.nodes[i].inputs)
        if (!in.empty()) consumers_[in].push_back(i);
    outputs_.insert(g_.outputs.begin(), g_.outputs.end());
  }

  std::vector<LayerNormGroup> run() {
    std::vector<LayerNormGroup> groups;
    std::set<size_t> taken;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (taken.count(i) || !g_.nodes[i].domain.empty()) continue;
      std::optional<LayerNormGroup> m;
      if (g_.nodes[i].op == "LayerNormalization") m = whole(i);
      if (g_.nodes[i].op == "ReduceMean") m = decomposed(i);
      if (!m) continue;
      bool free = true;
      for (size_t n : m->nodes) free = free && !taken.count(n);
      if (!free) continue;
      taken.insert(m->nodes.begin(), m->nodes.end());
      groups.push_back(std::move(*m));
    }
    return groups;
  }

 private:
  // The node that alone reads `tensor` (which is no graph output), when it is `op`.
  std::optional<size_t> only_reader(const std::string& tensor, const char* op) const {
    auto it = consumers_.find(tensor);
    if (it == consumers_.end() || it->second.size() != 1 || outputs_.count(tensor))
      return std::nullopt;
    const Node& n = g_.nodes[it->second.front()];
    if (n.op != op || !n.domain.empty()) return std::nullopt;
    return it->second.front();
  }

  std::optional<double> scalar(const std::string& tensor) const {
    auto v = g_.values.find(tensor);
    if (v == g_.values.end() || v->second.size() != 1) return std::nullopt;
    return v->second[0];
  }

  // The operand of binary node `n` other than `x`.
  std::optional<std::string> other(size_t n, const std::string& x) const {
    const Node& node = g_.nodes[n];
    if (node.inputs.size() != 2) return std::nullopt;
    if (node.inputs[0] == x) return node.inputs[1];
    if (node.inputs[1] == x) return node.inputs[0];
    return std::nullopt;
  }

  // A constant of shape [last] (or with leading ones).
  bool per_last_axis(const std::string& tensor, int64_t last) const {
    const auto s = g_.shape(tensor);
    if (!g_.constants.count(tensor) || !s || s->empty() || s->back() != last) return false;
    for (size_t d = 0; d + 1 < s->size(); ++d)
      if ((*s)[d] != 1) return false;
    return true;
  }

  // A ReduceMean over the last axis of `x`, keeping it.
  bool mean_over_last(size_t n, const std::string& x) const {
    const Node& node = g_.nodes[n];
    const auto shape = g_.shape(x);
    if (!shape || shape->empty() || node.inputs.empty() || node.inputs[0] != x ||
        node.int_or("keepdims", 1) != 1)
      return false;
    const auto axes = reduce_axes(g_, node);
    const int64_t rank = static_cast<int64_t>(shape->size());
    return axes && *axes == std::vector<int64_t>{rank - 1};
  }

  std::optional<LayerNormGroup> whole(size_t i) const {
    const Node& n = g_.nodes[i];
    const auto shape = g_.shape(n.inputs.at(0));
    if (!shape || shape->empty() || n.inputs.size() < 2) return std::nullopt;
    const int64_t axis = n.int_or("axis", -1), rank = static_cast<int64_t>(shape->size());
    if (axis != -1 && axis != rank - 1) return std::nullopt;
    for (size_t o = 1; o < n.outputs.size(); ++o)
      if (!n.outputs[o].empty() && (consumers_.count(n.outputs[o]) || outputs_.count(n.outputs[o])))
        return std::nullopt;
    LayerNormGroup l;
    l.nodes = {i};
    l.input = n.inputs[0];
    l.output = n.outputs.at(0);
    l.gamma = n.inputs[1];
    l.beta = n.inputs.size() > 2 ? n.inputs[2] : "";
    l.epsilon = n.float_or("epsilon", 1e-5);
    if (!per_last_axis(l.gamma, shape->back()) ||
        (!l.beta.empty() && !per_last_axis(l.beta, shape->back())))
      return std::nullopt;
    return l;
  }

  std::optional<LayerNormGroup> decomposed(size_t mean) const {
    const std::string& x = g_.nodes[mean].inputs.at(0);
    if (!mean_over_last(mean, x)) return std::nullopt;
    const int64_t last = g_.shape(x)->back();
    const auto sub = only_reader(g_.nodes[mean].outputs.at(0), "Sub");
    if (!sub || g_.nodes[*sub].inputs.at(0) != x ||
        g_.nodes[*sub].inputs.at(1) != g_.nodes[mean].outputs[0])
      return std::nullopt;
    const std::string& d = g_.nodes[*sub].outputs.at(0);
    auto readers = consumers_.find(d);
    if (readers == consumers_.end() || readers->second.size() != 2 || outputs_.count(d))
      return std::nullopt;
    // d squared (Pow(d, 2) or d * d) and d divided by the deviation.
    std::optional<size_t> square, divide;
    for (size_t r : readers->second) {
      const Node& n = g_.nodes[r];
      if (n.op == "Pow" && n.inputs.size() == 2 && n.inputs[0] == d && scalar(n.inputs[1]) == 2.0)
        square = r;
      else if (n.op == "Mul" && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] == d)
        square = r;
      else if (n.op == "Div" && n.inputs.size() == 2 && n.inputs[0] == d)
        divide = r;
    }
    if (!square || !divide) return std::nullopt;
    const auto var = only_reader(g_.nodes[*square].outputs.at(0), "ReduceMean");
    if (!var || !mean_over_last(*var, g_.nodes[*square].outputs[0])) return std::nullopt;
    const auto add = only_reader(g_.nodes[*var].outputs.at(0), "Add");
    const auto eps = add ? other(*add, g_.nodes[*var].outputs[0]) : std::nullopt;
    if (!eps || !scalar(*eps)) return std::nullopt;
    const auto root = only_reader(g_.nodes[*add].outputs.at(0), "Sqrt");
    if (!root || g_.nodes[*divide].inputs[1] != g_.nodes[*root].outputs.at(0) ||
        only_reader(g_.nodes[*root].outputs[0], "Div") != divide)
      return std::nullopt;
    LayerNormGroup l;
    l.input = x;
    l.epsilon = *scalar(*eps);
    l.nodes = {mean, *sub, *square, *var, *add, *root, *divide};
    l.output = g_.nodes[*divide].outputs.at(0);
    if (const auto mul = only_reader(l.output, "Mul")) {
      const auto gamma = other(*mul, l.output);
      if (gamma && per_last_axis(*gamma, last)) {
        l.gamma = *gamma;
        l.nodes.push_back(*mul);
        l.output = g_.nodes[*mul].outputs.at(0);
      }
    }
    if (const auto plus = only_reader(l.output, "Add")) {
      const auto beta = other(*plus, l.output);
      if (beta && per_last_axis(*beta, last)) {
        l.beta = *beta;
        l.nodes.push_back(*plus);
        l.output = g_.nodes[*plus].outputs.at(0);
      }
    }
    // A group ends where its output shape is the input's (no broadcast past it).
    if (g_.shape(l.output) != g_.shape(x)) return std::nullopt;
    std::sort(l.nodes.begin(), l.nodes.end());
    return l;
  }

  const Graph& g_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::set<std::string> outputs_;
};

}  // namespace

std::vector<LayerNormGroup> find_layer_norms(const Graph& graph) {
  return LayerNormMatcher(graph).run();
}

}  // namespace ktune::frontend
