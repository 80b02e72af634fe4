// Declares fill_input(), the seeded data a kernel's input arguments are measured and checked on
// (the runner's, and the benchmarks' that race kernels in process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ktune::rpc_runner {

// Fills `bytes` bytes at `data` with values of `dtype` (te's dtype name) that depend only on
// `seed`, the argument's `position` and the dtype and size, so that a reference and every
// candidate of a task see the same inputs: floats (float32, float64, bfloat16) uniform in [-1, 1);
// int8 and uint8 over the whole byte; other integers in [0, 15]. Throws Error(kUnknown) for
// another dtype.
void fill_input(void* data, size_t bytes, const std::string& dtype, uint64_t seed, size_t position);

}  // namespace ktune::rpc_runner
