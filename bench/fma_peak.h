// Declares one core's measured ceilings: fused multiply-add throughput and read bandwidth.
#pragma once

#include <cstddef>

namespace ktune::bench {

// Single-precision GFLOP/s of one thread running independent vector FMAs for about
// `seconds`: the ceiling no fp32 kernel on one core can pass. Compiled for this machine's
// widest vectors (fma_peak.cc is built with -march=native).
double fma_peak_gflops(double seconds);

// GB/s of one thread reading a buffer of `bytes` with the widest vector loads, over and over for
// about `seconds` (the fastest pass counts): the ceiling of a kernel that must read that much
// data, when it stays in the cache level a buffer of that size fits (as it does for kernels timed
// back to back). Same compilation as fma_peak_gflops.
double read_bandwidth_gbs(size_t bytes, double seconds);

}  // namespace ktune::bench
