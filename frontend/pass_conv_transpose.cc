// conv_transpose_as_conv(): a ConvTranspose of stride s (the upsampling layers of segmentation and
// detection decoders) as a Conv, a tuned task, followed by DepthToSpace (mode DCR) and, where the
// transposed conv's pads crop its output, a Slice. Output pixel o = q*s + r (before the crop) sums
// input pixels q - j times weight tap j*s + r, j in [0, M), M = ceil(k/s): for each phase r that is
// an ordinary stride-1 conv of M taps (the taps flipped, the input padded by M - 1), so the s*s
// phases are one Conv to K*s*s channels, and DepthToSpace interleaves them. Unlike a conv over a
// zero-stuffed input, it computes no product with an inserted zero. The channels go phase by
// phase (DCR), so each phase's K channels are contiguous: in the channel-blocked layout an output
// block reads whole input blocks when K is a multiple of the block, else two neighbouring ones,
// where CRD's order would gather every lane from another block.
#include "frontend/graph_passes.h"

namespace ktune::frontend {
namespace {

Attribute ints_attr(std::vector<int64_t> v) { return Attribute{std::move(v), {}, {}, {}}; }

// What the rewrite needs of one spatial axis.
struct Axis {
  int64_t in = 0, out = 0;  // the ConvTranspose's input and output extents
  int64_t taps = 0;         // k, its kernel extent
  int64_t m = 0;            // ceil(k / s): taps of each phase's conv
  int64_t crop = 0;         // the ConvTranspose's leading pad: output rows dropped at the start
  int64_t extra = 0;        // conv rows added at the end so that the crop's window fits
  int64_t conv_out() const { return in + m - 1 + extra; }
};

// The axis of a ConvTranspose with stride s, pads (begin, end) and output padding, or nullopt when
// its output shape is not what those give (an output_shape attribute, an auto_pad).
std::optional<Axis> axis_of(int64_t in, int64_t out, int64_t k, int64_t s, int64_t begin,
                            int64_t end, int64_t output_padding) {
  Axis a{in, out, k, (k + s - 1) / s, begin, 0};
  if (begin < 0 || end < 0 || output_padding < 0 || output_padding >= s ||
      out != s * (in - 1) + output_padding + k - begin - end)
    return std::nullopt;
  while (a.conv_out() * s < begin + out) ++a.extra;
  return a;
}

std::string add_constant(Model& model, const std::string& name, ConstantValue value,
                         const std::string& type) {
  Graph& g = model.graph;
  g.constants.insert(name);
  g.shapes[name] = value.shape;
  g.types[name] = type;
  model.constants[name] = std::move(value);
  return name;
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
    const bool plain =
        w && x->size() == 4 && y->size() == 4 && w->shape.size() == 4 && !w->f32.empty() &&
        n.int_or("group", 1) == 1 && (!has_bias || (b && !b->f32.empty())) &&
        n.ints("dilations", {1, 1}) == std::vector<int64_t>{1, 1} &&
        n.text_or("auto_pad", "NOTSET") == "NOTSET" && !n.attrs.count("output_shape");
    const std::vector<int64_t> strides = plain ? n.ints("strides", {1, 1}) : std::vector<int64_t>{};
    // One block size for DepthToSpace: the same stride on both axes.
    const int64_t s = strides.size() == 2 && strides[0] == strides[1] ? strides[0] : 0;
    const std::vector<int64_t> pads = n.ints("pads", {0, 0, 0, 0});
    const std::vector<int64_t> output_padding = n.ints("output_padding", {0, 0});
    std::optional<Axis> ah, aw;
    if (s >= 1 && pads.size() == 4 && output_padding.size() == 2) {
      ah = axis_of((*x)[2], (*y)[2], w->shape[2], s, pads[0], pads[2], output_padding[0]);
      aw = axis_of((*x)[3], (*y)[3], w->shape[3], s, pads[1], pads[3], output_padding[1]);
    }
    if (!ah || !aw) {
      nodes.push_back(std::move(n));
      continue;
    }
    const int64_t C = w->shape[0], K = w->shape[1], blocks = s * s;
    const int64_t mh = ah->m, mw = aw->m;
    // The conv's output channel (rh*s + rw)*K + k is output channel k at phase (rh, rw); its tap
    // (jh, jw) is the transposed conv's tap ((mh-1-jh)*s + rh, (mw-1-jw)*s + rw), zero past k.
    ConstantValue w1{{K * blocks, C, mh, mw},
                     std::vector<float>(static_cast<size_t>(K * blocks * C * mh * mw), 0.0f),
                     {}};
    for (int64_t k = 0; k < K; ++k)
      for (int64_t rh = 0; rh < s; ++rh)
        for (int64_t rw = 0; rw < s; ++rw)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t jh = 0; jh < mh; ++jh)
              for (int64_t jw = 0; jw < mw; ++jw) {
                const int64_t th = (mh - 1 - jh) * s + rh, tw = (mw - 1 - jw) * s + rw;
                if (th >= ah->taps || tw >= aw->taps) continue;
                w1.f32[static_cast<size_t>(((((rh * s + rw) * K + k) * C + c) * mh + jh) * mw +
                                           jw)] =
                    w->f32[static_cast<size_t>(((c * K + k) * ah->taps + th) * aw->taps + tw)];
              }
    const std::string type = g.type(n.outputs[0]);
    Node conv;
    conv.op = "Conv";
    conv.name = n.name;
    conv.inputs = {n.inputs[0], add_constant(model, n.inputs[1] + "@phases", std::move(w1), type)};
    if (has_bias) {
      ConstantValue b1{{K * blocks}, {}, {}};
      for (int64_t r = 0; r < blocks; ++r)
        for (int64_t k = 0; k < K; ++k) b1.f32.push_back(b->f32[static_cast<size_t>(k)]);
      conv.inputs.push_back(add_constant(model, n.inputs[2] + "@phases", std::move(b1), type));
    }
    const std::string phases = n.outputs[0] + "@phases";
    conv.outputs = {phases};
    conv.attrs["kernel_shape"] = ints_attr({mh, mw});
    conv.attrs["pads"] = ints_attr({mh - 1, mw - 1, mh - 1 + ah->extra, mw - 1 + aw->extra});
    g.shapes[phases] = {(*x)[0], K * blocks, ah->conv_out(), aw->conv_out()};
    g.types[phases] = type;

    Node shuffle;
    shuffle.op = "DepthToSpace";
    shuffle.name = n.name + "/depth_to_space";
    shuffle.inputs = {phases};
    shuffle.attrs["blocksize"] = ints_attr({s});
    shuffle.attrs["mode"] = Attribute{{}, {}, "DCR", {}};
    const std::vector<int64_t> full = {(*x)[0], K, ah->conv_out() * s, aw->conv_out() * s};
    if (full == *y) {
      shuffle.outputs = n.outputs;
      nodes.push_back(std::move(conv));
      nodes.push_back(std::move(shuffle));
      continue;
    }
    // The transposed conv's pads: its output is a window of the interleaved phases.
    const std::string uncropped = n.outputs[0] + "@uncropped";
    shuffle.outputs = {uncropped};
    g.shapes[uncropped] = full;
    g.types[uncropped] = type;
    Node crop;
    crop.op = "Slice";
    crop.name = n.name + "/crop";
    crop.inputs = {uncropped};
    crop.outputs = n.outputs;
    const std::vector<int64_t> starts = {ah->crop, aw->crop},
                               ends = {ah->crop + ah->out, aw->crop + aw->out}, axes = {2, 3};
    if (g.opset < 10) {  // Slice's parameters are attributes before opset 10
      crop.attrs["starts"] = ints_attr(starts);
      crop.attrs["ends"] = ints_attr(ends);
      crop.attrs["axes"] = ints_attr(axes);
    } else {
      for (const auto& [what, v] :
           {std::pair{"starts", starts}, std::pair{"ends", ends}, std::pair{"axes", axes}})
        crop.inputs.push_back(
            add_constant(model, n.name + "/crop@" + what, ConstantValue{{2}, {}, v}, "int64"));
    }
    nodes.push_back(std::move(conv));
    nodes.push_back(std::move(shuffle));
    nodes.push_back(std::move(crop));
  }
  g.nodes = std::move(nodes);
}

}  // namespace ktune::frontend
