// One core's FMA peak: 12 independent accumulator vectors, more than FMA latency x FMA ports
// on current x86 and AArch64 cores, so the loop is bound by FMA throughput alone.
#include "bench/fma_peak.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace ktune::bench {
namespace {

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif
typedef float Vec __attribute__((vector_size(kVectorBytes)));
constexpr int kLanes = kVectorBytes / 4;
constexpr int kAccumulators = 12;
constexpr long kBlock = 1 << 18;  // about 0.3 ms on a 3 GHz AVX-512 core

}  // namespace

double fma_peak_gflops(double seconds) {
  Vec acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = Vec{} + 0.001f * static_cast<float>(i);
  // acc * b + c stays near 1e-3..1 for any iteration count: no overflow, no denormals.
  const Vec b = Vec{} + 0.999f, c = Vec{} + 0.0001f;
  using Clock = std::chrono::steady_clock;
  // The fastest block, as kernels are timed by their fastest call: load only slows a block.
  const auto start = Clock::now();
  double fastest = 1e30;
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    const auto block_start = Clock::now();
    for (long k = 0; k < kBlock; ++k) {
#pragma GCC unroll 12
      for (int i = 0; i < kAccumulators; ++i) acc[i] = acc[i] * b + c;
    }
    fastest = std::min(fastest, std::chrono::duration<double>(Clock::now() - block_start).count());
  }
  float sink = 0;
  for (int i = 0; i < kAccumulators; ++i)
    for (int l = 0; l < kLanes; ++l) sink += acc[i][l];
  volatile float keep = sink;
  (void)keep;
  return static_cast<double>(kBlock) * kAccumulators * kLanes * 2 / fastest * 1e-9;
}

double read_bandwidth_gbs(size_t bytes, double seconds) {
  const size_t n = std::max<size_t>(bytes / kVectorBytes, kAccumulators);
  Vec* data = static_cast<Vec*>(std::aligned_alloc(64, n * kVectorBytes));
  for (size_t i = 0; i < n; ++i) data[i] = Vec{} + 1e-3f * static_cast<float>(i % 7);
  Vec acc[kAccumulators] = {};
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double fastest = 1e30;
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    const auto pass_start = Clock::now();
    size_t i = 0;
    for (; i + kAccumulators <= n; i += kAccumulators) {
#pragma GCC unroll 12
      for (int a = 0; a < kAccumulators; ++a) acc[a] += data[i + a];
    }
    for (; i < n; ++i) acc[0] += data[i];
    fastest = std::min(fastest, std::chrono::duration<double>(Clock::now() - pass_start).count());
  }
  float sink = 0;
  for (int a = 0; a < kAccumulators; ++a)
    for (int l = 0; l < kLanes; ++l) sink += acc[a][l];
  volatile float keep = sink;
  (void)keep;
  std::free(data);
  return static_cast<double>(n) * kVectorBytes / fastest * 1e-9;
}

}  // namespace ktune::bench
