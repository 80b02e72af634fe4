// Declares library_latency: the time the libraries (oneDNN for convolutions and pooling, OpenBLAS for GEMM) take for a task's operator, measured in this process.
#pragma once

#include <optional>
#include <string>

#include "schedule_space/task.h"

namespace ktune::tools {

struct LibraryTime {
  std::string library;  // "oneDNN 2.6 (jit:avx512_core)" or "OpenBLAS"
  double seconds = 0;   // the fastest of up to 200 single runs
};

// The library's time for `task`'s operator with `threads` threads (the task's own target cores),
// inputs in the library's preferred layout (oneDNN chooses blocked formats; reorders are outside
// the timing, like the tuned kernels' layouts). conv2d, conv2d_nchwc, depthwise_conv2d (oneDNN
// convolution), max_pool2d, avg_pool2d (oneDNN pooling), matmul, dense_bias_relu (OpenBLAS sgemm;
// the bias and relu are not in it). nullopt for other templates and non-float32 tasks. Throws
// Error(kUnsupported) when the library refuses the shape.
std::optional<LibraryTime> library_latency(const schedule_space::Task& task, int threads);

}  // namespace ktune::tools
