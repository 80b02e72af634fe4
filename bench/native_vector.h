// Defines the widest float vector of the machine a benchmark source is compiled for
// (-march=native).
#pragma once

namespace ktune::bench::native {

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif
typedef float Vec __attribute__((vector_size(kVectorBytes)));
constexpr int kLanes = kVectorBytes / 4;

}  // namespace ktune::bench::native
