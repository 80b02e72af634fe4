// Declares pool_blocked(): max and average pooling computed directly in the channel-blocked NCHWc
// layout, so a pool between blocked convolutions needs no layout conversion.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "te/ir.h"

namespace ktune::deploy {

struct BlockedPool {
  bool max = true;            // false: average, the padding counted as zeros (count_include_pad)
  std::vector<int64_t> nchw;  // the input's logical shape
  int64_t block = 16;         // lanes of a channel block
  int64_t r = 1, s = 1, stride = 1, pad = 0;
};

// In [n][ceil(c/b)][h][w][b] -> out [n][ceil(c/b)][oh][ow][b], oh = (h + 2 pad - r) / stride + 1.
// The lanes past c stay zero when the input's are. Throws Error(kInvalidArgument) for a window
// that does not fit.
te::LoweredFunc pool_blocked(const std::string& name, const BlockedPool& p);

}  // namespace ktune::deploy
