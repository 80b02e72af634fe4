// Declares build(): te's lowered loop IR -> optimized LLVM IR -> a relocatable object (Artifact).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/artifact.h"
#include "codegen/target.h"
#include "te/ir.h"

namespace ktune::codegen {

// Options of build(); the defaults are what tuning measures with.
struct BuildOptions {
  int opt_level = 3;                     // LLVM's default pipeline level, 0..3
  bool allow_fma = true;                 // float mul+add may contract to FMA
  int64_t max_stack_bytes = 128 * 1024;  // larger Allocates go to the heap (64-byte aligned)
};

// Compiles f for target. The entry symbol is f.name with the kernel ABI of DESIGN.md
// (`int32_t f(void* const* args)`; 0 = success, 1 = out of memory). Parallel loops call
// ktune_parallel_for. Thread-safe (each call has its own LLVM context).
// Throws Error(kBuild) for a construct the backend cannot handle (pre-lowering nodes, an
// undefined variable or buffer, a non-constant Allocate, ...) or when LLVM fails, and
// Error(kUnsupported) when the target has no usable LLVM backend.
Artifact build(const te::LoweredFunc& f, const Target& target, const BuildOptions& options = {});

// Compiles every function of fs for target in one LLVM session (one context, one target machine:
// the set-up is paid once), one Artifact per function in the same order; the same as calling
// build() on each. Throws like build(); the message of a failed function names it.
std::vector<Artifact> build_all(const std::vector<te::LoweredFunc>& fs, const Target& target,
                                const BuildOptions& options = {});

// The LLVM IR text of f for target, after the optimization pipeline when optimized is true
// (for debugging and tests). Throws like build().
std::string emit_llvm_ir(const te::LoweredFunc& f, const Target& target,
                         const BuildOptions& options = {}, bool optimized = true);
// The target assembly of f (for debugging, checking vectorization). Throws like build().
std::string emit_assembly(const te::LoweredFunc& f, const Target& target,
                          const BuildOptions& options = {});

}  // namespace ktune::codegen
