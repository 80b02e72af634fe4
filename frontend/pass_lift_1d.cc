// lift_1d_windows(): a 1-D Conv, ConvTranspose, MaxPool or AveragePool ([N, C, L]) becomes the
// 2-D one on [N, C, 1, L] between an Unsqueeze and a Squeeze (views in a model build), so that the
// 2-D templates, conv_transpose_as_conv and generated pools compute it. A window of one row at any
// row stride reads row 0 only, so the 1-D stride is taken on both axes (what the templates' single
// stride needs); the padding lies on the columns only. A ConvTranspose takes row stride 1: a
// larger one would add phases whose taps all lie past its one row.
#include "frontend/graph_passes.h"

namespace ktune::frontend {
namespace {

bool is_window(const Node& n) {
  return n.domain.empty() &&
         (n.op == "Conv" || n.op == "ConvTranspose" || n.op == "MaxPool" || n.op == "AveragePool");
}

// The 1-D padding [begin, end] of a window of `kernel` taps (dilated) at `stride` over `length`.
std::vector<int64_t> pads_1d(const Node& n, int64_t length, int64_t kernel, int64_t stride,
                             int64_t dilation) {
  const std::string auto_pad = n.text_or("auto_pad", "NOTSET");
  if (auto_pad == "VALID") return {0, 0};
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") return n.ints("pads", {0, 0});
  const int64_t total = std::max<int64_t>(
      ((length + stride - 1) / stride - 1) * stride + (kernel - 1) * dilation + 1 - length, 0);
  const int64_t begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
  return {begin, total - begin};
}

}  // namespace

void lift_1d_windows(Model& model) {
  Graph& g = model.graph;
  std::vector<Node> nodes;
  for (Node& n : g.nodes) {
    const auto x = is_window(n) ? g.shape(n.inputs.at(0)) : std::nullopt;
    const auto y = x ? g.shape(n.outputs.at(0)) : std::nullopt;
    const bool transposed = n.op == "ConvTranspose";
    const bool conv = n.op == "Conv" || transposed;
    const std::string w = conv && n.inputs.size() > 1 ? n.inputs[1] : "";
    const bool weights_known =
        !conv || (model.constants.count(w) && model.constants.at(w).shape.size() == 3);
    if (!x || !y || x->size() != 3 || y->size() != 3 || n.outputs.size() != 1 || !weights_known) {
      nodes.push_back(std::move(n));
      continue;
    }
    const int64_t kernel =
        conv ? model.constants.at(w).shape[2] : n.ints("kernel_shape", {1}).at(0);
    const int64_t stride = n.ints("strides", {1}).at(0);
    const int64_t dilation = n.ints("dilations", {1}).at(0);
    // A ConvTranspose's auto_pad and output_shape give its pads from its output's extent, which
    // conv_transpose_as_conv reads: they stay, the output_shape with its row.
    const std::vector<int64_t> pads =
        transposed ? n.ints("pads", {0, 0}) : pads_1d(n, (*x)[2], kernel, stride, dilation);
    if (pads.size() != 2) {
      nodes.push_back(std::move(n));
      continue;
    }
    const std::string in2 = n.inputs[0] + "@2d", out2 = n.outputs[0] + "@2d";
    g.shapes[in2] = {(*x)[0], (*x)[1], 1, (*x)[2]};
    g.shapes[out2] = {(*y)[0], (*y)[1], 1, (*y)[2]};
    g.types[in2] = g.type(n.inputs[0]);
    g.types[out2] = g.type(n.outputs[0]);

    Node unsqueeze;
    unsqueeze.op = "Unsqueeze";
    unsqueeze.name = n.name + "/unsqueeze";
    unsqueeze.inputs = {n.inputs[0]};
    unsqueeze.outputs = {in2};
    unsqueeze.attrs["axes"] = ints_attr({2});
    Node squeeze = unsqueeze;
    squeeze.op = "Squeeze";
    squeeze.name = n.name + "/squeeze";
    squeeze.inputs = {out2};
    squeeze.outputs = {n.outputs[0]};

    Node lifted = n;
    lifted.inputs[0] = in2;
    lifted.outputs = {out2};
    lifted.attrs["kernel_shape"] = ints_attr({1, kernel});
    lifted.attrs["strides"] = ints_attr({transposed ? 1 : stride, stride});
    if (transposed)
      lifted.attrs["output_padding"] = ints_attr({0, n.ints("output_padding", {0})[0]});
    lifted.attrs["dilations"] = ints_attr({dilation, dilation});
    lifted.attrs["pads"] = ints_attr({0, pads[0], 0, pads[1]});
    if (!transposed) lifted.attrs.erase("auto_pad");
    if (transposed && n.attrs.count("output_shape")) {
      const std::vector<int64_t> shape = n.ints("output_shape");
      lifted.attrs["output_shape"] = ints_attr({1, shape.empty() ? (*y)[2] : shape.back()});
    }
    if (conv) {
      ConstantValue w2 = model.constants.at(w);
      w2.shape.insert(w2.shape.begin() + 2, 1);
      const std::string name = w + "@2d";
      g.constants.insert(name);
      g.shapes[name] = w2.shape;
      g.types[name] = g.type(w);
      model.constants[name] = std::move(w2);
      lifted.inputs[1] = name;
    }
    nodes.push_back(std::move(unsqueeze));
    nodes.push_back(std::move(lifted));
    nodes.push_back(std::move(squeeze));
  }
  g.nodes = std::move(nodes);
}

}  // namespace ktune::frontend
