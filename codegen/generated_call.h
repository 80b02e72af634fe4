// Defines call_generated, the one way ktune calls a kernel's entry point (code LLVM generated).
#pragma once

#include <cstdint>

namespace ktune::codegen {

// clang's UBSan check -fsanitize=function (in -fsanitize=undefined; gcc has no such check)
// compares a type signature that clang places just before each function it compiles with the
// type of the call. Generated kernels carry no signature, so the check would read the 8 bytes
// before the entry: garbage, or unmapped memory when the JIT put the entry at the start of a page
// (a SEGV in build-asan/). Calls into generated code are therefore left out of that check only.
#if defined(__clang__)
#define KTUNE_NO_SANITIZE_FUNCTION __attribute__((no_sanitize("function")))
#else
#define KTUNE_NO_SANITIZE_FUNCTION
#endif

using EntryFn = int32_t (*)(void* const*);

// Calls a kernel's entry with its argument buffers and returns its status (0 = success).
KTUNE_NO_SANITIZE_FUNCTION inline int32_t call_generated(EntryFn fn, void* const* args) {
  return fn(args);
}

}  // namespace ktune::codegen
