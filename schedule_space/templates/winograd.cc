// Winograd F(m, 3) matrices and the weight transform.
#include "schedule_space/templates/winograd.h"

#include <string>

#include "schedule_space/templates/common.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

WinogradMatrices make(int64_t m, std::vector<double> bt, std::vector<double> g,
                      std::vector<double> at) {
  WinogradMatrices w;
  w.m = m;
  w.alpha = m + 2;
  w.bt = std::move(bt);
  w.g = std::move(g);
  w.at = std::move(at);
  return w;
}

const WinogradMatrices& f2() {
  static const WinogradMatrices w = make(2,
                                         {1, 0, -1, 0,  //
                                          0, 1, 1, 0,   //
                                          0, -1, 1, 0,  //
                                          0, 1, 0, -1},
                                         {1, 0, 0,         //
                                          0.5, 0.5, 0.5,   //
                                          0.5, -0.5, 0.5,  //
                                          0, 0, 1},
                                         {1, 1, 1, 0,  //
                                          0, 1, -1, -1});
  return w;
}

const WinogradMatrices& f4() {
  static const WinogradMatrices w = make(4, {4, 0,  -5, 0,  1, 0,  //
                                             0, -4, -4, 1,  1, 0,  //
                                             0, 4,  -4, -1, 1, 0,  //
                                             0, -2, -1, 2,  1, 0,  //
                                             0, 2,  -1, -2, 1, 0,  //
                                             0, 4,  0,  -5, 0, 1},
                                         {1.0 / 4, 0, 0,                 //
                                          -1.0 / 6, -1.0 / 6, -1.0 / 6,  //
                                          -1.0 / 6, 1.0 / 6, -1.0 / 6,   //
                                          1.0 / 24, 1.0 / 12, 1.0 / 6,   //
                                          1.0 / 24, -1.0 / 12, 1.0 / 6,  //
                                          0, 0, 1},
                                         {1, 1, 1,  1, 1,  0,  //
                                          0, 1, -1, 2, -2, 0,  //
                                          0, 1, 1,  4, 4,  0,  //
                                          0, 1, -1, 8, -8, 1});
  return w;
}

const WinogradMatrices& f6() {
  static const WinogradMatrices w =
      make(6, {1, 0,    -21.0 / 4, 0,         21.0 / 4,  0,         -1, 0,  //
               0, 1,    1,         -17.0 / 4, -17.0 / 4, 1,         1,  0,  //
               0, -1,   1,         17.0 / 4,  -17.0 / 4, -1,        1,  0,  //
               0, 0.5,  0.25,      -2.5,      -1.25,     2,         1,  0,  //
               0, -0.5, 0.25,      2.5,       -1.25,     -2,        1,  0,  //
               0, 2,    4,         -2.5,      -5,        0.5,       1,  0,  //
               0, -2,   4,         2.5,       -5,        -0.5,      1,  0,  //
               0, -1,   0,         21.0 / 4,  0,         -21.0 / 4, 0,  1},
           {1,         0,          0,         //
            -2.0 / 9,  -2.0 / 9,   -2.0 / 9,  //
            -2.0 / 9,  2.0 / 9,    -2.0 / 9,  //
            1.0 / 90,  1.0 / 45,   2.0 / 45,  //
            1.0 / 90,  -1.0 / 45,  2.0 / 45,  //
            32.0 / 45, 16.0 / 45,  8.0 / 45,  //
            32.0 / 45, -16.0 / 45, 8.0 / 45,  //
            0,         0,          1},
           {1, 1, 1,  1,  1,   1,        1,         0,  //
            0, 1, -1, 2,  -2,  0.5,      -0.5,      0,  //
            0, 1, 1,  4,  4,   0.25,     0.25,      0,  //
            0, 1, -1, 8,  -8,  0.125,    -0.125,    0,  //
            0, 1, 1,  16, 16,  1.0 / 16, 1.0 / 16,  0,  //
            0, 1, -1, 32, -32, 1.0 / 32, -1.0 / 32, 1});
  return w;
}

}  // namespace

const WinogradMatrices& winograd_matrices(int64_t m) {
  switch (m) {
    case 2:
      return f2();
    case 4:
      return f4();
    case 6:
      return f6();
    default:
      throw Error(ErrorKind::kInvalidArgument,
                  "winograd: m (output tile) is 2, 4 or 6, not " + std::to_string(m));
  }
}

int64_t winograd_u_block(int64_t k, int64_t oc_block) {
  return ceil_div(k, oc_block) % 2 == 0 ? 2 * oc_block : oc_block;
}

std::vector<int64_t> winograd_weight_shape(int64_t k, int64_t c, int64_t m, int64_t ic_block,
                                           int64_t oc_block) {
  const int64_t alpha = winograd_matrices(m).alpha;
  if (k < 1 || c < 1 || ic_block < 1 || oc_block < 1)
    throw Error(ErrorKind::kInvalidArgument, "winograd: channels and blocks must be positive");
  const int64_t ub = winograd_u_block(k, oc_block);
  return {alpha, alpha, ceil_div(k, ub), ceil_div(c, ic_block), ic_block, ub};
}

std::vector<float> winograd_transform_weights(const float* weights, int64_t k, int64_t c, int64_t m,
                                              int64_t ic_block, int64_t oc_block) {
  return winograd_transform_weights(winograd_matrices(m), weights, k, c, ic_block, oc_block);
}

std::vector<float> winograd_transform_weights(const WinogradMatrices& w, const float* weights,
                                              int64_t k, int64_t c, int64_t ic_block,
                                              int64_t oc_block) {
  const std::vector<int64_t> shape = winograd_weight_shape(k, c, w.m, ic_block, oc_block);
  const int64_t a = w.alpha, krows = shape[2], cblocks = shape[3], ub = shape[5];
  std::vector<float> u(static_cast<size_t>(a * a * krows * cblocks * ic_block * ub), 0.0f);
  std::vector<double> gg(static_cast<size_t>(a * 3));  // G g, alpha x 3
  for (int64_t ko = 0; ko < k; ++ko) {
    for (int64_t ci = 0; ci < c; ++ci) {
      const float* g = weights + (ko * c + ci) * 9;
      for (int64_t e = 0; e < a; ++e)
        for (int64_t s = 0; s < 3; ++s) {
          double acc = 0;
          for (int64_t r = 0; r < 3; ++r) acc += w.g_at(e, r) * static_cast<double>(g[r * 3 + s]);
          gg[e * 3 + s] = acc;
        }
      for (int64_t e = 0; e < a; ++e)
        for (int64_t n = 0; n < a; ++n) {
          double acc = 0;
          for (int64_t s = 0; s < 3; ++s) acc += gg[e * 3 + s] * w.g_at(n, s);
          const int64_t at =
              ((((e * a + n) * krows + ko / ub) * cblocks + ci / ic_block) * ic_block +
               ci % ic_block) *
                  ub +
              ko % ub;
          u[static_cast<size_t>(at)] = static_cast<float>(acc);
        }
    }
  }
  return u;
}

}  // namespace ktune::schedule_space::templates
