// One core's FMA peak: 12 independent accumulator vectors, more than FMA latency x FMA ports
// on current x86 and AArch64 cores, so the loop is bound by FMA throughput alone.
#include "bench/fma_peak.h"
#include "bench/native_vector.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace ktune::bench {
namespace {

using native::kLanes;
using native::kVectorBytes;
using native::Vec;
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

double stream_seconds(size_t read_bytes, size_t write_bytes, double seconds) {
  const size_t nr = std::max<size_t>(read_bytes / kVectorBytes, kAccumulators);
  const size_t nw = write_bytes / kVectorBytes;
  Vec* in = static_cast<Vec*>(std::aligned_alloc(64, nr * kVectorBytes));
  Vec* out = static_cast<Vec*>(std::aligned_alloc(64, std::max<size_t>(nw, 1) * kVectorBytes));
  for (size_t i = 0; i < nr; ++i) in[i] = Vec{} + 1e-3f * static_cast<float>(i % 7);
  for (size_t i = 0; i < nw; ++i) out[i] = Vec{};
  Vec acc[kAccumulators] = {};
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double fastest = 1e30;
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    const auto pass_start = Clock::now();
    size_t i = 0, w = 0;
    for (; i + kAccumulators <= nr; i += kAccumulators) {
#pragma GCC unroll 12
      for (int a = 0; a < kAccumulators; ++a) acc[a] += in[i + a];
      // The stores keep pace with the loads: after reading i of nr vectors, i/nr of the output.
      // (The stored value is a loaded one: indexing acc by w would keep acc out of registers.)
      for (; w * nr < (i + kAccumulators) * nw; ++w) out[w] = in[i];
    }
    for (; i < nr; ++i) acc[0] += in[i];
    for (; w < nw; ++w) out[w] = in[w % nr];
    asm volatile(""
                 :
                 : "r"(out)
                 : "memory");  // every pass's stores happen (no dead-store elimination)
    fastest = std::min(fastest, std::chrono::duration<double>(Clock::now() - pass_start).count());
  }
  float sink = 0;
  for (int a = 0; a < kAccumulators; ++a)
    for (int l = 0; l < kLanes; ++l) sink += acc[a][l];
  for (size_t i = 0; i < nw; i += 97) sink += out[i][0];
  volatile float keep = sink;
  (void)keep;
  std::free(in);
  std::free(out);
  return fastest;
}

}  // namespace ktune::bench
