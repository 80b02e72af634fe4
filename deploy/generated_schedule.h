// Defines what a model build's generated kernels share: their vector width, the largest rank they
// take, the size below which a loop runs on one thread, and the parallel loop over a tensor's
// leading axes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "te/schedule.h"

namespace ktune::deploy {

// float32 lanes of one AVX-512 register: the vector width of generated kernels (LLVM splits it on
// narrower targets).
inline constexpr int64_t kLanes = 16;
// The largest rank of a generated kernel's tensors: ONNX models stay within it; the kernels are
// tested up to it.
inline constexpr size_t kMaxRank = 6;
// Output elements below which a generated kernel runs on one thread: a parallel hand-off costs
// more than the loop.
inline constexpr int64_t kParallelMin = 4096;
// Iterations below which parallel_leading also takes the next axis into its parallel loop: enough
// chunks for every thread.
inline constexpr int64_t kParallelSpread = 64;

// Fuses the first `axes` axes of `st` into one loop and runs it in parallel. Channel-blocked
// kernels pass 3 (batch, channel blocks, rows): a tensor of one or two channel blocks (a model's
// 3-channel input, a one-channel map) would otherwise leave every thread but one idle. Below
// kParallelSpread iterations the next axes join while they are the loops directly inside (never
// the innermost one).
void parallel_leading(te::Stage st, int axes);

// A float constant in a generated kernel's formula (short: formulas hold many).
inline te::Expr f(float v) { return te::Expr(v); }

}  // namespace ktune::deploy
