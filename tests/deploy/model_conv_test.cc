// Tests of conv_blocked, the generated conv of model builds for the convs no template takes
// (groups, per-axis strides and dilations, padding at each end, an epilogue): compiled for the
// host against a plain loop of ONNX's Conv, the output NaN-filled before each run.
#include "deploy/model_conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/error.h"
#include "tests/deploy/model_ops_util.h"

namespace ktune::deploy {
namespace {

using schedule_space::templates::Activation;

// [n][c][h][w] -> [n][ceil(c/b)][h][w][b], the lanes past c zero.
std::vector<float> to_blocked(const std::vector<float>& v, const std::vector<int64_t>& nchw,
                              int64_t b) {
  const int64_t n = nchw[0], c = nchw[1], h = nchw[2], w = nchw[3], blocks = (c + b - 1) / b;
  std::vector<float> out(static_cast<size_t>(n * blocks * h * w * b), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < h * w; ++p)
        out[static_cast<size_t>(((i * blocks + ch / b) * h * w + p) * b + ch % b)] =
            v[static_cast<size_t>((i * c + ch) * h * w + p)];
  return out;
}

struct Case {
  std::string what;
  BlockedConv conv;
  int64_t pad_bottom = 0, pad_right = 0;
};

// conv.oh and conv.ow from ONNX's output extent formula.
Case sized(Case k) {
  BlockedConv& c = k.conv;
  c.oh = (c.nchw[2] + c.pad_top + k.pad_bottom - (c.r - 1) * c.dilation_h - 1) / c.stride_h + 1;
  c.ow = (c.nchw[3] + c.pad_left + k.pad_right - (c.s - 1) * c.dilation_w - 1) / c.stride_w + 1;
  return k;
}

TEST(ModelConv, BlockedConvMatchesLoops) {
  std::vector<Case> cases;
  {
    Case k{"2 groups, bias", {}};
    k.conv = {.nchw = {1, 8, 7, 9},
              .k = 12,
              .r = 3,
              .s = 3,
              .group = 2,
              .pad_top = 1,
              .pad_left = 1,
              .in_block = 8,
              .out_block = 8};
    k.conv.epilogue.bias = true;
    k.pad_bottom = k.pad_right = 1;
    cases.push_back(sized(k));
  }
  {
    // Groups of 2 input and 3 output channels: lanes of one block in several groups; 12 of 16
    // lanes used; a clip whose value at 0 is not 0.
    Case k{"4 groups, stride and dilation per axis, asymmetric pads, clip", {}};
    k.conv = {.nchw = {2, 8, 13, 11},
              .k = 12,
              .r = 3,
              .s = 2,
              .group = 4,
              .stride_h = 2,
              .stride_w = 1,
              .dilation_h = 2,
              .dilation_w = 1,
              .pad_top = 0,
              .pad_left = 1,
              .in_block = 16,
              .out_block = 16};
    k.conv.epilogue.bias = true;
    k.conv.epilogue.activation = Activation::kClip;
    k.conv.epilogue.clip_min = 0.05;
    k.conv.epilogue.clip_max = 0.3;
    k.pad_bottom = 2;
    cases.push_back(sized(k));
  }
  {
    Case k{"dilations (1, 3), one group, residual and relu", {}};
    k.conv = {.nchw = {1, 5, 6, 12},
              .k = 7,
              .r = 2,
              .s = 3,
              .dilation_w = 3,
              .pad_left = 2,
              .in_block = 4,
              .out_block = 8};
    k.conv.epilogue.residual = true;
    k.conv.epilogue.activation = Activation::kRelu;
    k.pad_right = 1;
    cases.push_back(sized(k));
  }
  {
    Case k{"a lifted 1-D conv of 2 groups, hardswish", {}};
    k.conv = {.nchw = {1, 6, 1, 20},
              .k = 4,
              .r = 1,
              .s = 5,
              .group = 2,
              .stride_w = 2,
              .dilation_w = 2,
              .pad_left = 3,
              .in_block = 8,
              .out_block = 4};
    k.conv.epilogue.bias = true;
    k.conv.epilogue.activation = Activation::kHardSwish;
    cases.push_back(sized(k));
  }
  for (const Case& k : cases) {
    const BlockedConv& c = k.conv;
    const int64_t n = c.nchw[0], ch = c.nchw[1], h = c.nchw[2], w = c.nchw[3];
    const int64_t cg = ch / c.group, kg = c.k / c.group, ob = c.out_block;
    const int64_t out_blocks = (c.k + ob - 1) / ob;
    const std::vector<float> x = random(n * ch * h * w, 11);
    const std::vector<float> weights = random(c.k * cg * c.r * c.s, 12);
    const std::vector<float> scale = random(c.k, 13, 0.5f, 1.5f);
    const std::vector<float> bias = random(out_blocks * ob, 14);
    const std::vector<float> residual = random(n * out_blocks * c.oh * c.ow * ob, 15);
    std::vector<std::vector<float>> inputs = {to_blocked(x, c.nchw, c.in_block),
                                              pack_conv_blocked_weights(c, weights, scale)};
    if (c.epilogue.bias) inputs.push_back(bias);
    if (c.epilogue.residual) inputs.push_back(residual);
    const std::vector<float> got = run(conv_blocked("conv", c), inputs);

    std::vector<double> want(got.size(), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t kk = 0; kk < c.k; ++kk)
        for (int64_t y = 0; y < c.oh; ++y)
          for (int64_t xo = 0; xo < c.ow; ++xo) {
            double acc = 0;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t a = 0; a < c.r; ++a)
                for (int64_t b = 0; b < c.s; ++b) {
                  const int64_t iy = y * c.stride_h + a * c.dilation_h - c.pad_top;
                  const int64_t ix = xo * c.stride_w + b * c.dilation_w - c.pad_left;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                  const int64_t in_c = kk / kg * cg + ci;
                  acc += static_cast<double>(
                             x[static_cast<size_t>(((i * ch + in_c) * h + iy) * w + ix)]) *
                         weights[static_cast<size_t>(((kk * cg + ci) * c.r + a) * c.s + b)] *
                         scale[static_cast<size_t>(kk)];
                }
            const size_t at = static_cast<size_t>(
                (((i * out_blocks + kk / ob) * c.oh + y) * c.ow + xo) * ob + kk % ob);
            if (c.epilogue.bias) acc += bias[static_cast<size_t>(kk)];
            if (c.epilogue.residual) acc += residual[at];
            switch (c.epilogue.activation) {
              case Activation::kRelu:
                acc = std::max(acc, 0.0);
                break;
              case Activation::kClip:
                acc = std::min(std::max(acc, c.epilogue.clip_min), c.epilogue.clip_max);
                break;
              case Activation::kHardSwish:
                acc = acc * std::min(std::max(acc + 3, 0.0), 6.0) / 6;
                break;
              default:
                break;
            }
            want[at] = acc;
          }
    EXPECT_LE(worst(got, want), 1e-5) << k.what;
  }
}

TEST(ModelConv, BlockedConvRefusesAGroupThatDoesNotDivide) {
  BlockedConv c{.nchw = {1, 6, 4, 4}, .k = 8, .r = 3, .s = 3, .group = 4, .oh = 2, .ow = 2};
  EXPECT_THROW(conv_blocked("conv", c), Error);
  EXPECT_THROW(pack_conv_blocked_weights(c, std::vector<float>(8 * 2 * 9), {}), Error);
}

}  // namespace
}  // namespace ktune::deploy
