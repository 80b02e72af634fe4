// Defines shared-object kernels: linking an artifact into an ELF shared object on the server,
// and SharedKernel, which loads one with dlopen on a device that has no LLVM.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/artifact.h"
#include "codegen/generated_call.h"

namespace ktune::codegen {

// True when `bytes` is an ELF shared object (e_type ET_DYN).
bool is_shared_object(const std::vector<uint8_t>& bytes);

// The architecture an ELF file's code is for ("x86_64", "aarch64", "riscv64", "arm",
// "machine N" for others), or "" when `bytes` is not ELF.
std::string elf_architecture(const std::vector<uint8_t>& bytes);

// The architecture of this process's code, in elf_architecture()'s names.
std::string native_architecture();

// Returns a copy of `artifact` whose object is a shared object linked from its relocatable
// object by LLVM's linker (`linker`, or ld.lld-19, else ld.lld, looked up on PATH). This is what
// the tuning server sends to a device without a compiler: the device needs only dlopen, no linker.
// Undefined symbols (ktune_parallel_for, libm's) stay undefined: the process that loads the
// kernel provides them. Thread-safe. Throws Error(kBuild) when no linker is found or it fails
// (its message included) and Error(kIo) when a temporary file cannot be written.
Artifact link_shared(const Artifact& artifact, const std::string& linker = "");

// Returns one shared object linked from the relocatable objects of several artifacts (a whole
// model: its kernels and its driver), by the same linker and with the same undefined symbols as
// link_shared. Throws like link_shared.
std::vector<uint8_t> link_shared_objects(const std::vector<Artifact>& artifacts,
                                         const std::string& linker = "");

// A shared object loaded with dlopen, whose symbols are looked up by name. Move-only; destroying
// it closes the library.
class SharedLibrary {
 public:
  // Throws Error(kUnsupported) for another architecture's code, Error(kBuild) when it is not a
  // shared object or cannot be loaded (the loader's message included).
  static SharedLibrary load(const std::vector<uint8_t>& bytes);
  SharedLibrary(SharedLibrary&&) noexcept;
  SharedLibrary& operator=(SharedLibrary&&) noexcept;
  ~SharedLibrary();
  // The address of `name`; throws Error(kBuild) when the library does not define it.
  void* symbol(const std::string& name) const;

 private:
  SharedLibrary() = default;
  void* handle_ = nullptr;
};

// A kernel loaded from a shared-object artifact with dlopen. Move-only; destroying it closes
// the library. run() may be called from several threads at once.
class SharedKernel {
 public:
  using EntryFn = int32_t (*)(void* const*);

  // Loads the artifact's shared object and resolves its entry. Throws Error(kUnsupported)
  // when the object's architecture is not this process's, Error(kBuild) when it is not a
  // shared object, cannot be loaded (the loader's message included) or lacks the entry, and
  // Error(kIo) when the temporary file it is loaded from cannot be written.
  static SharedKernel load(const Artifact& artifact);

  SharedKernel(SharedKernel&&) noexcept;
  SharedKernel& operator=(SharedKernel&&) noexcept;
  ~SharedKernel();

  // Calls the kernel: args holds one 64-byte aligned buffer per signature entry, in order.
  int32_t run(void* const* args) const { return call_generated(fn_, args); }
  // The entry point, valid while this kernel lives.
  EntryFn entry() const { return fn_; }
  const std::vector<ArgSpec>& signature() const { return signature_; }

 private:
  SharedKernel() = default;
  void* handle_ = nullptr;
  EntryFn fn_ = nullptr;
  std::vector<ArgSpec> signature_;
};

}  // namespace ktune::codegen
