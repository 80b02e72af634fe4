// Runs conv2d (N 2, C 2, 5 x 5, K 2, 3 x 3, stride 2, dilation 2, pad 2 -> 3 x 3) on small
// integer inputs, so that every sum is exact in float whatever the order, and compares each
// output with a direct reference. Prints the outputs that differ; exit status 0 when all match.
#include <math.h>
#include <stdint.h>
#include <stdio.h>

int32_t conv2d(void* const* args);

enum { N = 2, C = 2, H = 5, W = 5, K = 2, R = 3, S = 3, OH = 3, OW = 3 };

int main(void) {
  static float in[N][C][H][W], wt[K][C][R][S], out[N][K][OH][OW];
  int wrong = 0;
  for (int i = 0; i < N * C * H * W; ++i) (&in[0][0][0][0])[i] = (float)(i % 7 - 3);
  for (int i = 0; i < K * C * R * S; ++i) (&wt[0][0][0][0])[i] = (float)(i % 5 - 2);
  for (int i = 0; i < N * K * OH * OW; ++i) (&out[0][0][0][0])[i] = NAN;
  void* args[] = {in, wt, out};
  if (conv2d(args) != 0) return 2;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      for (int y = 0; y < OH; ++y)
        for (int x = 0; x < OW; ++x) {
          float ref = 0;
          for (int c = 0; c < C; ++c)
            for (int r = 0; r < R; ++r)
              for (int s = 0; s < S; ++s) {
                const int iy = 2 * y + 2 * r - 2, ix = 2 * x + 2 * s - 2;
                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                  ref += in[n][c][iy][ix] * wt[k][c][r][s];
              }
          if (!(out[n][k][y][x] == ref)) {
            printf("out[%d][%d][%d][%d] = %g, expected %g\n", n, k, y, x, out[n][k][y][x], ref);
            ++wrong;
          }
        }
  printf("%d of %d outputs wrong\n", wrong, N * K * OH * OW);
  return wrong != 0;
}
