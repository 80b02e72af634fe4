// Benchmark: ktune's xgb-tuned kernels against the libraries on ONE thread, in one process:
// matmul 1024^3 float32 against OpenBLAS cblas_sgemm, then conv2d N=1 C=64 H=56 W=56 K=64 3x3
// stride 1 pad 1 against oneDNN's forward-inference convolution. Each runs in the layouts made for
// it, reorders outside the timing: oneDNN in what format `any` picks (printed), ktune's
// conv2d_nchwc template in NCHW16c input and output and [K/16][C/16][R][S][16][16] weights. Every
// kernel is timed the same way: one warm-up call each, then interleaved rounds, median per kernel.
// Prints a table, `conv2d_ratio_vs_onednn <x>`, and as its last line `matmul_ratio_vs_openblas
// <x>`.
//
// With --threads N (N > 1): the six workloads of bench/shipped_vs_recorded (four ResNet-18
// conv2d_nchwc layers, matmul 512^3 and 1024^3), each tuned at N threads with --trials trials and
// raced at N threads against oneDNN / OpenBLAS (bench::race); prints a table and, last,
// `tuned_vs_library_geomean <x>` (ktune / library GFLOP/s).
//
// With --winograd M (2, 4 or 6): only the four ResNet-18 3x3 layers, as conv2d_winograd_nchwc
// F(M x M, 3 x 3) tasks tuned with --trials trials at --threads threads (1 too), each raced
// against oneDNN's DIRECT convolution of the same shape (GFLOP/s count the direct FLOPs on both
// sides); last line `winograd_vs_onednn_direct_geomean <x>`.
//
// With --direct-3x3: ResNet-18's 3x3 layers (the four stride-1 ones above and the three stride-2
// ones) as conv2d_nchwc tasks (the skip_taps knob lets a schedule compute only the taps inside the
// input) tuned with --trials trials at --threads threads (1 too) and raced against oneDNN's direct
// convolution; last line `direct_3x3_vs_onednn_geomean <x>`, with the worst ratio before it.
//
// Convolutions also get their useful work: the share of the nominal FLOPs that are taps inside the
// input (bench/useful_work.h), and the useful GFLOP/s as a share of the FMA peak (bench/fma_peak.h,
// per thread times the threads).
//
// --only NAME_PART (with --winograd, --threads N > 1 or --direct-3x3): only the workloads whose
// name contains it (e.g. 7x7).
//
// Usage: tuned_vs_library [--trials N] [--conv-trials N] [--seed S] [--rounds R] [--threads N]
//                         [--winograd M | --direct-3x3] [--only NAME_PART]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cblas.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.hpp>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/cli.h"
#include "bench/fma_peak.h"
#include "bench/library_race.h"
#include "bench/openblas_best.h"
#include "bench/useful_work.h"
#include "bench/workloads.h"
#include "codegen/runtime.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "support/error.h"

namespace {

using namespace ktune;  // NOLINT: a benchmark program, not a library

struct Options {
  // Budgets (<= 1000 each). On a 2-core Zen 4 VM 192 matmul trials take 90-115 s and 192
  // conv2d_nchwc trials 26-33 s (build + check + timing): the whole run takes about 4 minutes.
  size_t trials = 192;
  size_t conv_trials = 384;
  uint64_t seed = 1;
  int rounds = 15;  // timed rounds per kernel (median taken)
  int threads = 1;
  int winograd = 0;  // m of the Winograd rows; 0: the default benchmark
  bool direct_3x3 = false;
  std::string only;  // with --winograd / --threads / --direct-3x3: rows whose name contains this
};

double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

struct Tuned {
  schedule_space::Config config;
  double tuning_gflops = 0;  // as measured by the runner during tuning
  size_t measured = 0, ok = 0;
  double wall_s = 0;
  codegen::Kernel kernel;
};

// Tunes `task` on one thread (bench::tune_finalists: xgb, local runner, the fallback among the
// candidates), then JIT-loads the five best configs into this process and keeps the fastest there:
// the runner timed each config in its own process with its own buffers, and the kernel that
// counts is the one this process runs.
Tuned tune_and_load(const schedule_space::Task& task, size_t trials, uint64_t seed,
                    void* const* args, int rounds) {
  const bench::TuneRun run = bench::tune_finalists(task, trials, seed, 1, 5);
  std::vector<codegen::Kernel> kernels;
  std::vector<std::function<void()>> runs;
  for (const auto& cfg : run.finalists) kernels.push_back(bench::load_kernel(task, cfg));
  for (const auto& k : kernels) runs.push_back([&k, args] { k.run(args); });
  const std::vector<double> s = bench::time_interleaved(runs, rounds);
  const size_t pick = static_cast<size_t>(std::min_element(s.begin(), s.end()) - s.begin());
  return {run.finalists[pick], task.flop() / run.runner_seconds[pick] * 1e-9,
          run.measured,        run.ok,
          run.wall_s,          std::move(kernels[pick])};
}

struct Row {
  std::string name, library;
  double ktune_gflops = 0, library_gflops = 0, tuning_gflops = 0;
  size_t measured = 0, ok = 0;
  double wall_s = 0, max_error = 0;
  std::string config;
  double useful = 1;  // share of the nominal FLOPs inside the input (bench/useful_work.h)
};

void print_row(const Row& r) {
  std::printf("%-8s %9zu %6zu %9.0f %13.1f %13.1f %12.1f %-10s %7.3f %10.2g\n", r.name.c_str(),
              r.measured, r.ok, r.wall_s, r.tuning_gflops, r.ktune_gflops, r.library_gflops,
              r.library.c_str(), r.ktune_gflops / r.library_gflops, r.max_error);
}

Row bench_matmul(const schedule_space::TargetTraits& traits, const Options& o) {
  constexpr int64_t kM = 1024, kN = 1024, kK = 1024;
  auto task =
      schedule_space::Task::create("matmul", {{"M", "1024"}, {"N", "1024"}, {"K", "1024"}}, traits);
  bench::AlignedFloats a(kM * kK), b(kK * kN), c(kM * kN), ref(kM * kN);
  bench::fill_random(a, o.seed + 11);
  bench::fill_random(b, o.seed + 12);
  int status = 0;
  void* args[] = {a.p, b.p, c.p};
  Tuned t = tune_and_load(task, o.trials, o.seed, args, o.rounds);
  const std::vector<double> s =
      bench::time_interleaved({[&] { status |= t.kernel.run(args); },
                               [&] {
                                 cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kM, kN, kK,
                                             1.0f, a.p, kK, b.p, kN, 0.0f, ref.p, kN);
                               }},
                              o.rounds);
  if (status != 0)
    throw Error(ErrorKind::kRun, "tuned matmul returned status " + std::to_string(status));
  const double flop = task.flop();
  return {"matmul",
          "OpenBLAS",
          flop / s[0] * 1e-9,
          flop / s[1] * 1e-9,
          t.tuning_gflops,
          t.measured,
          t.ok,
          t.wall_s,
          max_abs_diff(c.p, ref.p, c.n),
          t.config.to_json().dump()};
}

// Direct NCHW convolution in double: the correctness reference of both conv2d kernels.
void conv_reference(const float* in, const float* w, float* out, int64_t C, int64_t H, int64_t W,
                    int64_t K) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        double acc = 0;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t r = 0; r < 3; ++r)
            for (int64_t s = 0; s < 3; ++s) {
              const int64_t iy = y + r - 1, ix = x + s - 1;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              acc +=
                  static_cast<double>(in[(c * H + iy) * W + ix]) * w[((k * C + c) * 3 + r) * 3 + s];
            }
        out[(k * H + y) * W + x] = static_cast<float>(acc);
      }
}

// NCHW -> NCHW[b]c and back (one image), and KCRS weights -> [K/b][C/b][R][S][b in][b out].
void to_blocked(const float* nchw, float* blocked, int64_t C, int64_t HW, int64_t b) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < HW; ++i) blocked[((c / b) * HW + i) * b + c % b] = nchw[c * HW + i];
}
void from_blocked(const float* blocked, float* nchw, int64_t C, int64_t HW, int64_t b) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < HW; ++i) nchw[c * HW + i] = blocked[((c / b) * HW + i) * b + c % b];
}
void weights_to_blocked(const float* kcrs, float* blocked, int64_t K, int64_t C, int64_t RS,
                        int64_t b) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t rs = 0; rs < RS; ++rs)
        blocked[((((k / b) * (C / b) + c / b) * RS + rs) * b + c % b) * b + k % b] =
            kcrs[(k * C + c) * RS + rs];
}

Row bench_conv2d(const schedule_space::TargetTraits& traits, const Options& o) {
  constexpr int64_t kC = 64, kH = 56, kW = 56, kK = 64, kBlock = 16;
  auto task = schedule_space::Task::create("conv2d_nchwc",
                                           {{"N", "1"},
                                            {"C", "64"},
                                            {"H", "56"},
                                            {"W", "56"},
                                            {"K", "64"},
                                            {"R", "3"},
                                            {"S", "3"},
                                            {"stride", "1"},
                                            {"pad", "1"},
                                            {"ic_block", "16"},
                                            {"oc_block", "16"}},
                                           traits);
  bench::AlignedFloats in(kC * kH * kW), w(kK * kC * 9), out(kK * kH * kW), ref(kK * kH * kW),
      dnnl_out(kK * kH * kW);
  bench::AlignedFloats in_blocked(in.n), w_blocked(w.n), out_blocked(out.n);
  bench::fill_random(in, o.seed + 21);
  bench::fill_random(w, o.seed + 22);
  conv_reference(in.p, w.p, ref.p, kC, kH, kW, kK);
  to_blocked(in.p, in_blocked.p, kC, kH * kW, kBlock);
  weights_to_blocked(w.p, w_blocked.p, kK, kC, 9, kBlock);
  void* args[] = {in_blocked.p, w_blocked.p, out_blocked.p};
  Tuned t = tune_and_load(task, o.conv_trials, o.seed, args, o.rounds);

  // oneDNN as its users run it: format `any` lets the primitive choose blocked layouts; the
  // input and weights are reordered into them once, outside the timing.
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const dnnl::memory::dims src_dims{1, kC, kH, kW}, w_dims{kK, kC, 3, 3}, dst_dims{1, kK, kH, kW};
  const dnnl::memory::desc src_any(src_dims, dt::f32, tag::any), w_any(w_dims, dt::f32, tag::any),
      dst_any(dst_dims, dt::f32, tag::any);
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, src_any, w_any,
                                             dst_any, {1, 1}, {1, 1}, {1, 1});
  const dnnl::convolution_forward::primitive_desc pd(desc, eng);
  dnnl::memory user_src({src_dims, dt::f32, tag::nchw}, eng, in.p),
      user_w({w_dims, dt::f32, tag::oihw}, eng, w.p),
      user_dst({dst_dims, dt::f32, tag::nchw}, eng, dnnl_out.p);
  dnnl::memory src(pd.src_desc(), eng), wts(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
  dnnl::reorder(user_src, src).execute(strm, user_src, src);
  dnnl::reorder(user_w, wts).execute(strm, user_w, wts);
  strm.wait();
  dnnl::convolution_forward conv(pd);
  const std::string impl = pd.impl_info_str();

  int status = 0;
  const std::vector<double> s = bench::time_interleaved(
      {[&] { status |= t.kernel.run(args); },
       [&] {
         conv.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DST, dst}});
         strm.wait();
       }},
      o.rounds);
  if (status != 0)
    throw Error(ErrorKind::kRun, "tuned conv2d returned status " + std::to_string(status));
  from_blocked(out_blocked.p, out.p, kK, kH * kW, kBlock);
  dnnl::reorder(dst, user_dst).execute(strm, dst, user_dst);
  strm.wait();
  const double err_dnnl = max_abs_diff(dnnl_out.p, ref.p, ref.n);
  if (err_dnnl > 1e-3)
    throw Error(ErrorKind::kWrongAnswer, "oneDNN's conv2d differs from the reference");
  const auto& src_blocking = pd.src_desc().data.format_desc.blocking;
  std::printf("oneDNN implementation: %s, src %s, channel stride %lld\n", impl.c_str(),
              src_blocking.inner_nblks > 0 ? "blocked" : "plain",
              static_cast<long long>(src_blocking.strides[1]));
  const double flop = task.flop();
  return {"conv2d",
          "oneDNN",
          flop / s[0] * 1e-9,
          flop / s[1] * 1e-9,
          t.tuning_gflops,
          t.measured,
          t.ok,
          t.wall_s,
          max_abs_diff(out.p, ref.p, ref.n),
          t.config.to_json().dump(),
          bench::useful_share(task)};
}

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"tuned kernels against OpenBLAS and oneDNN", "tuned_vs_library"};
  app.add_option("--trials", o.trials, "Matmul tuning trials")->check(CLI::Range(1, 1000));
  app.add_option("--conv-trials", o.conv_trials, "Conv tuning trials")->check(CLI::Range(1, 1000));
  app.add_option("--seed", o.seed, "Tuner seed");
  app.add_option("--rounds", o.rounds, "Timed rounds per kernel")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "Threads")->check(CLI::Range(1, 256));
  auto* winograd = app.add_option("--winograd", o.winograd, "Winograd rows of this m")
                       ->check(CLI::IsMember({2, 4, 6}));
  app.add_flag("--direct-3x3", o.direct_3x3, "The direct 3x3 rows")->excludes(winograd);
  app.add_option("--only", o.only,
                 "With --winograd, --threads or --direct-3x3: only the workloads whose name "
                 "contains this (e.g. 7x7)");
  bench::parse_or_exit(app, argc, argv);
  if (!o.only.empty() && o.winograd == 0 && o.threads == 1 && !o.direct_3x3) {
    std::fprintf(stderr,
                 "tuned_vs_library: --only needs --winograd, --threads N > 1 or --direct-3x3\n");
    std::exit(1);
  }
  return o;
}

void print_header(const codegen::Target& host, const Options& o) {
  std::printf(
      "target %s, OpenBLAS %s (core %s), oneDNN %d.%d, xgb tuner, %d threads, %zu trials, seed "
      "%llu, load "
      "average %s\n",
      host.str().c_str(), openblas_get_config(), openblas_get_corename(), dnnl::version()->major,
      dnnl::version()->minor, o.threads, o.trials, static_cast<unsigned long long>(o.seed),
      bench::load_average().c_str());
  std::fflush(stdout);
}

// The races, one row each, with each kernel's useful share of its nominal FLOPs and its useful
// GFLOP/s as a share of the FMA peak of `threads` cores.
void print_race_table(const std::vector<std::string>& names,
                      const std::vector<bench::RaceResult>& rows, const std::vector<double>& useful,
                      int threads) {
  std::printf("load average after the races: %s\n", bench::load_average().c_str());
  const double peak = bench::fma_peak_gflops(0.5) * threads;
  std::printf("%-22s %7s %6s %8s %11s %11s %-34s %-8s %7s %9s %7s %7s\n", "kernel", "trials", "ok",
              "tune_s", "ktune_GF/s", "lib_GF/s", "library", "layout", "ratio", "rel_err", "useful",
              "of_peak");
  for (size_t i = 0; i < rows.size(); ++i) {
    const bench::RaceResult& r = rows[i];
    std::printf("%-22s %7zu %6zu %8.0f %11.1f %11.1f %-34s %-8s %7.3f %9.1e %7.3f %7.3f\n",
                names[i].c_str(), r.measured, r.ok, r.tune_s, r.ktune_gflops, r.library_gflops,
                r.library.c_str(), r.layout.c_str(), r.ratio(), r.max_error, useful[i],
                r.ktune_gflops * useful[i] / peak);
  }
}

// --only matched no workload: one line, exit status 1.
int no_rows(const Options& o) {
  std::fprintf(stderr, "tuned_vs_library: --only '%s' names no workload of this run\n",
               o.only.c_str());
  return 1;
}

bench::RaceOptions race_options(const Options& o) {
  bench::RaceOptions ro;
  ro.trials = o.trials;
  ro.rounds = o.rounds;
  ro.threads = o.threads;
  ro.seed = o.seed;
  return ro;
}

// --winograd M: the ResNet-18 3x3 layers as Winograd tasks against oneDNN's direct convolution.
int run_winograd(const codegen::Target& host, const Options& o) {
  const auto traits =
      schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), o.threads);
  print_header(host, o);
  std::vector<std::string> names;
  std::vector<bench::RaceResult> rows;
  std::vector<double> ratios, useful;
  for (const bench::Workload& w : bench::resnet_and_matmul_workloads()) {
    if (w.template_name != "conv2d_nchwc" || w.name.find(o.only) == std::string::npos) continue;
    const auto direct = schedule_space::Task::create(
        w.template_name, schedule_space::parse_workload_args(w.template_name, w.args), traits);
    std::vector<std::string> args = w.args;
    args.push_back("m=" + std::to_string(o.winograd));
    const auto wino = schedule_space::Task::create(
        "conv2d_winograd_nchwc", schedule_space::parse_workload_args("conv2d_winograd_nchwc", args),
        traits);
    bench::RaceOptions ro = race_options(o);
    ro.library_task = &direct;
    rows.push_back(bench::race(wino, ro));
    ratios.push_back(rows.back().ratio());
    useful.push_back(bench::useful_share(direct));  // of the direct FLOPs both sides count
    names.push_back("wino" + std::to_string(o.winograd) + " " + w.name.substr(5));
    std::fprintf(stderr, "  %s: %s\n", names.back().c_str(),
                 rows.back().config.to_json_string().c_str());
  }
  if (rows.empty()) return no_rows(o);
  print_race_table(names, rows, useful, o.threads);
  std::printf("winograd_vs_onednn_direct_geomean %.3f\n", bench::geomean(ratios));
  return 0;
}

// --threads N > 1: every workload tuned and raced at N threads; --direct-3x3: the 3x3 layers, at
// --threads (1 too).
int run_threaded(const codegen::Target& host, const Options& o) {
  const auto traits =
      schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), o.threads);
  const bench::RaceOptions ro = race_options(o);
  print_header(host, o);
  std::vector<std::string> names;
  std::vector<bench::RaceResult> rows;
  std::vector<double> ratios, useful;
  for (const bench::Workload& w :
       o.direct_3x3 ? bench::resnet_3x3_workloads() : bench::resnet_and_matmul_workloads()) {
    if (w.name.find(o.only) == std::string::npos) continue;
    const auto task = schedule_space::Task::create(
        w.template_name, schedule_space::parse_workload_args(w.template_name, w.args), traits);
    useful.push_back(bench::useful_share(task));
    rows.push_back(bench::race(task, ro));
    ratios.push_back(rows.back().ratio());
    names.push_back(w.name);
    std::fprintf(stderr, "  %s: %s\n", w.name.c_str(), rows.back().config.to_json_string().c_str());
  }
  if (rows.empty()) return no_rows(o);
  print_race_table(names, rows, useful, o.threads);
  if (o.direct_3x3) {
    const auto worst = std::min_element(ratios.begin(), ratios.end());
    std::printf("direct_3x3_worst %.3f %s\n", *worst, names[worst - ratios.begin()].c_str());
    std::printf("direct_3x3_vs_onednn_geomean %.3f\n", bench::geomean(ratios));
    return 0;
  }
  std::printf("tuned_vs_library_geomean %.3f\n", bench::geomean(ratios));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const codegen::Target host = codegen::Target::host();
    ktune::bench::use_openblas_at_its_best(host.vector_bits(), argv);
    if (o.winograd != 0) return run_winograd(host, o);
    if (o.threads > 1 || o.direct_3x3) return run_threaded(host, o);
    openblas_set_num_threads(1);
#ifdef _OPENMP
    omp_set_num_threads(1);  // oneDNN's threads (OpenMP runtime)
#endif
    codegen::set_num_threads(1);
    // One core in the traits: the parallel knob is off and the tuned kernels run one thread.
    const auto traits =
        schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), 1);
    std::printf("target %s, OpenBLAS %s (core %s), oneDNN %d.%d, xgb tuner, 1 thread, seed %llu\n",
                host.str().c_str(), openblas_get_config(), openblas_get_corename(),
                dnnl::version()->major, dnnl::version()->minor,
                static_cast<unsigned long long>(o.seed));
    std::fflush(stdout);
    const Row mm = bench_matmul(traits, o);
    const Row cv = bench_conv2d(traits, o);
    std::printf("%-8s %9s %6s %9s %13s %13s %12s %-10s %7s %10s\n", "op", "trials", "ok", "tune_s",
                "tuning_GF/s", "ktune_GF/s", "lib_GF/s", "library", "ratio", "max_err");
    print_row(mm);
    print_row(cv);
    const double peak = bench::fma_peak_gflops(0.5);
    std::printf(
        "conv2d useful work: %.3f of the nominal FLOPs (taps inside the input), %.1f "
        "useful GFLOP/s = %.3f of the FMA peak (%.1f GFLOP/s)\n",
        cv.useful, cv.ktune_gflops * cv.useful, cv.ktune_gflops * cv.useful / peak, peak);
    std::printf("matmul best config: %s\n", mm.config.c_str());
    std::printf("conv2d best config: %s\n", cv.config.c_str());
    if (mm.max_error > 1e-2 || cv.max_error > 1e-2) {
      std::fprintf(stderr, "tuned kernel output differs from the library / reference\n");
      return 1;
    }
    std::printf("conv2d_ratio_vs_onednn %.3f\n", cv.ktune_gflops / cv.library_gflops);
    std::printf("matmul_ratio_vs_openblas %.3f\n", mm.ktune_gflops / mm.library_gflops);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tuned_vs_library: %s\n", e.what());
    return 1;
  }
}
