// Defines HostBuffer: an owning, 64-byte aligned, typed dense tensor in host memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "te/ir.h"

namespace ktune::te {

// Row-major storage of shape x dtype, zero-initialised. Move-only. Not thread-safe to mutate.
class HostBuffer {
 public:
  HostBuffer() = default;
  // Throws ktune::Error(kInvalidArgument) for a negative extent or a vector dtype.
  HostBuffer(std::vector<int64_t> shape, DataType dtype);

  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <typename T>
  T* as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data());
  }
  const std::vector<int64_t>& shape() const { return shape_; }
  DataType dtype() const { return dtype_; }
  int64_t num_elements() const { return n_; }
  size_t bytes() const { return static_cast<size_t>(n_) * dtype_.bytes(); }

  // Element i converted to/from double.
  double get(int64_t i) const;
  void set(int64_t i, double v);
  // Fills with values from a portable generator (splitmix64; same seed, same data everywhere):
  // floats uniform in [lo, hi), integers uniform among the integers of [lo, hi].
  void fill_random(uint64_t seed, double lo = -1.0, double hi = 1.0);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::vector<int64_t> shape_;
  DataType dtype_ = Float(32);
  int64_t n_ = 0;
  std::unique_ptr<void, Free> data_;
};

// max over elements of |a - b| / max(1, |b|) (b is the reference). Throws
// ktune::Error(kInvalidArgument) when shapes or dtypes differ. NaN counts as infinite error.
double max_relative_error(const HostBuffer& a, const HostBuffer& b);

}  // namespace ktune::te
