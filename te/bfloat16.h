// Defines the bfloat16 <-> float32 conversions every part of ktune shares (te's interpreter and
// host buffers, the runner's input data, the benchmarks).
#pragma once

#include <cstdint>
#include <cstring>

namespace ktune::te {

// bfloat16 is the high half of a float32: widening is a 16-bit shift, exact.
inline float bfloat16_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// float32 to bfloat16, rounded to nearest with ties to even (as vcvtneps2bf16, PyTorch, TVM and
// oneDNN round). A NaN stays a NaN (quiet): rounding its payload could carry into the exponent
// and make it an infinity.
inline uint16_t float_to_bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// f rounded to the nearest bfloat16 value, as a float.
inline float round_to_bfloat16(float f) { return bfloat16_to_float(float_to_bfloat16(f)); }

}  // namespace ktune::te
