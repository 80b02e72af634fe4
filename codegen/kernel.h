// Defines ktune::codegen::Kernel, an artifact JIT-linked into this process and callable.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "codegen/artifact.h"
#include "codegen/generated_call.h"

namespace ktune::codegen {

// A kernel linked into this process by the process-wide ORC JIT (one JITDylib and resource
// tracker per kernel, so thousands can be loaded and freed). Move-only; destroying it
// unlinks the code and frees its memory. run() may be called from several threads at once;
// load() and destruction are thread-safe.
class Kernel {
 public:
  // Links the artifact's object into this process and resolves its entry. Undefined symbols
  // resolve to ktune_parallel_for and to the process's libraries (libm, libc).
  // Throws Error(kUnsupported) when the artifact's target cannot run here and Error(kBuild)
  // when the object cannot be linked or lacks the entry symbol.
  static Kernel load(const Artifact& artifact);

  Kernel(Kernel&&) noexcept;
  Kernel& operator=(Kernel&&) noexcept;
  ~Kernel();

  // Calls the kernel: args holds one 64-byte aligned buffer per signature entry, in order.
  // Returns the kernel's status (0 = success).
  int32_t run(void* const* args) const { return call_generated(fn_, args); }
  int32_t run(const std::vector<void*>& args) const { return call_generated(fn_, args.data()); }
  // The entry point, valid while this kernel lives.
  int32_t (*entry() const)(void* const*) { return fn_; }
  const std::vector<ArgSpec>& signature() const { return signature_; }

 private:
  struct Linked;
  using EntryFn = int32_t (*)(void* const*);
  Kernel() = default;
  std::unique_ptr<Linked> linked_;
  EntryFn fn_ = nullptr;
  std::vector<ArgSpec> signature_;
};

}  // namespace ktune::codegen
