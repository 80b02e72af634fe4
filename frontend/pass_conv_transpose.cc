// conv_transpose_as_conv(): a ConvTranspose whose kernel equals its stride (the 2x2 stride-2
// upsampling of segmentation and detection decoders) writes each input pixel's s x s output block
// from that pixel alone: it is a 1x1 Conv to K*s*s channels, a tuned task, followed by
// DepthToSpace (mode CRD), which moves the channels into the blocks.
#include "frontend/graph_passes.h"

namespace ktune::frontend {
namespace {

Attribute ints_attr(std::vector<int64_t> v) { return Attribute{std::move(v), {}, {}, {}}; }

bool all_zero(const std::vector<int64_t>& v) {
  for (int64_t x : v)
    if (x != 0) return false;
  return true;
}

}  // namespace

void conv_transpose_as_conv(Model& model) {
  Graph& g = model.graph;
  std::vector<Node> nodes;
  for (Node& n : g.nodes) {
    const bool candidate = n.op == "ConvTranspose" && n.domain.empty() && n.inputs.size() >= 2 &&
                           n.outputs.size() == 1 && model.constants.count(n.inputs[1]);
    const auto x = candidate ? g.shape(n.inputs[0]) : std::nullopt;
    const auto y = x ? g.shape(n.outputs[0]) : std::nullopt;
    const ConstantValue* w = y ? &model.constants.at(n.inputs[1]) : nullptr;
    const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    const ConstantValue* b =
        has_bias && model.constants.count(n.inputs[2]) ? &model.constants.at(n.inputs[2]) : nullptr;
    bool fits = w && x->size() == 4 && w->shape.size() == 4 && !w->f32.empty() &&
                n.int_or("group", 1) == 1 && (!has_bias || (b && !b->f32.empty()));
    int64_t s = 0;
    if (fits) {
      s = w->shape[2];
      fits = w->shape[3] == s && n.ints("strides", {1, 1}) == std::vector<int64_t>{s, s} &&
             all_zero(n.ints("pads", {0, 0, 0, 0})) && all_zero(n.ints("output_padding", {0, 0})) &&
             n.ints("dilations", {1, 1}) == std::vector<int64_t>{1, 1} && (*y)[2] == (*x)[2] * s &&
             (*y)[3] == (*x)[3] * s && n.text_or("auto_pad", "NOTSET") == "NOTSET";
    }
    if (!fits) {
      nodes.push_back(std::move(n));
      continue;
    }
    const int64_t C = w->shape[0], K = w->shape[1], blocks = s * s;
    // The 1x1 conv's output channel k*s*s + i*s + j is output channel k at offset (i, j) of its
    // block: W'[k*s*s + i*s + j][c] = W[c][k][i][j], its bias b[k].
    ConstantValue w1{
        {K * blocks, C, 1, 1}, std::vector<float>(static_cast<size_t>(K * blocks * C)), {}};
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t ij = 0; ij < blocks; ++ij)
          w1.f32[static_cast<size_t>((k * blocks + ij) * C + c)] =
              w->f32[static_cast<size_t>((c * K + k) * blocks + ij)];
    const std::string wname = n.inputs[1] + "@1x1";
    const std::string mid = n.outputs[0] + "@blocks";
    Node conv;
    conv.op = "Conv";
    conv.name = n.name;
    conv.inputs = {n.inputs[0], wname};
    conv.outputs = {mid};
    conv.attrs["kernel_shape"] = ints_attr({1, 1});
    if (has_bias) {
      ConstantValue b1{{K * blocks}, {}, {}};
      for (int64_t k = 0; k < K; ++k)
        for (int64_t ij = 0; ij < blocks; ++ij) b1.f32.push_back(b->f32[static_cast<size_t>(k)]);
      const std::string bname = n.inputs[2] + "@1x1";
      g.constants.insert(bname);
      g.shapes[bname] = b1.shape;
      g.types[bname] = "float32";
      model.constants[bname] = std::move(b1);
      conv.inputs.push_back(bname);
    }
    g.constants.insert(wname);
    g.shapes[wname] = w1.shape;
    g.types[wname] = "float32";
    model.constants[wname] = std::move(w1);
    g.shapes[mid] = {(*x)[0], K * blocks, (*x)[2], (*x)[3]};
    g.types[mid] = g.type(n.outputs[0]);
    Node shuffle;
    shuffle.op = "DepthToSpace";
    shuffle.name = n.name + "/depth_to_space";
    shuffle.inputs = {mid};
    shuffle.outputs = n.outputs;
    shuffle.attrs["blocksize"] = ints_attr({s});
    shuffle.attrs["mode"] = Attribute{{}, {}, "CRD", {}};
    nodes.push_back(std::move(conv));
    nodes.push_back(std::move(shuffle));
  }
  g.nodes = std::move(nodes);
}

}  // namespace ktune::frontend
