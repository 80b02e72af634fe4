// Defines the helpers of the generated-kernel tests (model_ops_test.cc, model_ops_nn_test.cc): a
// 64-byte aligned buffer, random inputs, running a lowered kernel compiled for the host with its
// output NaN-filled, and the error against a reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "te/ir.h"

namespace ktune::deploy {

// A 64-byte aligned float buffer (the kernel ABI's alignment).
class Buffer {
 public:
  explicit Buffer(int64_t n)
      : n_(n),
        p_(static_cast<float*>(
            std::aligned_alloc(64, static_cast<size_t>((n * 4 + 63) / 64 * 64)))) {}
  float* data() const { return p_.get(); }
  std::vector<float> values() const { return {p_.get(), p_.get() + n_}; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  int64_t n_;
  std::unique_ptr<float, Free> p_;
};

inline int64_t count_of(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

inline std::vector<float> random(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

// Compiles `f` for the host and runs it on `inputs` (one per input argument, in order); returns
// the output (the last argument), which starts as NaN.
inline std::vector<float> run(const te::LoweredFunc& f,
                              const std::vector<std::vector<float>>& inputs) {
  const codegen::Kernel k = codegen::Kernel::load(codegen::build(f, codegen::Target::host()));
  std::vector<Buffer> bufs;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < f.args.size(); ++i) {
    const int64_t n = f.args[i].num_elements();
    bufs.emplace_back(n);
    if (i < inputs.size()) {
      EXPECT_EQ(static_cast<int64_t>(inputs[i].size()), n) << "argument " << i;
      std::copy(inputs[i].begin(), inputs[i].end(), bufs.back().data());
    } else {
      std::fill(bufs.back().data(), bufs.back().data() + n, NAN);  // an element never written fails
    }
    ptrs.push_back(bufs.back().data());
  }
  EXPECT_EQ(k.run(ptrs), 0);
  return bufs.back().values();
}

// max |got - want| / max(1, |want|), NaN counting as infinite.
inline double worst(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double w = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    w = std::max(w, std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i])));
  }
  return w;
}

}  // namespace ktune::deploy
