// Declares library_op and library_race: the libraries' operator for a task (oneDNN for convolutions
// and pooling, OpenBLAS for GEMM), callable in this process and timed against a tuned kernel.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "baselines/interleaved.h"
#include "codegen/kernel.h"
#include "schedule_space/task.h"

namespace ktune::baselines {

// The library's operator for a task's shape, ready to call: inputs already in the layout the
// library prefers (reorders done when it was made), buffers owned by `run`'s captures.
struct LibraryOp {
  std::string library;  // "oneDNN 2.6 (jit:avx512_core)" or "OpenBLAS SkylakeX sgemv"
  std::string layout;   // the source layout the library chose: "nChw16c", "nchw", "row-major"
  std::function<void()> run;
};

// The library's operator for `task` with `threads` threads (the task's own target cores), inputs
// in the library's preferred layout (oneDNN chooses blocked formats; reorders are outside the
// call, like the tuned kernels' layouts). conv2d, conv2d_nchwc, depthwise_conv2d(_nchwc) (oneDNN
// convolution), max_pool2d, avg_pool2d (oneDNN pooling), matmul, dense_bias_relu (OpenBLAS: sgemv
// when M = 1, else sgemm; the bias and the activation are not in it). nullopt for other templates
// and non-float32 tasks. Sets OpenMP's (oneDNN's) and OpenBLAS's thread counts to `threads`.
// Throws Error(kUnsupported) when the library refuses the shape.
std::optional<LibraryOp> library_op(const schedule_space::Task& task, int threads);

// A tuned kernel and the library's operator on the same task, timed in alternate rounds.
struct LibraryRace {
  std::string library;
  RoundStats tuned, library_time;
  int threads = 1;  // the race's: the tuned kernel's
  // The library's threads behind library_time: the race's, or 1 when it ran faster on one.
  int library_threads = 1;
  // tuned / library, from the medians: below 1, the tuned kernel is faster.
  double ratio() const { return tuned.median_s / library_time.median_s; }
};

// `kernel` (task's kernel, loaded in this process) and library_op's operator for `task`, each run
// with `threads` threads (ktune's parallel loops too), timed alternately for `rounds` rounds
// (time_interleaved, paced by race_pacing). With threads > 1 the library also takes a turn on one
// thread in the same rounds (its operator made for one: oneDNN fixes a primitive's threads when it
// creates it), and library_time is the faster of its two medians: a user runs a small operator on
// the thread count it is fastest at (as a model build does its steps), and on a machine busy with
// other work a library's OpenMP threads wait on each other round after round (oneDNN's 1x1 convs
// of microseconds took milliseconds at two threads). The kernel's inputs are random,
// its outputs overwritten. nullopt where library_op has no operator. Throws what library_op throws,
// Error(kRun) when the kernel returns an error, Error(kInvalidArgument) for rounds < 1.
std::optional<LibraryRace> library_race(const schedule_space::Task& task,
                                        const codegen::Kernel& kernel, int threads, int rounds);

}  // namespace ktune::baselines
