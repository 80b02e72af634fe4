// Defines the layouts in which a model build hands int8 weights to the int8 templates:
// conv2d_nchwc_u8s8s32's and depthwise_conv2d_nchwc_u8s8s32's blocked filters and
// matmul_u8s8s32's packed B.
#pragma once

#include <cstdint>
#include <vector>

namespace ktune::deploy {

// conv2d_nchwc_u8s8s32's W: the int8 filter w[K][C][R][S] as [K/16][CP/icb][R][S][icb/4][16][4]
// (16 output channels x 4 input channels per dot instruction) for CP >= C input channels, the
// last output block and the channels past C zeros. CP is a multiple of icb, icb of 4.
std::vector<int8_t> pack_conv_u8s8(const std::vector<int64_t>& w, int64_t K, int64_t C, int64_t R,
                                   int64_t S, int64_t icb, int64_t CP);

// depthwise_conv2d_nchwc_u8s8s32's W: the int8 filter w[C][1][R][S] as [C/16][R][S][16], the
// last block padded with zeros.
std::vector<int8_t> pack_depthwise_u8s8(const std::vector<int64_t>& w, int64_t C, int64_t R,
                                        int64_t S);

// matmul_u8s8s32's B (packed_gemm.h): the K x N int8 matrix, given as w[K][N] or, with `nt`, as
// w[N][K], with element (k, j) at [j/16][k/4][j%16][k%4]; the last blocks padded with zeros.
std::vector<int8_t> pack_gemm_b_u8s8(const std::vector<int64_t>& w, int64_t K, int64_t N, bool nt);

}  // namespace ktune::deploy
