// Declares pool_blocked() and global_average_pool_u8(): max and average pooling computed directly
// in the channel-blocked NCHWc layout, so a pool between blocked convolutions needs no layout
// conversion; and window_output(), the output size of a window over a padded input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "te/ir.h"

namespace ktune::deploy {

// The output rows and columns of an r x s window with square stride and padding over an h x w
// input: (h + 2 pad - r) / stride + 1, and the same for w. Throws Error(kInvalidArgument) with
// `what` ("<kernel>: the window does not fit the input") for a window that does not fit or a bad
// stride or padding.
struct WindowOutput {
  int64_t oh = 0, ow = 0;
};
WindowOutput window_output(const std::string& what, int64_t h, int64_t w, int64_t r, int64_t s,
                           int64_t stride, int64_t pad);

// ONNX's 2-D pooling window in general: per-axis kernel, strides and padding at each end, the
// output extent (ceil_mode adds a last row or column whose window runs past the padded input), and
// what an average divides by.
struct PoolWindow {
  int64_t r = 1, s = 1, stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t oh = 0, ow = 0;
  // An average divides by its window clipped to the padded input (true) or to the input (false),
  // as ONNX Runtime does.
  bool count_include_pad = true;
};

struct BlockedPool {
  bool max = true;            // false: average, the padding counted as zeros (count_include_pad)
  std::vector<int64_t> nchw;  // the input's logical shape
  int64_t block = 16;         // lanes of a channel block
  int64_t r = 1, s = 1, stride = 1, pad = 0;
  // float32, or uint8 for a max pool of quantized data (a max commutes with the quantization).
  te::DataType dtype = te::Float(32);
  // Set: the window, replacing r, s, stride and pad (a pool the templates do not take).
  std::optional<PoolWindow> window = std::nullopt;
};

// In [n][ceil(c/b)][h][w][b] -> out [n][ceil(c/b)][oh][ow][b], oh = (h + 2 pad - r) / stride + 1
// (or the window's). The lanes past c stay zero when the input's are. Throws
// Error(kInvalidArgument) for a window that does not fit, Error(kUnsupported) for an average pool
// of uint8.
te::LoweredFunc pool_blocked(const std::string& name, const BlockedPool& p);

// ONNX Runtime's QLinearGlobalAveragePool on uint8 NCHWc data: In [n][ceil(c/b)][h][w][b] -> out
// [n][ceil(c/b)][1][1][b], out = saturate(round_half_even((sum - h*w*x_zero) * x_scale / (h*w *
// y_scale)) + y_zero), the sum in int32, the factor one float32.
struct QuantizedGlobalPool {
  std::vector<int64_t> nchw;  // the input's logical shape
  int64_t block = 16;
  float x_scale = 1, y_scale = 1;
  int32_t x_zero = 0, y_zero = 0;
};
te::LoweredFunc global_average_pool_u8(const std::string& name, const QuantizedGlobalPool& p);

}  // namespace ktune::deploy
