/* A two-hidden-layer perceptron on a batch of 32 made of three ktune kernels (see CMakeLists.txt):
 *   h1  = relu(x  W1^T + b1)   layer1: dense_bias_relu 32x256, K=128
 *   h2  = relu(h1 W2^T + b2)   layer2: dense_bias_relu 32x128, K=256
 *   out = h2 W3                head:   matmul 32x16, K=128
 * Each layer's output (pre-filled with NaN) is checked against a plain C loop in double on the
 * same input, at 1 thread and at 2. Prints one line per layer and thread count, then "mlp ok" or
 * "mlp FAILED" (exit 1). Usage: mlp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "head.h"
#include "layer1.h"
#include "layer2.h"

enum { kBatch = 32, kIn = 128, kHidden1 = 256, kHidden2 = 128, kOut = 16 };

static unsigned long long state = 2024;

/* A 64-byte aligned float array (the kernels' ABI), filled with uniform values in [-scale, scale).
 */
static float* tensor(size_t count, float scale) {
  float* p = aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
  if (!p) exit(3);
  for (size_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = scale * (2.0f * (float)((double)(state >> 40) / 16777216.0) - 1.0f);
  }
  return p;
}

static void poison(float* p, size_t count) { memset(p, 0xff, count * sizeof(float)); /* NaN */ }

/* y[m][n] = sum_k x[m][k] * w(n, k) (+ bias[n], relu), in double; w is [N][K] when transposed
 * (dense) else [K][N] (matmul). Returns how many of the kernel's outputs are off by more than
 * 1e-4 relative to the sum of |terms|, and the worst relative error in *worst. */
static long check(const char* name, const float* x, const float* w, const float* bias, int relu,
                  int transposed, const float* y, int m_count, int n_count, int k_count,
                  int threads) {
  long bad = 0;
  double worst = 0;
  for (int m = 0; m < m_count; ++m)
    for (int n = 0; n < n_count; ++n) {
      double ref = bias ? bias[n] : 0, scale = bias ? fabs(bias[n]) : 0;
      for (int k = 0; k < k_count; ++k) {
        const double term =
            (double)x[m * k_count + k] * (transposed ? w[n * k_count + k] : w[k * n_count + n]);
        ref += term;
        scale += fabs(term);
      }
      if (relu && ref < 0) ref = 0;
      const double err = fabs(y[m * n_count + n] - ref) / (scale > 0 ? scale : 1);
      if (!(err <= 1e-4)) ++bad;
      if (err > worst || err != err) worst = err;
    }
  printf("%s threads %d: checked %d bad %ld max_rel_err %.3g\n", name, threads, m_count * n_count,
         bad, worst);
  return bad;
}

int main(void) {
  float* x = tensor(kBatch * kIn, 1.0f);
  float* w1 = tensor(kHidden1 * kIn, 1.0f / sqrtf(kIn));
  float* b1 = tensor(kHidden1, 0.1f);
  float* w2 = tensor(kHidden2 * kHidden1, 1.0f / sqrtf(kHidden1));
  float* b2 = tensor(kHidden2, 0.1f);
  float* w3 = tensor(kHidden2 * kOut, 1.0f / sqrtf(kHidden2));
  float* h1 = tensor(kBatch * kHidden1, 0);
  float* h2 = tensor(kBatch * kHidden2, 0);
  float* out = tensor(kBatch * kOut, 0);
  long bad = 0;
  for (int threads = 1; threads <= 2; ++threads) {
    if (ktune_set_num_threads(threads) != 0) return 3;
    poison(h1, kBatch * kHidden1);
    poison(h2, kBatch * kHidden2);
    poison(out, kBatch * kOut);
    if (layer1_run(x, w1, b1, h1) != 0 || layer2_run(h1, w2, b2, h2) != 0 ||
        head_run(h2, w3, out) != 0) {
      printf("a kernel failed\n");
      return 2;
    }
    bad += check("layer1", x, w1, b1, 1, 1, h1, kBatch, kHidden1, kIn, threads);
    bad += check("layer2", h1, w2, b2, 1, 1, h2, kBatch, kHidden2, kHidden1, threads);
    bad += check("head", h2, w3, NULL, 0, 0, out, kBatch, kOut, kHidden2, threads);
  }
  double sum = 0;
  for (int i = 0; i < kBatch * kOut; ++i) sum += out[i];
  printf("out[0][0..3] %.6f %.6f %.6f %.6f sum %.6f\n", out[0], out[1], out[2], out[3], sum);
  printf(bad ? "mlp FAILED\n" : "mlp ok\n");
  return bad ? 1 : 0;
}
