// Declares fma_peak_gflops, one core's measured fused multiply-add throughput.
#pragma once

namespace ktune::bench {

// Single-precision GFLOP/s of one thread running independent vector FMAs for about
// `seconds`: the ceiling no fp32 kernel on one core can pass. Compiled for this machine's
// widest vectors (fma_peak.cc is built with -march=native).
double fma_peak_gflops(double seconds);

}  // namespace ktune::bench
