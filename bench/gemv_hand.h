// Declares the hand-written GEMV ceiling: the fastest of several C++ GEMV loops on one core.
#pragma once

#include <cstdint>
#include <string>

namespace ktune::bench {

struct HandGemv {
  double gflops = 0;    // the fastest variant's fastest call
  std::string variant;  // which loop it was
};

// y[1,N] = x[1,K] * B[K,N] (row-major, float32) by each hand-written loop this file knows: a
// K-long column panel of 4 vectors (the register tile ktune's GEMM space has), and row streams
// that read several rows of B at a time along N, as OpenBLAS's sgemv_n kernels do (4 or 8 rows,
// one or two vectors, chained or summed pairwise). Each variant is checked against a double
// reference and timed by its fastest call over about `seconds`; the fastest one is returned.
// It says what a person writing the loop by hand for this core reaches, to set a tuned kernel
// against (built with -march=native, as fma_peak.cc is). Throws std::runtime_error if a variant
// computes a wrong result.
HandGemv gemv_hand(int64_t N, int64_t K, double seconds);

}  // namespace ktune::bench
