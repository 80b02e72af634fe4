// Defines the Winograd F(m x m, 3 x 3) transform matrices and the weight transform of
// conv2d_winograd_nchwc (what a build packs into the kernel's U argument).
#pragma once

#include <cstdint>
#include <vector>

namespace ktune::schedule_space::templates {

// The matrices of F(m, 3) (Lavin & Gray; interpolation points 0, +-1, +-1/2, +-2 and infinity),
// row-major: with alpha = m + 2 and a tile d of alpha x alpha inputs and a 3 x 3 filter g,
// Y = A^T [(G g G^T) .* (B^T d B)] A is the m x m correlation of d with g. Every entry of B^T and
// A^T is a dyadic rational (exact in any binary float); G's are not and are applied in double.
struct WinogradMatrices {
  int64_t m = 0, alpha = 0;
  std::vector<double> bt;  // alpha x alpha
  std::vector<double> g;   // alpha x 3
  std::vector<double> at;  // m x alpha
  double b_t(int64_t r, int64_t c) const { return bt[r * alpha + c]; }
  double g_at(int64_t r, int64_t c) const { return g[r * 3 + c]; }
  double a_t(int64_t r, int64_t c) const { return at[r * alpha + c]; }
};

// The matrices of F(m, 3) for m in {2, 4, 6}; throws Error(kInvalidArgument) for another m.
const WinogradMatrices& winograd_matrices(int64_t m);

// The output channels in one row of U: two oc blocks when the blocks pair up (an even number of
// them), else one. A product's register tile of two oc blocks then reads one contiguous row per
// input channel, one stream instead of two 32 KiB apart: on ResNet-18's 7x7 C512 layer, whose U
// (16.8 MB for F(2x2)) streams from memory, the product ran 10-15% faster so.
int64_t winograd_u_block(int64_t k, int64_t oc_block);

// The shape of U for K output and C input channels in blocks of oc_block and ic_block, with
// ub = winograd_u_block(K, oc_block): [alpha][alpha][ceil(K/ub)][ceil(C/icb)][icb][ub]. Output
// channel o sits in row o / ub at lane o % ub.
std::vector<int64_t> winograd_weight_shape(int64_t k, int64_t c, int64_t m, int64_t ic_block,
                                           int64_t oc_block);

// U = G g G^T of every (output, input) channel pair of fp32 weights [K][C][3][3] (OIHW), computed
// in double and rounded once, in winograd_weight_shape's layout; lanes past K or C are zero.
// Throws Error(kInvalidArgument) for a bad m or a non-positive extent.
std::vector<float> winograd_transform_weights(const float* weights, int64_t k, int64_t c, int64_t m,
                                              int64_t ic_block, int64_t oc_block);
// The same with given matrices (alpha from `w`): what a test uses to show that a wrong matrix
// fails.
std::vector<float> winograd_transform_weights(const WinogradMatrices& w, const float* weights,
                                              int64_t k, int64_t c, int64_t ic_block,
                                              int64_t oc_block);

}  // namespace ktune::schedule_space::templates
