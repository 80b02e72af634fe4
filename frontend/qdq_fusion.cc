// find_quantized_convs(): matches DequantizeLinear -> Conv [-> Relu] -> QuantizeLinear around each
// Conv, checking the types, scales and zero points the int8 kernel computes with.
#include "frontend/qdq_fusion.h"

#include <optional>
#include <set>

namespace ktune::frontend {
namespace {

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), outputs_(g.outputs.begin(), g.outputs.end()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const std::string& in : g.nodes[i].inputs)
        if (!in.empty()) consumers_[in].push_back(i);
      for (const std::string& out : g.nodes[i].outputs) producer_[out] = i;
    }
  }

  QuantizedConvs run() const {
    QuantizedConvs found;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (n.op != "Conv" || !n.domain.empty() || !dequantize(n.inputs.at(0))) continue;
      QuantizedConv q;
      std::string why = match(i, q);
      if (why.empty())
        found.convs.push_back(std::move(q));
      else
        found.not_fused[i] = why;
    }
    return found;
  }

 private:
  // The DequantizeLinear node that computes `tensor`, if one does.
  std::optional<size_t> dequantize(const std::string& tensor) const {
    auto p = producer_.find(tensor);
    if (p == producer_.end()) return std::nullopt;
    const Node& n = g_.nodes[p->second];
    if (n.op != "DequantizeLinear" || !n.domain.empty()) return std::nullopt;
    return p->second;
  }

  // The only reader of `tensor`, when it has one and is no graph output.
  std::optional<size_t> only_reader(const std::string& tensor) const {
    auto c = consumers_.find(tensor);
    if (outputs_.count(tensor) || c == consumers_.end() || c->second.size() != 1)
      return std::nullopt;
    return c->second.front();
  }

  std::string input(const Node& n, size_t k) const {
    return n.inputs.size() > k ? n.inputs[k] : std::string();
  }

  // True when `tensor` is one known value (a per-tensor scale or zero point).
  bool scalar(const std::string& tensor) const {
    auto v = g_.values.find(tensor);
    return g_.constants.count(tensor) && v != g_.values.end() && v->second.size() == 1;
  }

  // "" when the pattern holds (and fills q), else why not.
  std::string match(size_t i, QuantizedConv& q) const {
    const Node& conv = g_.nodes[i];
    q.conv = i;
    const Node& dx = g_.nodes[*dequantize(conv.inputs[0])];
    q.data = dx.inputs.at(0);
    q.data_scale = input(dx, 1);
    q.data_zero_point = input(dx, 2);
    if (g_.type(q.data) != "uint8") return "the data is " + g_.type(q.data) + ", not uint8";
    if (!scalar(q.data_scale) || (!q.data_zero_point.empty() && !scalar(q.data_zero_point)))
      return "the data's scale or zero point is not one constant";

    const auto dw = dequantize(conv.inputs.at(1));
    if (!dw) return "the weights are not dequantized";
    const Node& w = g_.nodes[*dw];
    q.weight = w.inputs.at(0);
    q.weight_scale = input(w, 1);
    q.weight_zero_point = input(w, 2);
    const auto wshape = g_.shape(q.weight);
    if (!g_.constants.count(q.weight) || g_.type(q.weight) != "int8" || !wshape ||
        wshape->size() != 4)
      return "the weights are not a 4-D int8 constant";
    const int64_t K = (*wshape)[0];
    const auto sshape = g_.shape(q.weight_scale);
    int64_t scales = 1;
    for (int64_t d : sshape.value_or(std::vector<int64_t>{})) scales *= d;
    if (!g_.constants.count(q.weight_scale) || !sshape ||
        !(scales == 1 || (scales == K && w.int_or("axis", 1) == 0)))
      return "the weights' scale is neither one value nor one per output channel (axis 0)";
    // Zero points past Graph::kMaxValueElements are checked by the model build.
    if (auto z = g_.values.find(q.weight_zero_point); z != g_.values.end())
      for (double v : z->second)
        if (v != 0) return "the weights' zero point is not 0";

    if (!input(conv, 2).empty()) {
      const auto db = dequantize(conv.inputs[2]);
      if (!db) return "the bias is not a dequantized int32 constant";
      q.bias = g_.nodes[*db].inputs.at(0);
      if (!g_.constants.count(q.bias) || g_.type(q.bias) != "int32")
        return "the bias is not a dequantized int32 constant";
    }
    if (conv.int_or("group", 1) != 1) return "a grouped conv (the int8 template has no groups)";
    for (int64_t d : conv.ints("dilations", {1, 1}))
      if (d != 1) return "a dilated conv (the int8 template has no dilation)";
    const auto x = g_.shape(conv.inputs[0]);
    if (!x || x->size() != 4 || (*x)[1] % 4 != 0)
      return "input channels not a multiple of 4 (the int8 template's 4-channel groups)";

    // Conv [-> Relu] -> QuantizeLinear, each the only reader of what precedes it.
    auto next = only_reader(conv.outputs.at(0));
    if (next && g_.nodes[*next].op == "Relu") {
      q.relu = true;
      q.epilogue.push_back(*next);
      next = only_reader(g_.nodes[*next].outputs.at(0));
    }
    if (!next || g_.nodes[*next].op != "QuantizeLinear")
      return "its output is not quantized by one QuantizeLinear (it runs in float32)";
    const Node& qn = g_.nodes[*next];
    q.epilogue.push_back(*next);
    q.out_scale = input(qn, 1);
    q.out_zero_point = input(qn, 2);
    q.output = qn.outputs.at(0);
    if (g_.type(q.output) != "uint8") return "the output is quantized to " + g_.type(q.output);
    if (!scalar(q.out_scale) || (!q.out_zero_point.empty() && !scalar(q.out_zero_point)))
      return "the output's scale or zero point is not one constant";

    // The weights' and bias' DequantizeLinear nodes are the kernel's; the data's too when no other
    // node reads the float data.
    for (const std::string& t : {conv.inputs[0], conv.inputs[1], input(conv, 2)})
      if (!t.empty() && only_reader(t)) q.prologue.push_back(*dequantize(t));
    return "";
  }

  const Graph& g_;
  std::set<std::string> outputs_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::map<std::string, size_t> producer_;
};

}  // namespace

QuantizedConvs find_quantized_convs(const Graph& g) { return Matcher(g).run(); }

}  // namespace ktune::frontend
