// The conv family's tasks: a Conv becomes conv2d_nchwc (with its Winograd alternatives) or
// depthwise_conv2d_nchwc (each side's padding their arguments); groups and per-axis dilations a
// generated conv_blocked.
#include <algorithm>

#include "frontend/task_extractor.h"
#include "support/error.h"

namespace ktune::frontend {

namespace {

// The Winograd output tiles (m of F(m x m, 3 x 3)) worth tuning for an OH x OW output: the larger
// tile saves more multiplies but pads a small output to a multiple of m and has a larger U. From
// 12 on F(4x4) wins; below, both are tuned: on ResNet-18's 7x7 C512 layer F(4x4) computes an 8x8
// output with 44% fewer multiplies than F(2x2) but reads 37.7 MB of U against 16.8, and which is
// faster depends on the machine's caches.
std::vector<int64_t> winograd_tiles(int64_t oh, int64_t ow) {
  if (std::min(oh, ow) >= 12) return {4};
  return {2, 4};
}

// The channel block a conv reading `x` takes so that `x`, a Concat of channel parts, is written
// in place (deploy's plan_concat_in_place needs every part but the last to fill whole blocks): 8
// when the parts come in multiples of 8 but not of 16 (an FPN's four 24-channel branches, where
// the default block of 16 for 96 channels meant a conversion of the whole concatenation before
// the conv), else 0 (the template's default).
int64_t concat_channel_block(const Graph& g, const std::string& x) {
  const auto producer = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
    return std::find(n.outputs.begin(), n.outputs.end(), x) != n.outputs.end();
  });
  if (producer == g.nodes.end() || producer->op != "Concat" || !producer->domain.empty()) return 0;
  const auto out = g.shape(x);
  if (!out || out->size() != 4 || (*out)[1] <= 16) return 0;
  const int64_t axis = producer->int_or("axis", 0);
  if (axis != 1 && axis != -3) return 0;
  bool whole8 = true, whole16 = true;
  for (size_t k = 0; k + 1 < producer->inputs.size(); ++k) {
    const auto part = g.shape(producer->inputs[k]);
    if (!part || part->size() != 4) return 0;
    whole8 = whole8 && (*part)[1] % 8 == 0;
    whole16 = whole16 && (*part)[1] % 16 == 0;
  }
  return whole8 && !whole16 ? 8 : 0;
}

}  // namespace

// A Conv, or the conv of an int8 operator `q` (its data and weights; nothing fused here).
Mapped TaskExtractor::map_conv(size_t i, const QuantizedOp* q) {
  const Node& n = g_.nodes[i];
  const auto x = g_.shape(q ? q->data : n.inputs[0]);
  const auto w = g_.shape(q ? q->weight : n.inputs[1]);
  const auto y = g_.shape(n.outputs[0]);
  if (!x || !w || !y) return NotMapped{"shape not inferred"};
  if (x->size() != 4) return NotMapped{"only 2-D convolution"};
  const int64_t group = n.int_or("group", 1);
  const auto strides = n.ints("strides", {1, 1});
  const auto dilations = n.ints("dilations", {1, 1});
  const int64_t R = (*w)[2], S = (*w)[3];
  std::vector<int64_t> pads = n.ints("pads", {0, 0, 0, 0});
  const std::string auto_pad = n.text_or("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // The padding that keeps ceil(in / stride) outputs, split over both sides.
    pads.assign(4, 0);
    for (int a = 0; a < 2; ++a) {
      const int64_t in = (*x)[2 + a], k = a == 0 ? R : S, s = strides[a], d = dilations[a];
      const int64_t total = std::max<int64_t>(((in + s - 1) / s - 1) * s + (k - 1) * d + 1 - in, 0);
      pads[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[a + 2] = total - pads[a];
    }
  } else if (auto_pad == "VALID") {
    pads.assign(4, 0);
  }
  const int64_t N = (*x)[0], C = (*x)[1], K = (*w)[0], OH = (*y)[2], OW = (*y)[3];
  // ONNX's shape inference does not compare a conv's input channels with its weights (a wrong
  // --input passes it): a model that cannot run is bad input, not a task.
  if (group < 1 || C != (*w)[1] * group || K % group != 0)
    throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (Conv): the input has " +
                                                 i2s(C) + " channels, its weights take " +
                                                 i2s((*w)[1] * group) + " (check --input)");
  // What the float32 templates do not take, a generated conv computes: a task per group would
  // need a per-group binding of data and weights, and no template dilates per axis.
  const bool depthwise = group == C && K == C;
  if (group != 1 && !depthwise) {
    if (q) return NotMapped{"a grouped conv other than depthwise (int8)"};
    return generated_conv(i, pads, "a conv of " + i2s(group) + " groups, not depthwise");
  }
  if (!all_equal(dilations)) {
    if (q) return NotMapped{"different dilations per axis"};
    return generated_conv(i, pads, "different dilations per axis");
  }
  // conv2d_nchwc and depthwise_conv2d_nchwc take a column stride of their own (stride_w).
  const bool stride_per_axis = !all_equal(strides);
  if (stride_per_axis && q)
    return NotMapped{
        "different strides per axis (float32 convs of one group and depthwise convs take them)"};
  // Padding that differs between the sides: the templates take each side's (pad the rows above,
  // pad_left, pad_bottom and pad_right where they differ from it); the int8 path binds its data
  // unpadded.
  const bool sides_differ = !all_equal(pads);
  if (sides_differ && q) return NotMapped{"asymmetric padding (int8)"};
  Candidate c;
  c.args = {{"N", i2s(N)},         {"H", i2s((*x)[2])},
            {"W", i2s((*x)[3])},   {"R", i2s(R)},
            {"S", i2s(S)},         {"stride", i2s(strides[0])},
            {"pad", i2s(pads[0])}, {"dilation", i2s(dilations[0])}};
  for (auto [side, at] : {std::pair{"pad_left", 1}, {"pad_bottom", 2}, {"pad_right", 3}})
    if (pads[at] != pads[0]) c.args[side] = i2s(pads[at]);
  const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  if (group == 1) {
    c.template_name = "conv2d_nchwc";
    c.substitute = "conv2d";
    c.args["C"] = i2s(C);
    c.args["K"] = i2s(K);
    if (stride_per_axis) c.args["stride_w"] = i2s(strides[1]);
    c.flop = 2.0 * N * K * OH * OW * C * R * S;
    if (const int64_t block = q ? 0 : concat_channel_block(g_, n.inputs[0]); block > 0)
      c.args["ic_block"] = i2s(block);
    // Winograd's template pads every side alike.
    if (R == 3 && S == 3 && strides[0] == 1 && !stride_per_axis && dilations[0] == 1 &&
        !sides_differ)
      for (int64_t m : winograd_tiles(OH, OW)) {
        Candidate w = c;
        w.template_name = "conv2d_winograd_nchwc";
        w.substitute.clear();
        w.args["m"] = i2s(m);
        c.alternatives.push_back(std::move(w));
      }
    // A graph input of fewer channels than a vector (an image) read as the model gives it (NCHW
    // is NCHW1c): no layout step before the first direct conv, which runs as fast on one channel
    // per block (MobileNetV3's 224 x 224 stem tuned to 0.0327 ms against 0.0361 with ic_block 3,
    // and converting its input took 0.027 ms). Its Winograd alternatives keep their blocks.
    const auto& inputs = g_.inputs;
    if (!q && C < 16 && std::find(inputs.begin(), inputs.end(), n.inputs[0]) != inputs.end())
      c.args["ic_block"] = "1";
  } else {
    // Depthwise: the blocked layout's kernel (as conv2d_nchwc's output), with the epilogue; the
    // NCHW template computes the same when it refuses.
    c.template_name = "depthwise_conv2d_nchwc";
    c.substitute = "depthwise_conv2d";
    c.args["C"] = i2s(C);
    if (stride_per_axis) c.args["stride_w"] = i2s(strides[1]);
    c.flop = 2.0 * N * C * OH * OW * R * S;
  }
  // An upsampled residual only where conv2d_nchwc is the one algorithm (its Winograd
  // alternatives read the residual like the output).
  const bool upsampled_residual = group == 1 && c.alternatives.empty();
  if (!q) c.epilogue = fuser_.fuse(i, has_bias, AnchorKind::kConv, upsampled_residual);
  note_not_int8(i, c);
  return c;
}

// A float32 Conv no template takes, for the generated conv_blocked (GeneratedConv), with the
// epilogue the templates' would fuse.
NotMapped TaskExtractor::generated_conv(size_t i, const std::vector<int64_t>& pads,
                                        const std::string& reason) {
  const Node& n = g_.nodes[i];
  const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  GeneratedConv c{i, fuser_.fuse(i, has_bias, AnchorKind::kConv, false), pads};
  std::string layer = n.name;
  for (size_t f : c.epilogue.nodes) layer += "+" + g_.nodes[f].name;
  generated_convs_.push_back(std::move(c));
  return NotMapped{reason, "conv_blocked", layer};
}

}  // namespace ktune::frontend
