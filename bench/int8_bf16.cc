// int8_vs_library's bfloat16 rows: matmul_bf16 tuned, checked against oneDNN's bf16 x bf16 -> f32
// matmul within the bound of two float32 summation orders, timed interleaved with it, and set
// beside ktune's float32 matmul of the shape.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench/int8_onednn.h"
#include "bench/int8_race.h"
#include "support/error.h"
#include "te/bfloat16.h"

namespace ktune::bench::int8 {
namespace {

struct Bf16Row {
  std::string name, onednn_impl;
  double bf16_gflops = 0, onednn_gflops = 0, fp32_gflops = 0;
  size_t measured = 0;
  double worst = 0;  // largest |ktune - oneDNN| over its bound
};

// B (K x N, bfloat16 bits, row-major) in matmul_bf16's [N/16][K/2][16][2] blocks, padding zero.
void pack_b_bf16(const uint16_t* b, int64_t K, int64_t N, uint16_t* out) {
  const int64_t nb = (N + 15) / 16, kb = (K + 1) / 2;
  std::memset(out, 0, static_cast<size_t>(nb * kb * 32) * 2);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j)
      out[((j / 16) * kb + k / 2) * 32 + (j % 16) * 2 + k % 2] = b[k * N + j];
}

// Largest |x - y| over its bound: both sum the same exact products in float32 in some order, so
// each is within gamma_K * sum_k |a_k b_k| of the exact sum (u = 2^-24); > 1 is a wrong answer.
double worst_over_bound(const Shape& s, const uint16_t* a, const uint16_t* b, const float* x,
                        const float* y) {
  const double u = std::ldexp(1.0, -24);
  const double gamma = static_cast<double>(s.K + 1) * u / (1 - static_cast<double>(s.K + 1) * u);
  std::vector<double> abs_sum(static_cast<size_t>(s.N));
  double worst = 0;
  for (int64_t i = 0; i < s.M; ++i) {
    std::fill(abs_sum.begin(), abs_sum.end(), 0.0);
    for (int64_t k = 0; k < s.K; ++k) {
      const double ak = std::fabs(te::bfloat16_to_float(a[i * s.K + k]));
      for (int64_t j = 0; j < s.N; ++j)
        abs_sum[j] += ak * std::fabs(te::bfloat16_to_float(b[k * s.N + j]));
    }
    for (int64_t j = 0; j < s.N; ++j) {
      const double d = std::fabs(double{x[i * s.N + j]} - double{y[i * s.N + j]});
      if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, d / (2 * gamma * abs_sum[j] + 1e-30));
    }
  }
  return worst;
}

Bf16Row bench_bf16_shape(const Shape& s, const schedule_space::TargetTraits& traits,
                         const Options& o) {
  Bf16Row row;
  row.name = s.name;
  const double ops =
      2.0 * static_cast<double>(s.M) * static_cast<double>(s.N) * static_cast<double>(s.K);
  const auto task = task_of("matmul_bf16", gemm_args(s), traits);

  // The same A and B for both sides: uniform in [-1, 1), rounded to bfloat16.
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  Bytes a(static_cast<size_t>(s.M * s.K) * 2), b(static_cast<size_t>(s.K * s.N) * 2);
  auto* a16 = reinterpret_cast<uint16_t*>(a.p);
  auto* b16 = reinterpret_cast<uint16_t*>(b.p);
  for (int64_t i = 0; i < s.M * s.K; ++i) a16[i] = te::float_to_bfloat16(d(rng));
  for (int64_t i = 0; i < s.K * s.N; ++i) b16[i] = te::float_to_bfloat16(d(rng));
  Bytes packed(static_cast<size_t>((s.N + 15) / 16 * ((s.K + 1) / 2) * 32) * 2);
  pack_b_bf16(b16, s.K, s.N, reinterpret_cast<uint16_t*>(packed.p));
  Bytes c_ktune(static_cast<size_t>(s.M * s.N * 4)), c_dnnl(static_cast<size_t>(s.M * s.N * 4));

  const std::vector<void*> kargs = {a.p, packed.p, c_ktune.p};
  const FastestKernel fastest = tune_fastest(task, o.trials, o.threads, o.rounds, kargs);
  const codegen::Kernel& kernel = fastest.kernel;
  row.measured = fastest.measured;
  std::fprintf(stderr, "  bf16 %s: %s\n", s.name, fastest.config.to_json_string().c_str());

  using dt = dnnl::memory::data_type;
  OnednnMatmul onednn(s.M, s.N, s.K, dt::bf16, dt::bf16, dt::f32, a.p, b.p, c_dnnl.p);
  row.onednn_impl = onednn.impl();

  std::memset(c_ktune.p, 0xff, c_ktune.n);
  if (kernel.run(kargs) != 0) throw Error(ErrorKind::kRun, "the bf16 kernel failed");
  onednn.run();
  row.worst = worst_over_bound(s, a16, b16, reinterpret_cast<const float*>(c_ktune.p),
                               reinterpret_cast<const float*>(c_dnnl.p));
  if (!(row.worst <= 1))
    throw Error(ErrorKind::kWrongAnswer, std::string(s.name) +
                                             ": ktune's bf16 result differs from oneDNN's beyond "
                                             "the summation-order bound");
  const std::vector<double> t =
      time_interleaved({[&] { kernel.run(kargs); }, [&] { onednn.run(); }}, o.rounds,
                       o.threads > 1 ? 0.15 : 0.05, o.threads > 1 ? 20e-3 : 2e-3);
  row.bf16_gflops = ops / t[0] * 1e-9;
  row.onednn_gflops = ops / t[1] * 1e-9;
  return row;
}

}  // namespace

void report_bf16(const std::vector<Shape>& shapes, std::vector<double> fp32_gflops,
                 const schedule_space::TargetTraits& traits, const Options& o) {
  std::vector<Bf16Row> rows;
  for (size_t i = 0; i < shapes.size(); ++i) {
    rows.push_back(bench_bf16_shape(shapes[i], traits, o));
    rows.back().fp32_gflops =
        i < fp32_gflops.size()
            ? fp32_gflops[i]
            : race_fp32(task_of("matmul", gemm_args(shapes[i]), traits), o).ktune_gflops;
  }
  std::printf("%-24s %7s %10s %11s %9s %8s %8s %9s  %s\n", "shape", "trials", "bf16_GF/s",
              "oneDNN_bf16", "fp32_GF/s", "vs_dnnl", "vs_fp32", "err/bound", "oneDNN impl");
  std::vector<double> vs_dnnl, vs_fp32;
  for (const Bf16Row& r : rows) {
    vs_dnnl.push_back(r.bf16_gflops / r.onednn_gflops);
    vs_fp32.push_back(r.bf16_gflops / r.fp32_gflops);
    std::printf("%-24s %7zu %10.1f %11.1f %9.1f %8.3f %8.3f %9.3f  %s\n", r.name.c_str(),
                r.measured, r.bf16_gflops, r.onednn_gflops, r.fp32_gflops, vs_dnnl.back(),
                vs_fp32.back(), r.worst, r.onednn_impl.c_str());
  }
  std::printf("bf16_over_fp32 %.3f\n", geomean(vs_fp32));
  std::printf("bf16_over_onednn %.3f\n", geomean(vs_dnnl));
}

}  // namespace ktune::bench::int8
