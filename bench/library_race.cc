// The library race: tune a task, pick its fastest kernel in this process, check it, and time it
// interleaved with OpenBLAS / oneDNN.
#include "bench/library_race.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>

#include "baselines/interleaved.h"
#include "baselines/library_baseline.h"
#include "codegen/codegen_llvm.h"
#include "codegen/runtime.h"
#include "codegen/target.h"
#include "rpc_runner/runner/input_data.h"
#include "rpc_runner/runner/local_runner.h"
#include "rpc_runner/runner/reference.h"
#include "support/error.h"
#include "support/placed_buffer.h"
#include "tuner/model_based_tuner.h"
#include "tuner/tune.h"

namespace ktune::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

namespace {

bool is_integer(const std::string& dtype) {
  return dtype.rfind("int", 0) == 0 || dtype.rfind("uint", 0) == 0 || dtype == "bool";
}

}  // namespace

std::vector<std::unique_ptr<Bytes>> make_buffers(const std::vector<codegen::ArgSpec>& sig,
                                                 uint64_t seed) {
  std::vector<std::unique_ptr<Bytes>> bufs;
  for (size_t i = 0; i < sig.size(); ++i) {
    if (sig[i].is_output && sig[i].dtype != "float32" && !is_integer(sig[i].dtype))
      throw Error(ErrorKind::kUnsupported,
                  "the race compares float32 and integer outputs, not " + sig[i].dtype);
    bufs.push_back(std::make_unique<Bytes>(
        static_cast<size_t>(sig[i].num_elements() * sig[i].element_bytes())));
    if (!sig[i].is_output)
      rpc_runner::fill_input(bufs.back()->p, bufs.back()->n, sig[i].dtype, seed, i);
  }
  reset_outputs(sig, bufs);
  return bufs;
}

void reset_outputs(const std::vector<codegen::ArgSpec>& sig,
                   const std::vector<std::unique_ptr<Bytes>>& bufs) {
  for (size_t i = 0; i < sig.size(); ++i)
    if (sig[i].is_output) std::memset(bufs[i]->p, 0xff, bufs[i]->n);
}

double relative_error(const std::vector<codegen::ArgSpec>& sig,
                      const std::vector<std::unique_ptr<Bytes>>& out,
                      const std::vector<std::unique_ptr<Bytes>>& ref) {
  double err = 0, scale = 1;
  for (size_t i = 0; i < sig.size(); ++i) {
    if (!sig[i].is_output) continue;
    if (sig[i].dtype != "float32") {
      if (std::memcmp(out[i]->p, ref[i]->p, ref[i]->n) != 0) return INFINITY;
      continue;
    }
    const auto* o = reinterpret_cast<const float*>(out[i]->p);
    const auto* r = reinterpret_cast<const float*>(ref[i]->p);
    for (size_t j = 0; j < ref[i]->n / sizeof(float); ++j) {
      const double d = std::fabs(static_cast<double>(o[j]) - r[j]);
      if (std::isnan(d)) return INFINITY;
      err = std::max(err, d);
      scale = std::max(scale, static_cast<double>(std::fabs(r[j])));
    }
  }
  return err / scale;
}

std::vector<void*> pointers(const std::vector<std::unique_ptr<Bytes>>& bufs) {
  std::vector<void*> p;
  for (const auto& b : bufs) p.push_back(b->p);
  return p;
}

Bytes::Bytes(size_t n)
    : n(n), p(static_cast<uint8_t*>(allocate_placed(static_cast<int64_t>(n), 64))) {}
Bytes::~Bytes() { std::free(p); }

AlignedFloats::AlignedFloats(size_t n)
    : n(n), p(static_cast<float*>(allocate_placed(static_cast<int64_t>(n * sizeof(float)), 64))) {}
AlignedFloats::~AlignedFloats() { std::free(p); }

void fill_random(AlignedFloats& a, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < a.n; ++i) a.p[i] = dist(rng);
}

void set_all_threads(int threads) {
  codegen::set_num_threads(threads);
  openblas_set_num_threads(threads);
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
}

std::vector<double> time_interleaved(const std::vector<std::function<void()>>& fns, int rounds,
                                     double settle_s, double min_round_s) {
  std::vector<double> medians;
  for (const auto& s : baselines::time_interleaved(fns, rounds, {settle_s, min_round_s}))
    medians.push_back(s.median_s);
  return medians;
}

codegen::Kernel load_kernel(const schedule_space::Task& task, const schedule_space::Config& config,
                            const te::LowerOptions& lower) {
  const schedule_space::Instantiated inst = task.instantiate(config);
  const te::LoweredFunc f =
      te::lower(inst.schedule, inst.args, task.template_name() + "_best", lower);
  return codegen::Kernel::load(codegen::build(f, codegen::Target::host()));
}

TuneRun tune_finalists(const schedule_space::Task& task, size_t trials, uint64_t seed, int threads,
                       size_t keep, int number) {
  rpc_runner::LocalRunnerOptions ro;
  ro.runner_path = KTUNE_RUNNER_PATH;
  ro.measure.run_threads = threads;
  ro.measure.data_seed = seed;
  ro.measure.number = number;
  rpc_runner::LocalRunner runner(ro);

  tuner::TuneOptions to;
  to.n_trial = trials;
  to.batch_size = 16;
  const std::vector<tuner::MeasureResult> fb = runner.measure({{&task, task.fallback_config()}});
  to.resume.push_back({task.fallback_config(), fb.at(0)});
  std::vector<std::pair<double, schedule_space::Config>> measured;
  if (fb.at(0).ok()) measured.emplace_back(fb.at(0).mean_cost(), task.fallback_config());

  tuner::XGBTunerParams xp;
  xp.search.seed = seed;
  tuner::XGBTuner xgb(task, xp);
  const auto start = Clock::now();
  size_t done = 0;
  to.callbacks.push_back([&](const std::vector<tuner::MeasureInput>& in,
                             const std::vector<tuner::MeasureResult>& out) {
    done += in.size();
    for (size_t i = 0; i < in.size(); ++i)
      if (out[i].ok()) measured.emplace_back(out[i].mean_cost(), in[i].config);
    std::fprintf(stderr, "\r  %s: %zu/%zu trials, %.0f s", task.workload_key().c_str(), done,
                 trials, seconds_since(start));
  });
  const tuner::TuneResult r = tuner::tune(task, xgb, runner, to);
  std::fprintf(stderr, "\n");
  if (measured.empty())
    throw Error(ErrorKind::kRun, "no config of " + task.workload_key() + " succeeded");
  std::stable_sort(measured.begin(), measured.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  TuneRun run{{}, {}, r.n_measured, r.n_ok, r.wall_s};
  for (size_t i = 0; i < measured.size() && run.finalists.size() < keep; ++i) {
    run.finalists.push_back(measured[i].second);
    run.runner_seconds.push_back(measured[i].first);
  }
  // The fallback always races too, as retime_best re-times it beside the best.
  const auto fallback = std::find_if(measured.begin(), measured.end(), [&](const auto& m) {
    return m.second.index() == task.fallback_config().index();
  });
  const bool kept = std::any_of(run.finalists.begin(), run.finalists.end(), [&](const auto& c) {
    return c.index() == task.fallback_config().index();
  });
  if (fallback != measured.end() && !kept) {
    run.finalists.push_back(fallback->second);
    run.runner_seconds.push_back(fallback->first);
  }
  return run;
}

FastestKernel tune_fastest(const schedule_space::Task& task, size_t trials, int threads, int rounds,
                           const std::vector<void*>& args) {
  const TuneRun run = tune_finalists(task, trials, 1, threads, 5);
  std::vector<codegen::Kernel> kernels;
  for (const auto& cfg : run.finalists) kernels.push_back(load_kernel(task, cfg));
  std::vector<std::function<void()>> calls;
  for (const auto& k : kernels) calls.push_back([&k, &args] { k.run(args); });
  const std::vector<double> s = time_interleaved(calls, rounds, 0, 2e-3);
  const size_t pick = static_cast<size_t>(std::min_element(s.begin(), s.end()) - s.begin());
  return {std::move(kernels[pick]), run.finalists[pick], run.measured};
}

RaceResult race(const schedule_space::Task& task, const RaceOptions& o) {
  set_all_threads(o.threads);
  const schedule_space::Task& lib_task = o.library_task ? *o.library_task : task;
  std::optional<baselines::LibraryOp> lib = baselines::library_op(lib_task, o.threads);
  if (!lib)
    throw Error(ErrorKind::kUnsupported, "no library operator for " + lib_task.workload_key());
  const TuneRun tuned = tune_finalists(task, o.trials, o.seed, o.threads, o.finalists);
  set_all_threads(o.threads);  // library_op and the runner may have changed them

  std::vector<codegen::Kernel> kernels;
  for (const auto& cfg : tuned.finalists) kernels.push_back(load_kernel(task, cfg));
  const auto& sig = kernels.front().signature();
  const auto bufs = make_buffers(sig, o.seed);
  const std::vector<void*> args = pointers(bufs);
  int status = 0;
  std::vector<std::function<void()>> runs;
  for (const auto& k : kernels) runs.push_back([&k, &args, &status] { status |= k.run(args); });
  const baselines::RoundPacing pacing = baselines::race_pacing(o.threads);
  const std::vector<double> s = time_interleaved(runs, o.rounds, 0, pacing.min_round_s);
  const size_t pick = static_cast<size_t>(std::min_element(s.begin(), s.end()) - s.begin());
  if (status != 0)
    throw Error(ErrorKind::kRun,
                task.workload_key() + ": a tuned kernel returned " + std::to_string(status));

  // The reference on the same inputs; the raced kernel's outputs start unwritten (0xff) again.
  const codegen::Kernel reference = codegen::Kernel::load(
      codegen::build(rpc_runner::lower_reference(task), codegen::Target::host()));
  const auto ref_bufs = make_buffers(sig, o.seed);
  if (reference.run(pointers(ref_bufs)) != 0)
    throw Error(ErrorKind::kRun, task.workload_key() + ": the reference failed");
  reset_outputs(sig, bufs);
  if (kernels[pick].run(args) != 0)
    throw Error(ErrorKind::kRun, task.workload_key() + ": the tuned kernel failed");
  const double err = relative_error(sig, bufs, ref_bufs);
  if (!(err <= 1e-4))
    throw Error(ErrorKind::kWrongAnswer, task.workload_key() +
                                             ": tuned kernel differs from the reference by " +
                                             std::to_string(err));

  // Each side's pool rests before its round (baselines::race_pacing says why).
  const std::vector<double> t =
      time_interleaved({runs[pick], lib->run}, o.rounds, pacing.settle_s, pacing.min_round_s);
  if (status != 0)
    throw Error(ErrorKind::kRun,
                task.workload_key() + ": the tuned kernel returned " + std::to_string(status));
  const double gflop = task.flop() * 1e-9;
  return {tuned.finalists[pick], tuned.measured, tuned.ok,    tuned.wall_s, gflop / t[0],
          gflop / t[1],          lib->library,   lib->layout, err};
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line;
}

double geomean(const std::vector<double>& x) {
  double log_sum = 0;
  for (double v : x) log_sum += std::log(v);
  return x.empty() ? 1.0 : std::exp(log_sum / static_cast<double>(x.size()));
}

}  // namespace ktune::bench
