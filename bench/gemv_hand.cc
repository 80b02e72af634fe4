// Hand-written GEMV loops (y = x * B, B row-major [K,N]) timed on one core: see gemv_hand.h.
#include "bench/gemv_hand.h"
#include "bench/native_vector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

namespace ktune::bench {
namespace {

using native::kLanes;
using native::kVectorBytes;
using native::Vec;

Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p,
              sizeof v);  // unaligned: rows of B start anywhere when N is not a lane multiple
  return v;
}
void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

struct Gemv {
  const float* x;
  const float* b;
  float* y;
  int64_t n, k;
  const float* row(int64_t r) const { return b + r * n; }
};

// Each output column's dot product, for the columns a vector loop left over.
void scalar_columns(const Gemv& g, int64_t from) {
  for (int64_t j = from; j < g.n; ++j) {
    float s = 0;
    for (int64_t r = 0; r < g.k; ++r) s += g.x[r] * g.row(r)[j];
    g.y[j] = s;
  }
}

// The kernels take the Gemv by value: a copy no store can alias, so its fields stay in registers.

// A column panel of 4 vectors accumulated down all K rows in registers.
__attribute__((noinline)) void column_panel(Gemv g) {
  int64_t j = 0;
  for (; j + 4 * kLanes <= g.n; j += 4 * kLanes) {
    Vec a0{}, a1{}, a2{}, a3{};
    for (int64_t r = 0; r < g.k; ++r) {
      const Vec xv = Vec{} + g.x[r];
      const float* p = g.row(r) + j;
      a0 += xv * load(p);
      a1 += xv * load(p + kLanes);
      a2 += xv * load(p + 2 * kLanes);
      a3 += xv * load(p + 3 * kLanes);
    }
    store(g.y + j, a0);
    store(g.y + j + kLanes, a1);
    store(g.y + j + 2 * kLanes, a2);
    store(g.y + j + 3 * kLanes, a3);
  }
  scalar_columns(g, j);
}

// Rows of B streamed `Rows` at a time along N, `Width` vectors per step; `Pairwise` sums the rows'
// products in a tree before adding to y (a shorter dependency chain than one FMA per row).
template <int Rows, int Width, bool Pairwise>
__attribute__((noinline)) void row_stream(Gemv g) {
  std::fill(g.y, g.y + g.n, 0.0f);
  int64_t r0 = 0;
  for (; r0 + Rows <= g.k; r0 += Rows) {
    Vec xv[Rows];
    const float* rows[Rows];
    for (int i = 0; i < Rows; ++i) xv[i] = Vec{} + g.x[r0 + i], rows[i] = g.row(r0 + i);
    int64_t j = 0;
    for (; j + Width * kLanes <= g.n; j += Width * kLanes) {
#pragma GCC unroll 4
      for (int w = 0; w < Width; ++w) {
        const int64_t c = j + w * kLanes;
        Vec acc = load(g.y + c);
        if constexpr (Pairwise) {
          Vec part[Rows];
#pragma GCC unroll 8
          for (int i = 0; i < Rows; ++i) part[i] = xv[i] * load(rows[i] + c);
          for (int step = 1; step < Rows; step *= 2)
            for (int i = 0; i + step < Rows; i += 2 * step) part[i] += part[i + step];
          acc += part[0];
        } else {
#pragma GCC unroll 8
          for (int i = 0; i < Rows; ++i) acc += xv[i] * load(rows[i] + c);
        }
        store(g.y + c, acc);
      }
    }
    for (; j < g.n; ++j)
      for (int i = 0; i < Rows; ++i) g.y[j] += g.x[r0 + i] * rows[i][j];
  }
  for (; r0 < g.k; ++r0)
    for (int64_t j = 0; j < g.n; ++j) g.y[j] += g.x[r0] * g.row(r0)[j];
}

}  // namespace

HandGemv gemv_hand(int64_t N, int64_t K, double seconds) {
  std::vector<float> x(K), b(N * K), y(N);
  for (int64_t i = 0; i < K; ++i) x[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  for (int64_t i = 0; i < N * K; ++i) b[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  std::vector<double> want(N, 0.0);
  for (int64_t r = 0; r < K; ++r)
    for (int64_t j = 0; j < N; ++j) want[j] += static_cast<double>(x[r]) * b[r * N + j];
  const Gemv g{x.data(), b.data(), y.data(), N, K};
  const std::pair<const char*, std::function<void(const Gemv&)>> variants[] = {
      {"column panel 4 vectors", column_panel},
      {"row stream 4 rows x 1 vector", row_stream<4, 1, false>},
      {"row stream 8 rows x 1 vector", row_stream<8, 1, false>},
      {"row stream 4 rows x 2 vectors", row_stream<4, 2, false>},
      {"row stream 8 rows x 2 vectors", row_stream<8, 2, false>},
      {"row stream 4 rows x 2 vectors, pairwise", row_stream<4, 2, true>},
  };
  using Clock = std::chrono::steady_clock;
  const double share = seconds / static_cast<double>(std::size(variants));
  HandGemv best;
  for (const auto& [name, run] : variants) {
    std::fill(y.begin(), y.end(), NAN);
    run(g);
    for (int64_t j = 0; j < N; ++j) {
      if (!(std::fabs(y[j] - want[j]) <= 1e-4 * (1 + std::fabs(want[j]))))
        throw std::runtime_error(std::string("gemv_hand: ") + name + " computes a wrong y[" +
                                 std::to_string(j) + "]");
    }
    double fastest = 1e30;
    const auto start = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - start).count() < share) {
      const auto call = Clock::now();
      run(g);
      fastest = std::min(fastest, std::chrono::duration<double>(Clock::now() - call).count());
    }
    const double gflops = 2.0 * static_cast<double>(N) * static_cast<double>(K) / fastest * 1e-9;
    if (gflops > best.gflops) best = {gflops, name};
  }
  return best;
}

}  // namespace ktune::bench
