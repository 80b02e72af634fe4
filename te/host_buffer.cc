// Implements HostBuffer.
#include "te/host_buffer.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "support/error.h"
#include "support/placed_buffer.h"
#include "te/scalar_ops.h"

namespace ktune::te {

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

HostBuffer::HostBuffer(std::vector<int64_t> shape, DataType dtype)
    : shape_(std::move(shape)), dtype_(dtype) {
  if (dtype.is_vector()) throw Error(ErrorKind::kInvalidArgument, "HostBuffer of a vector type");
  n_ = 1;
  for (int64_t d : shape_) {
    if (d < 0) throw Error(ErrorKind::kInvalidArgument, "HostBuffer with a negative extent");
    n_ *= d;
  }
  // Placed as every buffer a kernel is timed with (a large one on huge pages).
  const int64_t bytes = n_ * dtype.bytes();
  void* p = allocate_placed(bytes, 64);
  std::memset(p, 0, static_cast<size_t>(bytes));
  data_.reset(p);
}

double HostBuffer::get(int64_t i) const {
  Scalar s = scalar_load(data(), dtype_, i);
  if (dtype_.is_float()) return s.f;
  return static_cast<double>(s.i);
}

void HostBuffer::set(int64_t i, double v) {
  Scalar s;
  if (dtype_.is_float()) {
    s.f = v;
  } else {
    s.i = static_cast<int64_t>(v);
  }
  scalar_store(data(), dtype_, i, scalar_normalize(dtype_, s));
}

void HostBuffer::fill_random(uint64_t seed, double lo, double hi) {
  uint64_t state = seed;
  auto next = [&state]() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (int64_t i = 0; i < n_; ++i) {
    double u = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
    if (dtype_.is_float()) {
      set(i, lo + (hi - lo) * u);
    } else {
      double a = std::ceil(lo), b = std::floor(hi);
      set(i, a + std::floor(u * (b - a + 1)));
    }
  }
}

double max_relative_error(const HostBuffer& a, const HostBuffer& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
    throw Error(ErrorKind::kInvalidArgument,
                "max_relative_error: buffers differ in shape or dtype");
  }
  double worst = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    double x = a.get(i), y = b.get(i);
    if (std::isnan(x) != std::isnan(y)) return std::numeric_limits<double>::infinity();
    if (std::isnan(x) || x == y) continue;
    double e = std::fabs(x - y) / std::max(1.0, std::fabs(y));
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

}  // namespace ktune::te
