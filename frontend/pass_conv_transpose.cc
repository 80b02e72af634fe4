// conv_transpose_as_conv(): a ConvTranspose of strides (sh, sw) (the upsampling layers of
// segmentation and detection decoders, an audio decoder's 1-D ones lifted to 2-D) as a Conv, a
// tuned task, followed by the interleave of its phases and, where the transposed conv's pads crop
// its output, a Slice. Output pixel o = q*s + r (before the crop) sums input pixels q - j times
// weight tap j*s + r, j in [0, M), M = ceil(k/s): for each phase r that is an ordinary stride-1
// conv of M taps (the taps flipped, the input padded by M - 1), so the sh*sw phases are one Conv
// to K*sh*sw channels. Unlike a conv over a zero-stuffed input, it computes no product with an
// inserted zero. The channels go phase by phase within each group, so each phase's channels are
// contiguous: in the channel-blocked layout an output block reads whole input blocks when K is a
// multiple of the block, else two neighbouring ones, where CRD's order would gather every lane
// from another block. One group and one stride: the interleave is DepthToSpace (DCR), which the
// layout keeps; otherwise it is spelled as Reshape, Transpose, Reshape. A dilation becomes
// weights with zeros between the taps; an output_shape or auto_pad becomes the pads it implies.
#include "frontend/graph_passes.h"

namespace ktune::frontend {
namespace {

// What the rewrite needs of one spatial axis.
struct Axis {
  int64_t in = 0, out = 0;  // the ConvTranspose's input and output extents
  int64_t taps = 0;         // k, its kernel extent
  int64_t m = 0;            // ceil(k / s): taps of each phase's conv
  int64_t crop = 0;         // the ConvTranspose's leading pad: output rows dropped at the start
  int64_t extra = 0;        // conv rows added at the end so that the crop's window fits
  int64_t conv_out() const { return in + m - 1 + extra; }
};

// The pads (begin, end) of one axis of a ConvTranspose whose output extent is `out`. With an
// output_shape or a SAME auto_pad the extent is given and the pads are what make it: ONNX's
// total_padding, its odd unit at the end for SAME_UPPER and at the start otherwise (tf2onnx
// writes output_shape for TensorFlow's "same" transposed convs). A total below zero would pad
// past the inputs' reach; nullopt.
std::optional<std::pair<int64_t, int64_t>> pads_of(const Node& n, size_t axis, int64_t in,
                                                   int64_t out, int64_t k, int64_t s,
                                                   int64_t output_padding) {
  const std::string auto_pad = n.text_or("auto_pad", "NOTSET");
  if (!n.attrs.count("output_shape") && auto_pad == "VALID") return std::pair{0, 0};
  if (!n.attrs.count("output_shape") && auto_pad == "NOTSET") {
    const std::vector<int64_t> pads = n.ints("pads", {0, 0, 0, 0});
    if (pads.size() != 4) return std::nullopt;
    return std::pair{pads[axis], pads[axis + 2]};
  }
  const int64_t total = s * (in - 1) + output_padding + k - out;
  if (total < 0) return std::nullopt;
  const int64_t begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
  return std::pair{begin, total - begin};
}

// The axis of a ConvTranspose with stride s, kernel extent k (dilated), pads (begin, end) and
// output padding, or nullopt when its output extent is not what those give.
std::optional<Axis> axis_of(int64_t in, int64_t out, int64_t k, int64_t s,
                            std::optional<std::pair<int64_t, int64_t>> pads,
                            int64_t output_padding) {
  if (!pads) return std::nullopt;
  const auto [begin, end] = *pads;
  Axis a{in, out, k, (k + s - 1) / s, begin, 0};
  // An output_padding past the stride (ONNX allows it below the dilation too) adds rows that no
  // input reaches: the phase conv's padding computes them (the bias alone).
  if (begin < 0 || end < 0 || output_padding < 0 ||
      out != s * (in - 1) + output_padding + k - begin - end)
    return std::nullopt;
  while (a.conv_out() * s < begin + out) ++a.extra;
  return a;
}

// The weights [C, Kg, kh, kw] of a dilation (dh, dw) as the undilated weights of extent
// ((kh-1)*dh+1, (kw-1)*dw+1), zero between the taps. Dilated transposed convs are rare (dilated
// decoders); their phase conv multiplies those zeros rather than needing a second rewrite.
ConstantValue dilated(const ConstantValue& w, int64_t dh, int64_t dw) {
  if (dh == 1 && dw == 1) return w;
  const int64_t outer = w.shape[0] * w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;
  ConstantValue d{{w.shape[0], w.shape[1], eh, ew},
                  std::vector<float>(static_cast<size_t>(outer * eh * ew), 0.0f),
                  {}};
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t a = 0; a < kh; ++a)
      for (int64_t b = 0; b < kw; ++b)
        d.f32[static_cast<size_t>((o * eh + a * dh) * ew + b * dw)] =
            w.f32[static_cast<size_t>((o * kh + a) * kw + b)];
  return d;
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
    const int64_t group = n.int_or("group", 1);
    const std::vector<int64_t> dilations = n.ints("dilations", {1, 1});
    const bool plain = w && x->size() == 4 && y->size() == 4 && w->shape.size() == 4 &&
                       !w->f32.empty() && group >= 1 && (*x)[1] == w->shape[0] &&
                       w->shape[0] % group == 0 && (!has_bias || (b && !b->f32.empty())) &&
                       dilations.size() == 2 && dilations[0] >= 1 && dilations[1] >= 1;
    const std::vector<int64_t> strides = plain ? n.ints("strides", {1, 1}) : std::vector<int64_t>{};
    const std::vector<int64_t> output_padding = n.ints("output_padding", {0, 0});
    const ConstantValue wd = plain ? dilated(*w, dilations[0], dilations[1]) : ConstantValue{};
    std::optional<Axis> ah, aw;
    if (strides.size() == 2 && strides[0] >= 1 && strides[1] >= 1 && output_padding.size() == 2) {
      for (size_t a = 0; a < 2; ++a) {
        const int64_t in = (*x)[2 + a], out = (*y)[2 + a], k = wd.shape[2 + a];
        (a == 0 ? ah : aw) =
            axis_of(in, out, k, strides[a],
                    pads_of(n, a, in, out, k, strides[a], output_padding[a]), output_padding[a]);
      }
    }
    if (!ah || !aw) {
      nodes.push_back(std::move(n));
      continue;
    }
    w = &wd;
    const int64_t sh = strides[0], sw = strides[1], phases_n = sh * sw;
    // Weights [C, K/group, kh, kw]: input channel c of group c / Cg feeds output channels
    // g*Kg .. g*Kg + Kg - 1.
    const int64_t C = w->shape[0], Kg = w->shape[1], Cg = C / group, K = Kg * group;
    const int64_t mh = ah->m, mw = aw->m;
    // The conv's output channel ((g*P + rh*sw + rw)*Kg + kg) is output channel g*Kg + kg at phase
    // (rh, rw); its tap (jh, jw) is the transposed conv's tap ((mh-1-jh)*sh + rh,
    // (mw-1-jw)*sw + rw), zero past k.
    ConstantValue w1{{K * phases_n, Cg, mh, mw},
                     std::vector<float>(static_cast<size_t>(K * phases_n * Cg * mh * mw), 0.0f),
                     {}};
    for (int64_t g = 0; g < group; ++g)
      for (int64_t rh = 0; rh < sh; ++rh)
        for (int64_t rw = 0; rw < sw; ++rw)
          for (int64_t kg = 0; kg < Kg; ++kg)
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t jh = 0; jh < mh; ++jh)
                for (int64_t jw = 0; jw < mw; ++jw) {
                  const int64_t th = (mh - 1 - jh) * sh + rh, tw = (mw - 1 - jw) * sw + rw;
                  if (th >= ah->taps || tw >= aw->taps) continue;
                  const int64_t o = (g * phases_n + rh * sw + rw) * Kg + kg;
                  w1.f32[static_cast<size_t>(((o * Cg + c) * mh + jh) * mw + jw)] =
                      w->f32[static_cast<size_t>(
                          (((g * Cg + c) * Kg + kg) * ah->taps + th) * aw->taps + tw)];
                }
    const std::string type = g.type(n.outputs[0]);
    Node conv;
    conv.op = "Conv";
    conv.name = n.name;
    conv.inputs = {n.inputs[0], add_constant(model, n.inputs[1] + "@phases", std::move(w1), type)};
    if (has_bias) {
      ConstantValue b1{{K * phases_n}, {}, {}};
      for (int64_t g = 0; g < group; ++g)
        for (int64_t r = 0; r < phases_n; ++r)
          for (int64_t kg = 0; kg < Kg; ++kg)
            b1.f32.push_back(b->f32[static_cast<size_t>(g * Kg + kg)]);
      conv.inputs.push_back(add_constant(model, n.inputs[2] + "@phases", std::move(b1), type));
    }
    if (group > 1) conv.attrs["group"] = ints_attr({group});
    const std::string phases = n.outputs[0] + "@phases";
    conv.outputs = {phases};
    conv.attrs["kernel_shape"] = ints_attr({mh, mw});
    conv.attrs["pads"] = ints_attr({mh - 1, mw - 1, mh - 1 + ah->extra, mw - 1 + aw->extra});
    const int64_t N = (*x)[0], H = ah->conv_out(), W = aw->conv_out();
    g.shapes[phases] = {N, K * phases_n, H, W};
    g.types[phases] = type;
    nodes.push_back(std::move(conv));

    const std::vector<int64_t> full = {N, K, H * sh, W * sw};
    const std::string uncropped = full == *y ? n.outputs[0] : n.outputs[0] + "@uncropped";
    g.shapes[uncropped] = full;
    g.types[uncropped] = type;
    if (group == 1 && sh == sw) {
      Node shuffle;
      shuffle.op = "DepthToSpace";
      shuffle.name = n.name + "/depth_to_space";
      shuffle.inputs = {phases};
      shuffle.outputs = {uncropped};
      shuffle.attrs["blocksize"] = ints_attr({sh});
      shuffle.attrs["mode"] = Attribute{{}, {}, "DCR", {}};
      nodes.push_back(std::move(shuffle));
    } else {
      // [N*group, sh, sw, Kg, H, W] -> [N*group, Kg, H, sh, W, sw] -> [N, K, H*sh, W*sw]: the batch
      // and group axes stay outermost, so six axes do.
      const std::vector<int64_t> split = {N * group, sh, sw, Kg, H, W},
                                 moved = {N * group, Kg, H, sh, W, sw};
      auto reshape = [&](const std::string& name, const std::string& in, const std::string& out,
                         const std::vector<int64_t>& shape) {
        Node r;
        r.op = "Reshape";
        r.name = n.name + "/" + name;
        r.inputs = {in};
        r.outputs = {out};
        if (g.opset < 5) {  // the target shape is an attribute before opset 5
          r.attrs["shape"] = ints_attr(shape);
        } else {
          r.inputs.push_back(add_constant(
              model, r.name + "@shape",
              ConstantValue{{static_cast<int64_t>(shape.size())}, {}, shape}, "int64"));
        }
        g.shapes[out] = shape;
        g.types[out] = type;
        nodes.push_back(std::move(r));
      };
      const std::string split_name = n.outputs[0] + "@split", moved_name = n.outputs[0] + "@moved";
      reshape("split_phases", phases, split_name, split);
      Node transpose;
      transpose.op = "Transpose";
      transpose.name = n.name + "/interleave";
      transpose.inputs = {split_name};
      transpose.outputs = {moved_name};
      transpose.attrs["perm"] = ints_attr({0, 3, 4, 1, 5, 2});
      g.shapes[moved_name] = moved;
      g.types[moved_name] = type;
      nodes.push_back(std::move(transpose));
      reshape("merge_phases", moved_name, uncropped, full);
    }
    if (full == *y) continue;
    // The transposed conv's pads: its output is a window of the interleaved phases.
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
    nodes.push_back(std::move(crop));
  }
  g.nodes = std::move(nodes);
}

}  // namespace ktune::frontend
