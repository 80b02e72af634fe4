// Defines the reference interpreter of lowered loop IR and the direct evaluator of definitions.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "te/host_buffer.h"
#include "te/ir.h"
#include "te/tensor.h"

namespace ktune::te {

// What an interpretation executed: floating-point multiplications, additions and min/max, one
// per lane (the multiply-adds of a convolution or a matmul, the taps of a pooling window), and dot
// instructions (a tensor intrinsic's call, whatever its lanes).
struct InterpretCounts {
  int64_t float_muls = 0;
  int64_t float_adds = 0;
  int64_t float_min_max = 0;
  int64_t dot_calls = 0;
};

// Runs f on raw buffers in signature order (the kernel ABI: args[i] points at f.args[i]'s dense
// row-major data). Handles vector expressions; parallel loops run serially. Every access is
// bounds-checked: throws ktune::Error(kInternal) for an out-of-bounds load or store (a lowering
// bug), (kInvalidArgument) for a wrong number of arguments, (kRun) for integer division by zero.
// Adds what it executed to *counts when given.
void interpret(const LoweredFunc& f, const std::vector<void*>& args,
               InterpretCounts* counts = nullptr);

// Convenience: interpret on HostBuffers (shapes and dtypes checked against f's signature; throws
// ktune::Error(kInvalidArgument) on a mismatch).
void interpret(const LoweredFunc& f, const std::vector<HostBuffer*>& args,
               InterpretCounts* counts = nullptr);

// Computes `outputs` straight from their definitions (no schedule; Select is lazy), given a
// buffer for every placeholder they depend on. Returns one buffer per output, in order. Throws
// ktune::Error(kInvalidArgument) for a missing or mis-shaped input or an out-of-bounds read.
std::vector<HostBuffer> evaluate(const std::vector<Tensor>& outputs,
                                 const std::vector<std::pair<Tensor, const HostBuffer*>>& inputs);

}  // namespace ktune::te
