// Declares the C header that `ktune build` writes next to a kernel object: provenance, the raw
// entry, a typed wrapper.
#pragma once

#include <string>
#include <vector>

#include "codegen/artifact.h"

namespace ktune::deploy {

// What the header says about where the kernel came from.
struct KernelProvenance {
  std::string workload_key;  // "matmul(M=64,N=48,K=32,dtype=float32)"
  std::string target;        // canonical target string the object was compiled for
  std::string llvm_version;  // LLVM that compiled the object
  std::string config_json;   // the config, one line
  // "tuning log ktune.db, record 12: 35.20 GFLOP/s (0.0120 ms), tuner xgb" or
  // "fallback, untuned (...why...)": one line, shown as is.
  std::string source;
  std::string ktune_version;
};

// The C element type of a te dtype name ("float32" -> "float", "int64" -> "int64_t"; bfloat16's
// bits are uint16_t). Throws Error(kUnsupported) for a type C has no name for.
std::string c_type(const std::string& dtype);

// Returns whether `name` is a C identifier ([A-Za-z_][A-Za-z0-9_]*) that is not a C or C++
// keyword. Never throws.
bool is_c_identifier(const std::string& name);

// Returns the parameter names of `<symbol>_run`, one per kernel argument: its tensor name made
// into a C identifier that is not a keyword and clashes neither with another argument nor with
// a name the header defines. Never throws.
std::vector<std::string> wrapper_parameter_names(const std::string& symbol,
                                                 const std::vector<std::string>& tensor_names);

// Returns the header text for the kernel `symbol` with the artifact's signature; tensor_names
// are the kernel arguments' tensor names in call order (one per ArgSpec). It declares
// `int32_t <symbol>(void* const* args)` and `static inline int32_t <symbol>_run(...)`.
// Throws Error(kInvalidArgument) for a symbol that is not a C identifier, an empty signature or a
// names/signature size mismatch, Error(kUnsupported) for a dtype with no C type.
std::string kernel_header(const std::string& symbol, const codegen::Artifact& artifact,
                          const std::vector<std::string>& tensor_names,
                          const KernelProvenance& provenance);

// One kernel of a combined header: what kernel_header() takes.
struct KernelHeaderPart {
  std::string symbol;
  const codegen::Artifact* artifact = nullptr;
  std::vector<std::string> tensor_names;
  KernelProvenance provenance;
};

// Returns one header for several kernels (`ktune build --manifest`): a comment that lists every
// kernel with its workload and config source and says how to link `library` (the static library's
// file name), then each kernel's kernel_header() text in order (each keeps its own guard,
// provenance and wrapper), inside a guard made of `name` (the header's file name). Throws as
// kernel_header, and Error(kInvalidArgument) for no kernels or a part without an artifact.
std::string kernels_header(const std::string& name, const std::string& library,
                           const std::vector<KernelHeaderPart>& kernels);

// The standard alignment, in bytes, every kernel buffer must have (the kernel ABI).
inline constexpr int kKernelBufferAlignment = 64;

}  // namespace ktune::deploy
