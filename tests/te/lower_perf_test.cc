// Perf test: how long lower() takes for the tuner's typical GEMM and conv2d schedules.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "te/lower.h"
#include "te/schedule.h"
#include "tests/te/te_ops.h"

namespace ktune::te {
namespace {

template <typename F>
double ms_per_call(int n, F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
         n;
}

TEST(LowerPerfTest, GemmAndConvTemplates) {
  double gemm = ms_per_call(50, [] {
    auto op = testing::matmul(1024, 1024, 1024);
    Schedule s = create_schedule(op.outputs);
    Tensor C = op.outputs[0];
    Tensor CC = s.cache_write(C, "local");
    auto [io, jo, ii, ji] = s[C].tile(s[C].axis(0), s[C].axis(1), 8, 32);
    s[CC].compute_at(s[C], jo);
    auto [ko, ki] = s[CC].split(s[CC].reduce_axis(0), 8);
    s[CC].reorder({ko, ki, s[CC].axis(0), s[CC].axis(1)});
    s[CC].unroll(ki);
    s[CC].unroll(s[CC].axis(0));
    s[CC].vectorize(s[CC].axis(1));
    s[C].vectorize(ji);
    s[C].parallel(io);
    LoweredFunc f = lower(s, op.args(), "gemm");
    ASSERT_TRUE(f.body.defined());
  });
  double conv = ms_per_call(50, [] {
    auto op = testing::conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1);
    Schedule s = create_schedule(op.outputs);
    Tensor O = op.outputs[0];
    Tensor P = s.node().stages[1].tensor;
    Tensor OL = s.cache_write(O, "local");
    Stage st = s[O];
    auto [ko, ki] = st.split(st.axis(1), 16);
    auto [yo, yi] = st.split(st.axis(2), 2);
    auto [xo, xi] = st.split(st.axis(3), 8);
    st.reorder({ko, yo, xo, yi, ki, xi});
    s[OL].compute_at(st, xo);
    s[P].compute_at(st, yo);
    Stage sl = s[OL];
    sl.reorder({sl.reduce_axis(0), sl.reduce_axis(1), sl.reduce_axis(2), sl.axis(0), sl.axis(2),
                sl.axis(1), sl.axis(3)});
    sl.unroll(sl.axis(2));
    sl.vectorize(sl.axis(3));
    st.parallel(ko);
    LoweredFunc f = lower(s, op.args(), "conv");
    ASSERT_TRUE(f.body.defined());
  });
  std::printf("lower gemm_1024_tile8x32_unroll8x8 %.2f ms\n", gemm);
  std::printf("lower conv2d_c64_56x56_tile16x2x8 %.2f ms\n", conv);
  std::printf("lower_ms_gemm %.2f\n", gemm);
}

}  // namespace
}  // namespace ktune::te
