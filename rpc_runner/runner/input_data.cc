// fill_input(): seeded kernel inputs of each dtype.
#include "rpc_runner/runner/input_data.h"

#include <random>

#include "support/error.h"
#include "te/bfloat16.h"

namespace ktune::rpc_runner {
namespace {

// Floats uniform in [-1, 1); integers uniform in [lo, hi].
template <typename T>
void fill_typed(void* data, size_t bytes, std::mt19937_64& rng, bool floating, int lo = 0,
                int hi = 15) {
  T* p = static_cast<T*>(data);
  const size_t n = bytes / sizeof(T);
  if (floating) {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(d(rng));
  } else {
    std::uniform_int_distribution<int> d(lo, hi);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(d(rng));
  }
}

}  // namespace

void fill_input(void* data, size_t bytes, const std::string& dtype, uint64_t seed,
                size_t position) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + position + 1);
  if (dtype == "float32") return fill_typed<float>(data, bytes, rng, true);
  if (dtype == "float64") return fill_typed<double>(data, bytes, rng, true);
  if (dtype == "int32") return fill_typed<int32_t>(data, bytes, rng, false);
  if (dtype == "int64") return fill_typed<int64_t>(data, bytes, rng, false);
  // Quantized data spans the whole byte: the extremes are where an int8 kernel that widens or
  // saturates wrongly differs (255 * -128 products, sums beyond int16). int16 holds uint8 weights
  // less their zero point (depthwise weights=s16): [-255, 255].
  if (dtype == "int16") return fill_typed<int16_t>(data, bytes, rng, false, -255, 255);
  if (dtype == "int8") return fill_typed<int8_t>(data, bytes, rng, false, -128, 127);
  if (dtype == "uint8") return fill_typed<uint8_t>(data, bytes, rng, false, 0, 255);
  if (dtype == "bool") return fill_typed<uint8_t>(data, bytes, rng, false);
  if (dtype == "uint32") return fill_typed<uint32_t>(data, bytes, rng, false);
  if (dtype == "bfloat16") {
    // Floats in [-1, 1) rounded to bfloat16, as float32 data is made.
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    auto* p = static_cast<uint16_t*>(data);
    for (size_t i = 0; i < bytes / 2; ++i) p[i] = te::float_to_bfloat16(static_cast<float>(d(rng)));
    return;
  }
  throw Error(ErrorKind::kUnknown, "runner: unsupported dtype " + dtype);
}

}  // namespace ktune::rpc_runner
