// Defines OnednnMatmul and OnednnConv: oneDNN's low-precision operators on a benchmark's own
// buffers, for int8_vs_library (bench/library_race.h holds the float32 libraries' side).
#pragma once

#include <cstdint>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "baselines/placed_memories.h"

namespace ktune::bench {

// oneDNN's matmul C[M,N] = A[M,K] B[K,N] (row-major, of the given types) on the caller's
// buffers, its weights reordered once (into a buffer placed as the caller's should be,
// support/placed_buffer.h) to the format it asks for (here, untimed).
class OnednnMatmul {
 public:
  OnednnMatmul(int64_t M, int64_t N, int64_t K, dnnl::memory::data_type src,
               dnnl::memory::data_type weights, dnnl::memory::data_type dst, void* a, void* b,
               void* c);
  // One product into the caller's C, waited for.
  void run();
  // oneDNN's name of the implementation it picked.
  const std::string& impl() const { return impl_; }

 private:
  dnnl::engine eng_;
  dnnl::stream strm_;
  baselines::PlacedMemories placed_;  // b_'s buffer
  dnnl::memory a_, b_, c_;
  dnnl::matmul prim_;
  std::string impl_;
};

// oneDNN's u8 x s8 -> s32 convolution on the caller's NCHW data and OIHW (or, grouped, GOIHW)
// weights, every format its choice; the reorders to those formats happen here, untimed.
class OnednnConv {
 public:
  OnednnConv(const dnnl::memory::dims& x_dims, const dnnl::memory::dims& w_dims,
             const dnnl::memory::dims& o_dims, int64_t stride, int64_t pad, void* x, void* w,
             void* o);
  // One convolution into oneDNN's own output format, waited for.
  void run();
  // The last run's output in the caller's NCHW buffer.
  void output_to_user();
  // oneDNN's name of the implementation it picked.
  const std::string& impl() const { return impl_; }

 private:
  dnnl::engine eng_;
  dnnl::stream strm_;
  baselines::PlacedMemories placed_;  // x_'s, w_'s and o_'s buffers
  dnnl::memory x_, w_, o_, o_user_;
  dnnl::convolution_forward prim_;
  std::string impl_;
};

}  // namespace ktune::bench
