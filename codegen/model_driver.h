// Declares build_model_driver(): the C entry points of a whole-model library (create, run,
// destroy), compiled to one object that calls the model's kernels in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/artifact.h"
#include "codegen/target.h"
#include "support/placed_buffer.h"

namespace ktune::codegen {

// Where one kernel argument lives when the model runs.
struct DriverArg {
  enum class Base { kArena, kWeights, kInput, kOutput };
  Base base = Base::kArena;
  int64_t offset = 0;  // bytes into the arena or the weights; the index of the input or output
};

// One kernel call of the model's run, in order.
struct DriverCall {
  std::string kernel;           // entry symbol, kernel ABI: int32_t kernel(void* const* args)
  std::vector<DriverArg> args;  // in the kernel's argument order
  // At most this many threads for the kernel's parallel loops (0: the runtime's count): the driver
  // sets ktune_set_thread_cap around the call, so a library with a capped call needs a runtime
  // that has it.
  int max_threads = 0;
};

// What a model library's entry points do. Every offset is a multiple of 64.
struct DriverSpec {
  std::string name;  // the entry points are <name>_create, <name>_run, <name>_destroy
  int num_inputs = 0;
  int num_outputs = 0;
  int64_t arena_bytes = 0;       // every intermediate tensor lives in one arena of this size
  std::vector<uint8_t> weights;  // packed weights (kWeights offsets index them)
  bool embed_weights = true;     // false: <name>_create reads them from a file instead
  std::vector<DriverCall> calls;
};

// Where a model's arena and weights start: on a page boundary in every process that runs the model
// (the embedded weights, the ones read from a file, the arena of each context, and the copies
// `ktune run` times layer by layer). Every tensor then sits at the same offset within its page
// wherever the model runs: a BERT encoder layer's run moved by up to 11% with nothing but the
// weights' offset within their first page (loads and stores meeting at one page offset), so an
// estimate taken in ktune's process and a linked program disagreed by that much.
inline constexpr int64_t kModelPageAlign = 4096;

// A model buffer of kModelHugePage bytes or more is placed on huge pages by the rule every
// timed or shipped buffer follows (support/placed_buffer.h); embedded weights that large are
// copied into such a buffer at create. ResNet-18's 46 MB of weights over 4 KiB pages miss the TLB.
inline constexpr int64_t kModelHugePage = kHugePageBytes;

// How a model buffer of `bytes` is placed (the driver's create and ktune's own copies alike): the
// shared rule with the page as the smallest alignment.
using ModelBufferPlacement = BufferPlacement;
inline ModelBufferPlacement model_buffer_placement(int64_t bytes) {
  return buffer_placement(bytes, kModelPageAlign);
}

// An uninitialised buffer of `bytes`, placed and advised as the driver's (before anything touches
// it); free() it. Throws Error(kIo) when out of memory.
inline void* allocate_model_buffer(int64_t bytes) {
  return allocate_placed(bytes, kModelPageAlign);
}

// FNV-1a (64-bit) of bytes: the check of an external weights file against the model it was built
// for.
uint64_t weights_hash(const std::vector<uint8_t>& bytes);

// Compiles the entry points of spec for target into one relocatable object:
//   void*   <name>_create(void)                    with embedded weights, or
//   void*   <name>_create(const char* weights)     reading the file (its size and hash must be
//                                                  the spec's), NULL when it cannot;
//   int32_t <name>_run(void* ctx, float* in_0, ..., float* out_0, ...)
//           0, or the first non-zero kernel status (1 = out of memory), or 2 when a buffer is not
//           64-byte aligned; runs the calls on the context's own arena, so contexts are
//           independent;
//   int32_t <name>_run_args(void* ctx, void* const* buffers)   the same, inputs then outputs;
//   void    <name>_destroy(void* ctx).
// The kernels (and ktune_parallel_for, which they call) are linked beside it. Throws
// Error(kInvalidArgument) for a call with an input, output or offset out of range, Error(kBuild)
// or Error(kUnsupported) as build() does.
Artifact build_model_driver(const DriverSpec& spec, const Target& target);

}  // namespace ktune::codegen
