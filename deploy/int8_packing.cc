// Packs int8 weights into the int8 templates' layouts.
#include "deploy/int8_packing.h"

#include <cstddef>

namespace ktune::deploy {
namespace {

constexpr int64_t kLanes = 16;  // int32 lanes of one dot instruction: output channels per block
constexpr int64_t kDepth = 4;   // int8 products each lane sums

int64_t blocks(int64_t n, int64_t b) { return (n + b - 1) / b; }

template <typename T>
std::vector<T> pack_depthwise(const std::vector<int64_t>& w, int64_t C, int64_t R, int64_t S) {
  std::vector<T> packed(static_cast<size_t>(blocks(C, kLanes) * R * S * kLanes), 0);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t x = 0; x < S; ++x)
        packed[static_cast<size_t>(((c / kLanes * R + r) * S + x) * kLanes + c % kLanes)] =
            static_cast<T>(w[static_cast<size_t>((c * R + r) * S + x)]);
  return packed;
}

}  // namespace

std::vector<int8_t> pack_conv_u8s8(const std::vector<int64_t>& w, int64_t K, int64_t C, int64_t R,
                                   int64_t S, int64_t icb, int64_t CP) {
  const int64_t cb = CP / icb;
  std::vector<int8_t> packed(static_cast<size_t>(blocks(K, kLanes) * cb * R * S * icb * kLanes), 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t x = 0; x < S; ++x)
          packed[static_cast<size_t>(
              (((((k / kLanes * cb + c / icb) * R + r) * S + x) * (icb / kDepth) +
                c % icb / kDepth) *
                   kLanes +
               k % kLanes) *
                  kDepth +
              c % kDepth)] =
              static_cast<int8_t>(w[static_cast<size_t>(((k * C + c) * R + r) * S + x)]);
  return packed;
}

std::vector<int8_t> pack_depthwise_u8s8(const std::vector<int64_t>& w, int64_t C, int64_t R,
                                        int64_t S) {
  return pack_depthwise<int8_t>(w, C, R, S);
}

std::vector<int16_t> pack_depthwise_s16(const std::vector<int64_t>& w, int64_t C, int64_t R,
                                        int64_t S) {
  return pack_depthwise<int16_t>(w, C, R, S);
}

std::vector<int8_t> pack_gemm_b_u8s8(const std::vector<int64_t>& w, int64_t K, int64_t N, bool nt) {
  const int64_t kb = blocks(K, kDepth);
  std::vector<int8_t> packed(static_cast<size_t>(blocks(N, kLanes) * kb * kLanes * kDepth), 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j)
      packed[static_cast<size_t>(((j / kLanes * kb + k / kDepth) * kLanes + j % kLanes) * kDepth +
                                 k % kDepth)] =
          static_cast<int8_t>(w[static_cast<size_t>(nt ? j * K + k : k * N + j)]);
  return packed;
}

std::optional<FoldedWeights> fold_zero_points(const std::vector<int64_t>& w, int64_t channels,
                                              bool channels_first,
                                              const std::vector<int64_t>& w_zero, int64_t x_zero,
                                              const std::vector<int64_t>& bias, int weight_bits) {
  const int64_t hi = (int64_t{1} << (weight_bits - 1)) - 1;
  const int64_t per_channel = static_cast<int64_t>(w.size()) / channels;
  FoldedWeights f{w, std::vector<int32_t>(static_cast<size_t>(channels))};
  std::vector<int64_t> sum(static_cast<size_t>(channels), 0);
  for (size_t i = 0; i < w.size(); ++i) {
    const auto k = static_cast<size_t>(channels_first ? static_cast<int64_t>(i) / per_channel
                                                      : static_cast<int64_t>(i) % channels);
    if (!w_zero.empty()) f.w[i] -= w_zero[w_zero.size() == 1 ? 0 : k];
    if (f.w[i] < -hi - 1 || f.w[i] > hi) return std::nullopt;
    sum[k] += f.w[i];
  }
  for (size_t k = 0; k < sum.size(); ++k)
    f.bias[k] = static_cast<int32_t>((bias.empty() ? 0 : bias[k]) - x_zero * sum[k]);
  return f;
}

}  // namespace ktune::deploy
