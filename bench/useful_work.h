// Defines the useful share of a task's FLOPs: a padded window multiplies zeros that are no work.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "schedule_space/task.h"

namespace ktune::bench {

// The taps of a sliding window that fall inside the input, over all taps of all outputs, along
// one axis of `in` elements (the product of both axes' shares is the 2-D share).
inline double valid_tap_share(int64_t in, int64_t window, int64_t stride, int64_t pad,
                              int64_t dilation) {
  const int64_t out = (in + 2 * pad - dilation * (window - 1) - 1) / stride + 1;
  int64_t valid = 0;
  for (int64_t o = 0; o < out; ++o)
    for (int64_t t = 0; t < window; ++t) {
      const int64_t i = o * stride + t * dilation - pad;
      valid += i >= 0 && i < in;
    }
  return static_cast<double>(valid) / static_cast<double>(out * window);
}

// The share of task.flop() that is useful work: for the convolutions and pools, the taps inside
// the unpadded input (what a kernel that skips the padding computes, and what oneDNN computes);
// 1 for every other template. Epilogue FLOPs count as taps do (they are a small part).
inline double useful_share(const schedule_space::Task& task) {
  const std::map<std::string, std::string> a = task.args().to_map();
  if (!a.count("pad") || !a.count("H") || !a.count("R")) return 1.0;
  const int64_t pad = task.args().get_int("pad"), stride = task.args().get_int("stride");
  const int64_t dilation = a.count("dilation") ? task.args().get_int("dilation") : 1;
  return valid_tap_share(task.args().get_int("H"), task.args().get_int("R"), stride, pad,
                         dilation) *
         valid_tap_share(task.args().get_int("W"), task.args().get_int("S"), stride, pad, dilation);
}

}  // namespace ktune::bench
