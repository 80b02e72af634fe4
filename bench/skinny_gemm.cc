// Benchmark: skinny and small GEMMs (GEMV M=1, small batches, tiny and odd sizes) tuned by ktune
// against OpenBLAS in this process on ONE thread (cblas_sgemv for M=1, cblas_sgemm otherwise),
// plus how split tails are best lowered: the tuned N=1000 GEMV kernel with its tail peeled off
// (a narrower vector for the last columns) against the same kernel with the tail guarded (the
// guarded vector loop runs as scalar code). Kernels are re-timed interleaved with the library:
// one warm-up call each, then rounds, median per kernel. Prints a table and, last,
// `skinny_geomean_vs_openblas <ktune / OpenBLAS GFLOP/s, geometric mean over the shapes>`.
//
// Usage: skinny_gemm [--trials N] [--rounds R] [--seed S]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cblas.h>

#include "bench/cli.h"
#include "bench/library_race.h"
#include "bench/openblas_best.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "te/lower.h"

namespace {

using namespace ktune;  // NOLINT: a benchmark program, not a library

struct Shape {
  int64_t m, n, k;
  const char* what;
};

// Classifier heads (ImageNet 1000 classes), transformer projections at small batch and the
// sequence lengths 77 (CLIP text) and 197 (ViT-B/16), tiny and prime sizes.
const Shape kShapes[] = {
    {1, 1000, 512, "GEMV, ResNet-18 head"},
    {1, 1000, 2048, "GEMV, ResNet-50 head"},
    {8, 1000, 512, "batch 8 head"},
    {16, 768, 768, "batch 16 projection"},
    {77, 768, 768, "CLIP text, seq 77"},
    {197, 768, 768, "ViT-B/16, seq 197"},
    {50, 50, 50, "tiny"},
    {13, 97, 31, "primes"},
};

// Kernels assume 64-byte aligned buffers (the kernel ABI); std::vector's are not.
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}  // NOLINT: allocator rebinding
  T* allocate(size_t n) {
    return static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64));
  }
  void deallocate(T* p, size_t) { std::free(p); }
  bool operator==(const Aligned64&) const { return true; }
};
using Floats = std::vector<float, Aligned64<float>>;

Floats random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Floats v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Options {
  size_t trials = 64;
  int rounds = 30;
  uint64_t seed = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"Skinny and small matmuls: tuned kernels against OpenBLAS, one thread"};
  app.add_option("--trials", o.trials, "Tuning trials per shape")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", o.rounds, "Interleaved timing rounds")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "Seed of the searches");
  bench::parse_or_exit(app, argc, argv);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const codegen::Target host = codegen::Target::host();
  bench::use_openblas_at_its_best(host.vector_bits(), argv);
  bench::set_all_threads(1);
  const auto traits =
      schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), 1);
  std::printf("skinny GEMMs, float32, one thread, %zu xgb trials each, OpenBLAS %s (%s)\n",
              o.trials, openblas_get_config(), openblas_get_corename());
  std::printf("%-22s %5s %5s %5s %10s %10s %7s %9s\n", "shape", "M", "N", "K", "ktune", "OpenBLAS",
              "ratio", "max err");
  double log_sum = 0;
  int count = 0;
  schedule_space::Config gemv_best;
  for (const Shape& s : kShapes) {
    const auto task = schedule_space::Task::create(
        "matmul",
        {{"M", std::to_string(s.m)}, {"N", std::to_string(s.n)}, {"K", std::to_string(s.k)}},
        traits);
    const Floats a = random_vector(s.m * s.k, 11), b = random_vector(s.k * s.n, 12);
    Floats c(s.m * s.n), ref(s.m * s.n);
    const auto finalists = bench::tune_finalists(task, o.trials, o.seed, 1, 3, 4).finalists;
    std::vector<codegen::Kernel> kernels;
    for (const auto& cfg : finalists) kernels.push_back(bench::load_kernel(task, cfg));
    void* args[] = {const_cast<float*>(a.data()), const_cast<float*>(b.data()), c.data()};
    std::vector<std::function<void()>> fns;
    for (const auto& k : kernels) fns.push_back([&k, &args] { k.run(args); });
    fns.push_back([&] {
      if (s.m == 1) {
        // y = x^T B: B is K x N row-major, so y = B^T x.
        cblas_sgemv(CblasRowMajor, CblasTrans, s.k, s.n, 1.0f, b.data(), s.n, a.data(), 1, 0.0f,
                    ref.data(), 1);
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k,
                    b.data(), s.n, 0.0f, ref.data(), s.n);
      }
    });
    const std::vector<double> t = bench::time_interleaved(fns, o.rounds);
    const size_t best = static_cast<size_t>(std::min_element(t.begin(), t.end() - 1) - t.begin());
    std::fill(c.begin(), c.end(), std::nanf(""));
    kernels[best].run(args);
    double err = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const double d = std::fabs(static_cast<double>(c[i]) - ref[i]);
      err = std::isnan(d) ? INFINITY : std::max(err, d);
    }
    const double gf = task.flop() * 1e-9;
    const double ratio = t.back() / t[best];
    std::printf("%-22s %5lld %5lld %5lld %10.1f %10.1f %7.3f %9.2g\n", s.what,
                static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), gf / t[best], gf / t.back(), ratio, err);
    std::fflush(stdout);
    log_sum += std::log(ratio);
    ++count;
    if (s.m == 1 && s.n == 1000 && s.k == 512) gemv_best = finalists[best];
  }

  // Tails: N = 1000 is not a multiple of the 16-lane vector. Same config, two lowerings.
  const auto gemv =
      schedule_space::Task::create("matmul", {{"M", "1"}, {"N", "1000"}, {"K", "512"}}, traits);
  const Floats a = random_vector(512, 21), b = random_vector(512 * 1000, 22);
  Floats c(1000);
  void* args[] = {const_cast<float*>(a.data()), const_cast<float*>(b.data()), c.data()};
  te::LowerOptions guarded_tail;
  guarded_tail.partition_loops = false;
  const codegen::Kernel peeled = bench::load_kernel(gemv, gemv_best),
                        guarded = bench::load_kernel(gemv, gemv_best, guarded_tail);
  const std::vector<double> t =
      bench::time_interleaved({[&] { peeled.run(args); }, [&] { guarded.run(args); }}, o.rounds);
  std::printf(
      "tail of matmul M=1 N=1000 K=512, config %s:\n  peeled (narrow vector tail) %.1f GFLOP/s, "
      "guarded "
      "(scalar tail) %.1f GFLOP/s, peeled/guarded %.2f\n",
      gemv_best.to_json_string().c_str(), gemv.flop() * 1e-9 / t[0], gemv.flop() * 1e-9 / t[1],
      t[1] / t[0]);
  std::printf("skinny_geomean_vs_openblas %.3f\n", std::exp(log_sum / count));
  return 0;
}
