// Benchmark: matmul 1024^3 float32 through ktune's codegen against OpenBLAS cblas_sgemm, on one
// thread and on two: a te schedule, and the same loop nest written as lowered IR by hand.
// Prints GFLOP/s, the median LLVM build time, and `ratio_vs_openblas <x>` (one thread, te
// schedule) as its last line.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <cblas.h>
#include <time.h>
#include <unistd.h>

#include "bench/openblas_best.h"
#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "codegen/target.h"
#include "te/ir.h"
#include "te/ir_printer.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace {

using namespace ktune::te;  // NOLINT: IR construction reads better unqualified
using Clock = std::chrono::steady_clock;
constexpr int64_t kM = 1024, kN = 1024, kK = 1024;

struct Aligned {
  explicit Aligned(size_t n) : p(static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)))) {}
  ~Aligned() { std::free(p); }
  float* p;
};

Expr i64(int64_t v) { return IntImm::make(v); }

// The loop nest of the schedule, written directly as lowered loop IR (the shape te's lowering
// gives for: tile C by (mi, bn), cache_write C (register tile, k outermost inside it, rows
// unrolled, columns vectorized), cache_read B at the column tile (packing B's K x bn panel),
// parallel column tiles):
//   parallel for jo in N/bn:
//     B_p[K*bn]: for k: B_p[k*bn : +bn] = B[k*N + jo*bn : +bn]
//     for io in M/mi:
//       C_l[mi*bn] = 0
//       for k in K: for ii in mi (unrolled): C_l[ii*bn : +bn] += A[(io*mi+ii)*K + k] * B_p[k*bn :
//       +bn] for ii in mi (unrolled): C[(io*mi+ii)*N + jo*bn : +bn] = C_l[ii*bn : +bn]
LoweredFunc matmul_lowered(int64_t m, int64_t n, int64_t k, int vector_bits) {
  const int64_t bn = 2 * vector_bits / 32, mi = 8;
  const int lanes = static_cast<int>(bn);
  Buffer a = Buffer::make("A", Float(32)), b = Buffer::make("B", Float(32)),
         c = Buffer::make("C", Float(32));
  Buffer bp = Buffer::make("B_p", Float(32)), cl = Buffer::make("C_l", Float(32));
  Var jo("jo"), io("io"), kk("k"), k2("k2"), ii("ii"), ii2("ii2"), ii3("ii3");
  auto ramp = [&](Expr base) { return Ramp::make(std::move(base), i64(1), lanes); };
  Stmt pack = For::make(
      k2, i64(0), i64(k), ForKind::kSerial,
      Store::make(bp, Load::make(b, ramp(Add::make(Mul::make(k2, i64(n)), Mul::make(jo, i64(bn))))),
                  ramp(Mul::make(k2, i64(bn)))));
  Stmt init = For::make(
      ii, i64(0), i64(mi), ForKind::kUnrolled,
      Store::make(cl, Broadcast::make(FloatImm::make(0.0), lanes), ramp(Mul::make(ii, i64(bn)))));
  Expr a_elem =
      Load::make(a, Add::make(Mul::make(Add::make(Mul::make(io, i64(mi)), ii2), i64(k)), kk));
  Expr acc = Add::make(
      Load::make(cl, ramp(Mul::make(ii2, i64(bn)))),
      Mul::make(Broadcast::make(a_elem, lanes), Load::make(bp, ramp(Mul::make(kk, i64(bn))))));
  Stmt update = For::make(kk, i64(0), i64(k), ForKind::kSerial,
                          For::make(ii2, i64(0), i64(mi), ForKind::kUnrolled,
                                    Store::make(cl, acc, ramp(Mul::make(ii2, i64(bn))))));
  Expr c_index = ramp(
      Add::make(Mul::make(Add::make(Mul::make(io, i64(mi)), ii3), i64(n)), Mul::make(jo, i64(bn))));
  Stmt write = For::make(ii3, i64(0), i64(mi), ForKind::kUnrolled,
                         Store::make(c, Load::make(cl, ramp(Mul::make(ii3, i64(bn)))), c_index));
  Stmt tile = Allocate::make(cl, i64(mi * bn), Block::make({init, update, write}));
  Stmt rows = For::make(io, i64(0), i64(m / mi), ForKind::kSerial, tile);
  Stmt body = For::make(jo, i64(0), i64(n / bn), ForKind::kParallel,
                        Allocate::make(bp, i64(k * bn), Block::make({pack, rows})));
  return {
      "matmul",
      {{a, {m, k}, Float(32), false}, {b, {k, n}, Float(32), false}, {c, {m, n}, Float(32), true}},
      body};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr int kRounds = 15;

// Times the callables in interleaved rounds (after one warm-up call each), so that load from
// other processes drifts over all of them alike; returns the median seconds of each.
std::vector<double> time_interleaved(const std::vector<std::function<void()>>& fns) {
  for (const auto& fn : fns) fn();
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < kRounds; ++r) {
    for (size_t i = 0; i < fns.size(); ++i) {
      auto start = Clock::now();
      fns[i]();
      t[i].push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  std::vector<double> out;
  for (auto& v : t) out.push_back(median(v));
  return out;
}

// The same kernel as a te schedule, the way a template states it (TVM's dense_pack): B is
// packed into column panels by a compute stage, Bp[jo, k, ji] = B[k, jo*bn + ji]; C is tiled by
// (mi, bn) and cached in a register tile (cache_write) computed at the row tile, k outermost,
// rows unrolled, columns vectorized; column tiles run in parallel.
LoweredFunc matmul_scheduled(int64_t m, int64_t n, int64_t k, int vector_bits) {
  const int64_t bn = 2 * vector_bits / 32, mi = 8;
  Tensor a = placeholder({m, k}, Float(32), "A"), b = placeholder({k, n}, Float(32), "B");
  Tensor bp = compute(
      {n / bn, k, bn}, [&](Var x, Var y, Var z) { return b(y, x * bn + z); }, "B_packed");
  IterVar kk = reduce_axis({0, k}, "k");
  Tensor c = compute(
      {m, n}, [&](Var i, Var j) { return sum(a(i, kk) * bp(j / bn, kk, j % bn), kk); }, "C");
  Schedule s = create_schedule({c});
  Tensor cl = s.cache_write(c, "local");
  auto [jo, ji] = s[c].split(s[c].axis(1), bn);
  auto [io, ii] = s[c].split(s[c].axis(0), mi);
  s[c].reorder({jo, io, ii, ji});
  s[c].unroll(ii);
  s[c].vectorize(ji);
  s[c].parallel(jo);
  s[cl].compute_at(s[c], io);
  s[cl].reorder({s[cl].reduce_axis(0), s[cl].axis(0), s[cl].axis(1)});
  s[cl].unroll(s[cl].axis(0));
  s[cl].vectorize(s[cl].axis(1));
  s[bp].vectorize(s[bp].axis(2));
  s[bp].parallel(s[bp].axis(0));
  return lower(s, {a, b, c}, "matmul");
}

struct Measured {
  double gflops = 0;
  double max_error = 0;
  int status = 0;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace ktune::codegen;
  const Target host = Target::host();
  ktune::bench::use_openblas_at_its_best(host.vector_bits(), argv);
  LoweredFunc scheduled;
  std::string te_error;
  try {
    scheduled = matmul_scheduled(kM, kN, kK, host.vector_bits());
  } catch (const std::exception& e) {
    te_error = e.what();
  }
  const LoweredFunc by_hand = matmul_lowered(kM, kN, kK, host.vector_bits());
  if (argc > 1 && std::strcmp(argv[1], "--ir") == 0) {  // te's lowered loop IR
    std::fputs((te_error.empty() ? to_string(scheduled) : te_error).c_str(), stdout);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--asm") == 0) {  // the kernel's assembly, for inspection
    std::fputs(emit_assembly(te_error.empty() ? scheduled : by_hand, host).c_str(), stdout);
    return 0;
  }
  std::printf("target %s (vector bits %d, cores %d), LLVM %s\n", host.str().c_str(),
              host.vector_bits(), host.cores(), llvm_version().c_str());
  std::printf("OpenBLAS %s, core %s\n", openblas_get_config(), openblas_get_corename());
  if (!te_error.empty()) std::printf("te schedule could not be lowered: %s\n", te_error.c_str());

  Aligned a(kM * kK), b(kK * kN), c(kM * kN), ref(kM * kN);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < kM * kK; ++i) a.p[i] = dist(rng);
  for (int64_t i = 0; i < kK * kN; ++i) b.p[i] = dist(rng);

  // Build several times: the median is the figure (the first build also warms LLVM up). CPU
  // time is printed beside wall time because this machine is shared.
  std::vector<double> build_ms, build_cpu_ms;
  Artifact art_hand, art_te;
  auto timed_build = [&](const LoweredFunc& f) {
    timespec c0{}, c1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    const auto start = Clock::now();
    Artifact art = build(f, host);
    build_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    build_cpu_ms.push_back((c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) * 1e-6);
    return art;
  };
  for (int i = 0; i < 5; ++i) {
    art_hand = timed_build(by_hand);
    if (te_error.empty()) art_te = timed_build(scheduled);
  }
  Kernel k_hand = Kernel::load(art_hand);
  std::optional<Kernel> k_te;
  if (te_error.empty()) k_te.emplace(Kernel::load(art_te));

  const double flops = 2.0 * kM * kN * kK;
  Aligned c_te(kM * kN);
  double ratio_one = 0;
  std::printf("%-8s %12s %12s %12s %10s %10s\n", "threads", "te-schedule", "hand-IR", "OpenBLAS",
              "ratio(te)", "ratio(IR)");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    openblas_set_num_threads(threads);
    Measured hand, sched;
    void* args_hand[] = {a.p, b.p, c.p};
    void* args_te[] = {a.p, b.p, c_te.p};
    std::vector<std::function<void()>> fns = {[&] {
                                                cblas_sgemm(CblasRowMajor, CblasNoTrans,
                                                            CblasNoTrans, kM, kN, kK, 1.0f, a.p, kK,
                                                            b.p, kN, 0.0f, ref.p, kN);
                                              },
                                              [&] { hand.status |= k_hand.run(args_hand); }};
    if (k_te) fns.push_back([&] { sched.status |= k_te->run(args_te); });
    const std::vector<double> t = time_interleaved(fns);
    const double g_blas = flops / t[0] * 1e-9;
    hand.gflops = flops / t[1] * 1e-9;
    if (k_te) sched.gflops = flops / t[2] * 1e-9;
    for (int64_t i = 0; i < kM * kN; ++i) {
      hand.max_error = std::max(hand.max_error, static_cast<double>(std::fabs(c.p[i] - ref.p[i])));
      if (k_te)
        sched.max_error =
            std::max(sched.max_error, static_cast<double>(std::fabs(c_te.p[i] - ref.p[i])));
    }
    for (const Measured* r : {&hand, &sched}) {
      if (r->status != 0 || r->max_error > 1e-2) {
        std::fprintf(stderr, "wrong result: status %d, max error %g\n", r->status, r->max_error);
        return 1;
      }
    }
    std::printf("%-8d %12.1f %12.1f %12.1f %10.3f %10.3f\n", threads, sched.gflops, hand.gflops,
                g_blas, sched.gflops / g_blas, hand.gflops / g_blas);
    if (threads == 1) ratio_one = (k_te ? sched.gflops : hand.gflops) / g_blas;
  }
  std::printf("median LLVM build time per kernel: %.1f ms wall, %.1f ms CPU (%zu builds)\n",
              median(build_ms), median(build_cpu_ms), build_ms.size());
  if (!k_te) std::printf("(ratio below is the hand-lowered IR's: te's schedule did not lower)\n");
  std::printf("ratio_vs_openblas %.3f\n", ratio_one);
  return 0;
}
