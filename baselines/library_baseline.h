// Declares library_op and library_latency: the libraries' operator for a task (oneDNN for convolutions and pooling, OpenBLAS for GEMM), callable and timed in this process.
#pragma once

#include <functional>
#include <optional>
#include <string>

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

struct LibraryTime {
  std::string library;
  double seconds = 0;  // the fastest of up to 200 single runs
};

// library_op's operator timed alone: the fastest of up to 200 single runs.
std::optional<LibraryTime> library_latency(const schedule_space::Task& task, int threads);

}  // namespace ktune::baselines
