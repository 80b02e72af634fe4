// Declares ktune's parallel runtime: the entry compiled kernels call for parallel loops.
#pragma once

#include <cstdint>

extern "C" {
// The body of a parallel loop, outlined by codegen: runs iterations [begin, end) and returns
// 0 or a kernel error code.
typedef int32_t (*ktune_parallel_body)(int64_t begin, int64_t end, void* closure);

// Runs body over [0, extent) in contiguous chunks, a few per thread, that the caller and the
// pool's workers claim in order, and returns the first non-zero code, else 0. Blocks until every
// chunk finished. A call from inside a body runs serially. Thread-safe. Defined in
// codegen/parallel_runtime.c, which also documents the pool.
int32_t ktune_parallel_for(int64_t extent, ktune_parallel_body body, void* closure);
// Threads of the next loops (the caller counts as one); 0, or -1 (nothing changed) when n < 1.
int ktune_set_num_threads(int n);
// The current thread count; the default is the number of CPUs in the process's affinity mask.
int ktune_get_num_threads(void);
// Caps the loops the calling thread starts at n threads (0: no cap; a cap of 1 runs them on the
// caller) and returns the previous cap: what a model library sets around a step measured faster
// on fewer threads. Per thread: other threads' loops keep their own.
int ktune_set_thread_cap(int n);
// 1 (the default, or 0 with KTUNE_BIND_THREADS=0 in the environment): each worker of the pool is
// bound to a CPU of its own, the caller left to the rest of the affinity mask; 0: workers run
// anywhere in the mask. Applies to running workers too; returns the previous setting.
int ktune_set_thread_binding(int on);
// A kernel's temporary buffer above codegen's stack limit (64-byte aligned, NULL when out of
// memory), and its release: each thread keeps the blocks its kernels released and hands them out
// again, so repeated runs allocate nothing (TVM's TVMBackendAllocWorkspace). Defined in
// codegen/parallel_runtime.c.
void* ktune_workspace_alloc(int64_t bytes);
void ktune_workspace_free(void* ptr);
}

namespace ktune::codegen {

// Sets how many threads parallel loops use (>= 1; the calling thread counts as one). The
// default is the number of CPUs this process may run on. Takes effect for the next parallel loop.
// Throws Error(kInvalidArgument) for n < 1.
void set_num_threads(int n);
// Returns the current thread count of parallel loops.
int num_threads();

}  // namespace ktune::codegen
