// A program that takes a matmul kernel from a tuning log at run time (ktune::apply_history_best:
// the log's best config for this shape, else the nearest tuned shape's, else the template's
// fallback), runs it on seeded data and checks every output element (pre-filled with NaN)
// against a plain C++ loop in double.
//
// Usage: jit_consumer <tuning log> [M N K]   (default 64 64 64)
// Prints "source tuned|nearest|fallback", the note saying which record, "checked <n> bad <b>
// max_rel_err <e>", "checksum <sum of the outputs>" and "jit ok"; exit 1 on a wrong result or
// an error (one line on stderr).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <ktune/deploy/history_best.h>
#include <ktune/support/logging.h>

namespace {

// A 64-byte aligned float buffer (the kernel ABI).
using Buffer = std::unique_ptr<float[], decltype(&std::free)>;

Buffer make_buffer(size_t count) {
  const size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) throw std::bad_alloc();
  return Buffer(p, &std::free);
}

// Uniform values in [-1, 1) from a fixed seed: the same data on every run.
void fill(float* p, size_t count, unsigned long long& state) {
  for (size_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = static_cast<float>(2.0 * static_cast<double>(state >> 40) / 16777216.0 - 1.0);
  }
}

const char* source_name(ktune::AppliedKernel::Source source) {
  switch (source) {
    case ktune::AppliedKernel::Source::kTuned:
      return "tuned";
    case ktune::AppliedKernel::Source::kNearest:
      return "nearest";
    case ktune::AppliedKernel::Source::kFallback:
      return "fallback";
  }
  return "?";
}

int run(int argc, char** argv) {
  if (argc != 2 && argc != 5) {
    std::fprintf(stderr, "usage: jit_consumer <tuning log> [M N K]\n");
    return 1;
  }
  ktune::setup_logging(
      {});  // ktune's warnings (nearest, fallback) go to stderr, not into our output
  const std::string m = argc == 5 ? argv[2] : "64", n = argc == 5 ? argv[3] : "64",
                    k = argc == 5 ? argv[4] : "64";
  const ktune::schedule_space::Task task =
      ktune::make_task("matmul", {{"M", m}, {"N", n}, {"K", k}});
  ktune::AppliedKernel applied =
      ktune::apply_history_best(ktune::HistorySource::log(argv[1]), task);
  std::printf("source %s\nnote %s\n", source_name(applied.source), applied.note.c_str());

  // matmul's arguments: A [M,K], B [K,N], C [M,N] (row-major).
  const size_t M = std::stoul(m), N = std::stoul(n), K = std::stoul(k);
  Buffer a = make_buffer(M * K), b = make_buffer(K * N), c = make_buffer(M * N);
  unsigned long long state = 2024;
  fill(a.get(), M * K, state);
  fill(b.get(), K * N, state);
  std::fill_n(c.get(), M * N, std::numeric_limits<float>::quiet_NaN());
  const int32_t status = applied.kernel.run({a.get(), b.get(), c.get()});
  if (status != 0) {
    std::fprintf(stderr, "jit_consumer: the kernel returned %d\n", static_cast<int>(status));
    return 1;
  }

  size_t bad = 0;
  double max_rel_err = 0, checksum = 0;
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      double want = 0, scale = 0;
      for (size_t p = 0; p < K; ++p) {
        want += double(a[i * K + p]) * double(b[p * N + j]);
        scale += std::fabs(double(a[i * K + p]) * double(b[p * N + j]));
      }
      const double got = c[i * N + j];
      const double rel_err = std::fabs(got - want) / (scale > 0 ? scale : 1);
      if (!(rel_err <= 1e-5)) ++bad;  // NaN (an element never written) counts as bad
      if (rel_err > max_rel_err || std::isnan(rel_err)) max_rel_err = rel_err;
      checksum += got;
    }
  std::printf("checked %zu bad %zu max_rel_err %.3g\nchecksum %.6f\n", M * N, bad, max_rel_err,
              checksum);
  std::printf(bad == 0 ? "jit ok\n" : "jit FAILED\n");
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit_consumer: %s\n", e.what());
    return 1;
  }
}
