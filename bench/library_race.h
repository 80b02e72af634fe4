// Defines the library race shared by the benchmarks that compare ktune with OpenBLAS / oneDNN: tune
// a task, re-time its best kernels in this process interleaved with the library's operator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "schedule_space/task.h"
#include "te/lower.h"

namespace ktune::bench {

// 64-byte aligned floats (the kernel ABI), a large buffer on huge pages (support/placed_buffer.h);
// std::vector's are not aligned enough.
struct AlignedFloats {
  explicit AlignedFloats(size_t n);
  ~AlignedFloats();
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  size_t n;
  float* p;
};

// 64-byte aligned bytes (the kernel ABI) of any element type, placed as AlignedFloats.
struct Bytes {
  explicit Bytes(size_t n);
  ~Bytes();
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  size_t n;
  uint8_t* p;
};

// Uniform values in [-1, 1) from `seed`.
void fill_random(AlignedFloats& a, uint64_t seed);

// One buffer per kernel argument: inputs the runner's data from `seed` (rpc_runner::fill_input:
// floats in [-1, 1), int8 / uint8 over the whole byte, other integers small), outputs filled with
// 0xff bytes (NaN for float32, so an element left unwritten shows). Throws Error(kUnsupported) for
// an output neither float32 nor an integer.
std::vector<std::unique_ptr<Bytes>> make_buffers(const std::vector<codegen::ArgSpec>& sig,
                                                 uint64_t seed);
// Sets every output buffer to 0xff bytes again (make_buffers' outputs).
void reset_outputs(const std::vector<codegen::ArgSpec>& sig,
                   const std::vector<std::unique_ptr<Bytes>>& bufs);
// max |out - ref| / max(1, max |ref|) over the float32 output buffers; infinity when one holds
// NaN or an integer output differs from its reference in any element (integers compare exactly).
double relative_error(const std::vector<codegen::ArgSpec>& sig,
                      const std::vector<std::unique_ptr<Bytes>>& out,
                      const std::vector<std::unique_ptr<Bytes>>& ref);
// The buffers' data pointers, in argument order (a kernel's run() arguments).
std::vector<void*> pointers(const std::vector<std::unique_ptr<Bytes>>& bufs);

// Sets the threads of ktune's parallel loops, OpenBLAS and OpenMP (oneDNN's runtime) to `threads`.
void set_all_threads(int threads);

// baselines::time_interleaved's medians: seconds per call of each callable, median of `rounds`
// interleaved rounds of at least min_round_s, each preceded by settle_s of rest when > 0.
std::vector<double> time_interleaved(const std::vector<std::function<void()>>& fns, int rounds,
                                     double settle_s = 0, double min_round_s = 200e-6);

// `task`'s kernel for `config`, JIT-loaded into this process for the host.
codegen::Kernel load_kernel(const schedule_space::Task& task, const schedule_space::Config& config,
                            const te::LowerOptions& lower = {});

struct TuneRun {
  std::vector<schedule_space::Config> finalists;  // fastest first as the runner timed them
  std::vector<double> runner_seconds;             // the runner's mean cost of each finalist
  size_t measured = 0, ok = 0;
  double wall_s = 0;
};

// Tunes `task` with the xgb tuner for `trials` through the local runner at `threads` run threads
// (the task's traits should say as many cores). The fallback config is measured first and
// handed to the tuner as a past measurement, so it is always among the candidates. Returns the
// `keep` fastest successful configs, and the fallback after them when it is not one of them (it
// always races, as retime_best always re-times it). `number` is the runner's runs per timing (the
// finalists are re-timed in-process afterwards, so tuning only needs a ranking). Throws Error(kRun)
// when no config succeeded.
TuneRun tune_finalists(const schedule_space::Task& task, size_t trials, uint64_t seed, int threads,
                       size_t keep, int number = 2);

struct FastestKernel {
  codegen::Kernel kernel;
  schedule_space::Config config;
  size_t measured = 0;  // configs the tuning measured
};

// tune_finalists(task, trials, 1, threads, 5), then the finalists loaded into this process and
// timed interleaved on `args` (`rounds` rounds): the fastest.
FastestKernel tune_fastest(const schedule_space::Task& task, size_t trials, int threads, int rounds,
                           const std::vector<void*>& args);

struct RaceOptions {
  size_t trials = 150;
  int rounds = 15;
  int threads = 1;
  uint64_t seed = 1;
  size_t finalists = 5;
  // The task whose library operator races (null: the raced task itself), e.g. the direct
  // conv2d_nchwc of a Winograd task's shape.
  const schedule_space::Task* library_task = nullptr;
};

struct RaceResult {
  schedule_space::Config config;  // the kernel that raced
  size_t measured = 0, ok = 0;
  double tune_s = 0;
  double ktune_gflops = 0, library_gflops = 0;
  std::string library, layout;  // the library's name and the source layout it chose
  double max_error = 0;  // of the raced kernel against the task's reference, relative to max |ref|
  double ratio() const { return ktune_gflops / library_gflops; }
};

// The whole race for one task at o.threads threads: tune_finalists, then in this process time the
// finalists interleaved and keep the fastest, check its output (pre-filled with NaN) against the
// task's reference kernel on the same random inputs, then time it interleaved with the library's
// operator (baselines::library_op of o.library_task or the task). Throws Error(kWrongAnswer) when
// the kernel differs from the reference, Error(kUnsupported) when no library covers the task.
RaceResult race(const schedule_space::Task& task, const RaceOptions& o);

// The first line of /proc/loadavg: on a shared machine, other processes decide the timings.
std::string load_average();

// Geometric mean of `x` (1 for none).
double geomean(const std::vector<double>& x);

}  // namespace ktune::bench
