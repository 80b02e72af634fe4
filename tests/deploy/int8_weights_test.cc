// Tests fold_zero_points: the int32 accumulator an int8 kernel computes from the folded weights and
// bias (sum x w' + bias, padding taps reading the data's zero point) is bit-exactly the integer
// reference sum (x - z_x)(w - z_w) + b (padding taps adding nothing), for uint8 weights of zero
// point 128, int8 and uint8 weights with a zero point per channel, in a conv's [K, C, R, S] and a
// matrix's [K, N] layouts, and for data read less 128 (shift_data); weights whose difference from
// the zero point leaves int8 are refused, and taken by int16 weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "deploy/int8_packing.h"

namespace ktune::deploy {
namespace {

// Random integers in [lo, hi].
std::vector<int64_t> random(size_t n, int64_t lo, int64_t hi, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> u(lo, hi);
  std::vector<int64_t> v(n);
  for (int64_t& x : v) x = u(rng);
  return v;
}

struct ConvCase {
  int64_t w_lo, w_hi;           // the weights' range (uint8 or int8 values)
  std::vector<int64_t> w_zero;  // one, or one per output channel
  int64_t x_zero;
};

// A 3x3 conv of C = 5 -> K = 7 channels over 6x5 uint8 data with padding 1.
TEST(Int8Weights, FoldedConvAccumulatorIsTheIntegerReference) {
  constexpr int64_t K = 7, C = 5, R = 3, S = 3, H = 6, W = 5, P = 1;
  const std::vector<ConvCase> cases = {
      {0, 255, {128}, 131},                                 // u8, zp 128
      {-100, 90, {-7, 3, 0, 12, -20, 5, 1}, 0},             // s8 per channel
      {20, 235, {120, 121, 122, 123, 124, 125, 126}, 255},  // u8 per channel
      {-128, 127, {}, 17},                                  // s8, no zero point
  };
  std::mt19937_64 rng(5);
  for (const ConvCase& c : cases) {
    std::vector<int64_t> w = random(K * C * R * S, c.w_lo, c.w_hi, rng);
    // Keep each weight within int8 of its channel's zero point (what the frontend checked).
    for (size_t i = 0; i < w.size(); ++i) {
      const int64_t z = c.w_zero.empty() ? 0 : c.w_zero[c.w_zero.size() == 1 ? 0 : i / (C * R * S)];
      w[i] = std::clamp(w[i], z - 128, z + 127);
    }
    const std::vector<int64_t> x = random(C * H * W, 0, 255, rng);
    const std::vector<int64_t> b = random(K, -5000, 5000, rng);
    const auto f = fold_zero_points(w, K, true, c.w_zero, c.x_zero, b);
    ASSERT_TRUE(f.has_value());
    for (int64_t v : f->w) ASSERT_TRUE(v >= -128 && v <= 127) << v;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t zw = c.w_zero.empty() ? 0 : c.w_zero[c.w_zero.size() == 1 ? 0 : k];
      for (int64_t oy = 0; oy < H; ++oy)
        for (int64_t ox = 0; ox < W; ++ox) {
          int64_t kernel = f->bias[k], reference = b[k];
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t y = oy + r - P, xx = ox + s - P;
                const bool inside = y >= 0 && y < H && xx >= 0 && xx < W;
                const int64_t xv = inside ? x[(ch * H + y) * W + xx] : c.x_zero;
                const size_t wi = ((k * C + ch) * R + r) * S + s;
                kernel += xv * f->w[wi];
                if (inside) reference += (xv - c.x_zero) * (w[wi] - zw);
              }
          ASSERT_EQ(static_cast<int32_t>(kernel), reference)
              << "k " << k << " at " << oy << "," << ox;
        }
    }
  }
}

// A [K=9, N=6] uint8 matrix with a zero point per column (the innermost axis).
TEST(Int8Weights, FoldedMatmulAccumulatorIsTheIntegerReference) {
  constexpr int64_t Kd = 9, N = 6, M = 4;
  std::mt19937_64 rng(6);
  const std::vector<int64_t> zw = {120, 128, 131, 100, 140, 127};
  std::vector<int64_t> w = random(Kd * N, 0, 255, rng);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::clamp(w[i], zw[i % N] - 128, zw[i % N] + 127);
  const std::vector<int64_t> a = random(M * Kd, 0, 255, rng);
  const int64_t zx = 77;
  const auto f = fold_zero_points(w, N, false, zw, zx, {});
  ASSERT_TRUE(f.has_value());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t kernel = f->bias[n], reference = 0;
      for (int64_t k = 0; k < Kd; ++k) {
        kernel += a[m * Kd + k] * f->w[k * N + n];
        reference += (a[m * Kd + k] - zx) * (w[k * N + n] - zw[n]);
      }
      ASSERT_EQ(kernel, reference) << m << "," << n;
    }
}

// A kernel with shift_data multiplies x - 128: folded with the data's zero point less 128, its
// accumulator sum (x - 128) w' + bias is the integer reference too (what a model build does on
// AArch64 dotprod); folded with the zero point itself it is off by 128 * sum w' per channel.
TEST(Int8Weights, ShiftedDataFoldsTheCompensationIntoTheBias) {
  constexpr int64_t K = 5, C = 3, R = 3, S = 3, H = 4, W = 6, P = 1;
  std::mt19937_64 rng(7);
  const std::vector<int64_t> zw = {-3, 0, 9, 1, -12};
  std::vector<int64_t> w = random(K * C * R * S, -100, 100, rng);
  const std::vector<int64_t> x = random(C * H * W, 0, 255, rng);
  const std::vector<int64_t> b = random(K, -5000, 5000, rng);
  for (int64_t zx : {0, 77, 128, 255}) {
    const auto f = fold_zero_points(w, K, true, zw, zx - 128, b);
    const auto unshifted = fold_zero_points(w, K, true, zw, zx, b);
    ASSERT_TRUE(f.has_value() && unshifted.has_value());
    for (int64_t k = 0; k < K; ++k) {
      int64_t sum_w = 0;
      for (int64_t i = 0; i < C * R * S; ++i) sum_w += f->w[static_cast<size_t>(k * C * R * S + i)];
      EXPECT_EQ(f->bias[k] - unshifted->bias[k], 128 * sum_w) << k;
      for (int64_t oy = 0; oy < H; ++oy)
        for (int64_t ox = 0; ox < W; ++ox) {
          int64_t kernel = f->bias[k], reference = b[k];
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t y = oy + r - P, xx = ox + s - P;
                const bool inside = y >= 0 && y < H && xx >= 0 && xx < W;
                const int64_t xv = inside ? x[(ch * H + y) * W + xx] : zx;
                const size_t wi = ((k * C + ch) * R + r) * S + s;
                kernel += (xv - 128) * f->w[wi];
                if (inside) reference += (xv - zx) * (w[wi] - zw[k]);
              }
          ASSERT_EQ(static_cast<int32_t>(kernel), reference)
              << "zx " << zx << " k " << k << " at " << oy << "," << ox;
        }
    }
  }
}

// uint8 weights over [0, 255] with zero point 60: w - 60 reaches 195, past int8.
TEST(Int8Weights, WeightsPastInt8OfTheirZeroPointAreRefused) {
  EXPECT_FALSE(fold_zero_points({0, 255, 60, 61}, 2, true, {60}, 0, {}).has_value());
  EXPECT_FALSE(fold_zero_points({0, 200}, 1, true, {}, 0, {}).has_value());  // uint8, no zero point
  EXPECT_TRUE(fold_zero_points({0, 255}, 1, true, {128}, 0, {}).has_value());
}

// The int16 weights of a depthwise kernel (weights=s16) take them: uint8 weights over [0, 255] of
// zero points 0 and 255 per channel (w' 255 and -255) with z_x 9 fold into w - z_w and the bias
// b - 9 * sum w', packed as [C/16][R][S][16] with the lanes past C zero.
TEST(Int8Weights, Int16WeightsTakeTheWholeDifference) {
  const std::vector<int64_t> w = {255, 0, 7, 0, 255, 200};  // [C=3][1][1][2]
  const auto f = fold_zero_points(w, 3, true, {0, 255, 100}, 9, {5, 6, 7}, 16);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->w, (std::vector<int64_t>{255, 0, -248, -255, 155, 100}));
  EXPECT_EQ(f->bias, (std::vector<int32_t>{5 - 9 * 255, 6 - 9 * (-503), 7 - 9 * 255}));
  const std::vector<int16_t> packed = pack_depthwise_s16(f->w, 3, 1, 2);
  ASSERT_EQ(packed.size(), 32u);
  for (size_t i = 0; i < packed.size(); ++i) {
    const size_t s = i / 16, c = i % 16;
    EXPECT_EQ(packed[i], c < 3 ? f->w[c * 2 + s] : 0) << i;
  }
  EXPECT_FALSE(fold_zero_points(w, 3, true, {0, 255, 100}, 9, {}).has_value());  // int8
}

}  // namespace
}  // namespace ktune::deploy
