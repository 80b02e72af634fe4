// Declares conv_blocked() and pack_conv_blocked_weights(): a generated (untuned) convolution in the
// channel-blocked NCHWc layout for the convs no template takes (2 to C-1 groups, dilations that
// differ per axis), with its weight layout and fused epilogue.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule_space/templates/epilogue.h"
#include "te/ir.h"

namespace ktune::deploy {

// ONNX's 2-D Conv in general: any group count dividing the channels, per-axis strides and
// dilations, padding at each end (the bottom and right pads follow from oh and ow).
struct BlockedConv {
  std::vector<int64_t> nchw;  // the input's logical shape
  int64_t k = 1;              // output channels
  int64_t r = 1, s = 1;       // kernel rows and columns
  int64_t group = 1;          // divides nchw[1] and k
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t oh = 1, ow = 1;
  int64_t in_block = 16;   // the input's lanes
  int64_t out_block = 16;  // the output's lanes
  // After the sum: bias (per output channel), residual (shaped like the output), activation.
  schedule_space::templates::Epilogue epilogue = {};
};

// Arguments: in [n][ceil(c/ib)][h][w][ib], weights [ceil(k/ob)][c/group][r][s][ob]
// (pack_conv_blocked_weights), then bias [ceil(k/ob) * ob] when the epilogue has one, residual
// [n][ceil(k/ob)][oh][ow][ob] when it has one, out [n][ceil(k/ob)][oh][ow][ob]. Output lanes past
// k are zero. Taps in the padding read zero. Throws Error(kInvalidArgument) for a group that does
// not divide the channels or extents that do not fit.
te::LoweredFunc conv_blocked(const std::string& name, const BlockedConv& c);

// ONNX's weights [k][c/group][r][s], each output channel's scaled by scale[k] (a folded
// BatchNormalization; empty: 1), in conv_blocked's layout, the lanes past k zero.
std::vector<float> pack_conv_blocked_weights(const BlockedConv& c, const std::vector<float>& w,
                                             const std::vector<float>& scale);

}  // namespace ktune::deploy
