// Declares input_window_sums() and input_row_sums(): the per-position sums of uint8 data less its
// zero point that an int8 conv or matrix product adds to its accumulator when its weights are
// shifted by a constant other than their zero point (InputSums,
// schedule_space/templates/requant.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "te/ir.h"

namespace ktune::deploy {

// The window of conv2d_nchwc_u8s8s32 (square stride and padding, no dilation) on uint8 NCHWc data
// In [n][ceil(c/b)][h][w][b] (lanes past c ignored): out int32 [n][oh][ow] = sum over the c
// channels and the r x s taps of the window of (x - zero_point), the padding taps adding 0 (they
// read zero_point). Two stages: the channel sum per input pixel, then the window sum of those.
struct InputWindowSums {
  std::vector<int64_t> nchw;  // the input's logical shape
  int64_t block = 16;
  int64_t r = 1, s = 1, stride = 1, pad = 0;
  int32_t zero_point = 0;
};
te::LoweredFunc input_window_sums(const std::string& name, const InputWindowSums& p);

// The rows of uint8 A [m][k] (ONNX's layout): out int32 [m] = sum_j (a[i][j] - zero_point).
te::LoweredFunc input_row_sums(const std::string& name, int64_t m, int64_t k, int32_t zero_point);

}  // namespace ktune::deploy
