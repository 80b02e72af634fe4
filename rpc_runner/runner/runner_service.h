// Defines the loop of the ktune-runner child process: load kernels, check them, time them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "codegen/artifact.h"

namespace ktune::rpc_runner {

// A kernel ready to call, and what keeps its code mapped (a JIT-linked or dlopen'ed library).
struct LoadedKernel {
  int32_t (*fn)(void* const* args) = nullptr;
  std::shared_ptr<void> owner;
};

// Loads an artifact's kernel into this process. Throws Error (kUnsupported: code for another
// architecture; kBuild: cannot be loaded).
using KernelLoader = std::function<LoadedKernel(const codegen::Artifact&)>;

// The loaders of this process: shared objects with dlopen (codegen::SharedKernel), and
// relocatable objects through `jit` when this process has one (ktune-runner: LLVM's ORC JIT;
// ktune-device has none and refuses them).
KernelLoader make_kernel_loader(KernelLoader jit = nullptr);

// Serves requests on the connected socket `fd` until EOF: kReference loads the artifact, runs
// it on seeded inputs and caches its outputs under the reference key; kMeasure loads a
// candidate, runs it on the same inputs, compares its outputs with the cached reference and
// times it. Every request gets one reply; failures are typed replies (kBuild: cannot load,
// kRun: non-zero status, kWrongAnswer, kUnknown: missing reference or bad signature).
// A kernel that crashes or hangs takes this process down: that is what the parent handles.
// Kernels are loaded with `load`. Returns the process exit status (0 on EOF, 2 on a broken
// channel). Never throws.
int serve(int fd, const KernelLoader& load);

}  // namespace ktune::rpc_runner
