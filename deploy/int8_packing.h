// Defines the layouts in which a model build hands int8 weights to the int8 templates:
// conv2d_nchwc_u8s8s32's and depthwise_conv2d_nchwc_u8s8s32's blocked filters and
// matmul_u8s8s32's packed B, and fold_zero_points, the weights and bias those kernels compute a
// quantized operator's zero points with.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace ktune::deploy {

// conv2d_nchwc_u8s8s32's W: the int8 filter w[K][C][R][S] as [K/16][CP/icb][R][S][icb/4][16][4]
// (16 output channels x 4 input channels per dot instruction) for CP >= C input channels, the
// last output block and the channels past C zeros. CP is a multiple of icb, icb of 4.
std::vector<int8_t> pack_conv_u8s8(const std::vector<int64_t>& w, int64_t K, int64_t C, int64_t R,
                                   int64_t S, int64_t icb, int64_t CP);

// depthwise_conv2d_nchwc_u8s8s32's W: the int8 filter w[C][1][R][S] as [C/16][R][S][16], the
// last block padded with zeros; _s16 the same of int16 weights (weights=s16).
std::vector<int8_t> pack_depthwise_u8s8(const std::vector<int64_t>& w, int64_t C, int64_t R,
                                        int64_t S);
std::vector<int16_t> pack_depthwise_s16(const std::vector<int64_t>& w, int64_t C, int64_t R,
                                        int64_t S);

// matmul_u8s8s32's B (packed_gemm.h): the K x N int8 matrix, given as w[K][N] or, with `nt`, as
// w[N][K], with element (k, j) at [j/16][k/4][j%16][k%4]; the last blocks padded with zeros.
std::vector<int8_t> pack_gemm_b_u8s8(const std::vector<int64_t>& w, int64_t K, int64_t N, bool nt);

// A quantized operator's accumulator, sum_i (x_i - z_x)(w_i - z_w[c]) + b[c] for output channel
// c, as an int8 kernel computes it: sum_i x_i w'_i + bias[c] with w' = w - z_w and bias[c] = b[c]
// - z_x * sum_i w'_i (padding taps read x = z_x and so add nothing).
struct FoldedWeights {
  std::vector<int64_t> w;     // w', in w's layout
  std::vector<int32_t> bias;  // [channels]
};

// Folds the zero points of weights `w` (int8 or uint8 values) into FoldedWeights. `channels`
// output channels, the outermost axis of w when `channels_first` (a conv's [K, C, R, S], a
// matrix's [N, K]) else the innermost ([K, N]); `w_zero` one value or one per channel (empty:
// 0); `bias` empty or one per channel. nullopt when some w' is past the signed integer of
// `weight_bits` bits the kernel takes (int8, or int16 for depthwise weights=s16).
std::optional<FoldedWeights> fold_zero_points(const std::vector<int64_t>& w, int64_t channels,
                                              bool channels_first,
                                              const std::vector<int64_t>& w_zero, int64_t x_zero,
                                              const std::vector<int64_t>& bias,
                                              int weight_bits = 8);

}  // namespace ktune::deploy
