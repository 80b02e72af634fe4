// The pooling family's tasks: MaxPool, AveragePool and their global forms become max_pool2d or
// avg_pool2d; a window the templates do not take is a generated pool.
#include "frontend/task_extractor.h"

namespace ktune::frontend {

Mapped TaskExtractor::map_pool(const Node& n) {
  const auto x = g_.shape(n.inputs[0]);
  const auto y = g_.shape(n.outputs[0]);
  if (!x || !y) return NotMapped{"shape not inferred", ""};
  if (x->size() != 4) return NotMapped{"only 2-D pooling", ""};
  const bool global = n.op.rfind("Global", 0) == 0;
  const bool max = n.op.find("Max") != std::string::npos;
  const int64_t N = (*x)[0], C = (*x)[1], H = (*x)[2], W = (*x)[3], OH = (*y)[2], OW = (*y)[3];
  std::vector<int64_t> kernel = global ? std::vector<int64_t>{H, W} : n.ints("kernel_shape");
  std::vector<int64_t> strides = global ? std::vector<int64_t>{1, 1} : n.ints("strides", {1, 1});
  std::vector<int64_t> pads =
      global ? std::vector<int64_t>{0, 0, 0, 0} : n.ints("pads", {0, 0, 0, 0});
  if (kernel.size() != 2) return NotMapped{"only 2-D pooling", ""};
  const std::vector<int64_t> dilations = n.ints("dilations", {1, 1});
  if (dilations != std::vector<int64_t>{1, 1}) return NotMapped{"dilated pooling", ""};
  // What the templates do not take, a generated pool in the channel-blocked layout computes
  // (deploy's pool_blocked with a PoolWindow): the window as ONNX gives it.
  const std::string auto_pad = n.text_or("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
    return NotMapped{"auto_pad " + auto_pad.substr(0, 4), "pool"};
  if (strides.size() != 2 || pads.size() != 4) return NotMapped{"malformed window", ""};
  if (!all_equal(strides)) return NotMapped{"different strides per axis", "pool"};
  if (!all_equal(pads)) return NotMapped{"asymmetric padding", "pool"};
  if (!max && pads[0] > 0 && n.int_or("count_include_pad", 0) == 0)
    return NotMapped{"average excluding padding (count_include_pad=0)", "pool"};
  // ceil_mode may add an output row the floor formula of the templates does not have.
  if (OH != (H + 2 * pads[0] - kernel[0]) / strides[0] + 1 ||
      OW != (W + 2 * pads[0] - kernel[1]) / strides[0] + 1)
    return NotMapped{"ceil_mode output extent", "pool"};
  Candidate c;
  c.template_name = max ? "max_pool2d" : "avg_pool2d";
  c.args = {{"N", i2s(N)},
            {"C", i2s(C)},
            {"H", i2s(H)},
            {"W", i2s(W)},
            {"R", i2s(kernel[0])},
            {"S", i2s(kernel[1])},
            {"stride", i2s(strides[0])},
            {"pad", i2s(pads[0])}};
  const double window = static_cast<double>(kernel[0] * kernel[1]);
  c.flop = static_cast<double>(N * C * OH * OW) * (max ? window : window + 1);
  if (global) c.note = "global pooling";
  return c;
}

}  // namespace ktune::frontend
