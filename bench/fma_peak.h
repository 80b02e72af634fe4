// Declares one core's measured ceilings: fused multiply-add throughput and streaming memory
// traffic.
#pragma once

#include <cstddef>

namespace ktune::bench {

// Single-precision GFLOP/s of one thread running independent vector FMAs for about
// `seconds`: the ceiling no fp32 kernel on one core can pass. Compiled for this machine's
// widest vectors (fma_peak.cc is built with -march=native).
double fma_peak_gflops(double seconds);

// Seconds one thread needs, at best, to read `read_bytes` and write `write_bytes` with the
// widest vector loads and stores, interleaved in proportion as a kernel's input and output
// traffic is (the fastest of passes over about `seconds` counts): the time below which no kernel
// with that compulsory traffic can run, when its buffers stay in the cache level they fit (as
// they do for kernels timed back to back). Writes count as a kernel's stores do: through the
// cache, so each written line is also read for ownership. Same compilation as fma_peak_gflops.
double stream_seconds(size_t read_bytes, size_t write_bytes, double seconds);

}  // namespace ktune::bench
