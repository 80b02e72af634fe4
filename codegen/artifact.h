// Defines ktune::codegen::Artifact, a compiled kernel (object bytes + entry + signature + target).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ktune::codegen {

// One tensor argument of a kernel, in the order the kernel ABI passes them.
struct ArgSpec {
  std::vector<int64_t> shape;
  std::string dtype = "float32";  // te's dtype name: float32, float64, int32, ...
  bool is_output = false;

  int64_t num_elements() const;
  // Bytes of one element of dtype; throws Error(kInvalidArgument) for an unknown dtype.
  int64_t element_bytes() const;
  bool operator==(const ArgSpec&) const = default;
};

// A relocatable object file for one target and what is needed to call its kernel:
// `extern "C" int32_t <entry>(void* const* args)`, one pointer per ArgSpec, 64-byte aligned.
// A plain value; it travels to remote workers through serialize()/deserialize().
struct Artifact {
  std::vector<uint8_t> object;     // ELF (or the target's format) relocatable object
  std::string entry;               // the kernel's symbol
  std::vector<ArgSpec> signature;  // arguments in call order
  std::string target;              // Target::str() it was compiled for
  std::string llvm_version;        // LLVM that compiled it

  // Returns a self-describing byte blob (magic, version, length-prefixed fields).
  std::vector<uint8_t> serialize() const;
  // Inverse of serialize(). Throws Error(kInvalidArgument) for a truncated, foreign or
  // corrupted blob (bad magic, version, lengths or checksum, an unknown dtype, an argument of
  // more than 2^48 bytes); never reads out of bounds, and num_elements() * element_bytes() of
  // every argument it returns fits in int64_t.
  static Artifact deserialize(const std::vector<uint8_t>& bytes);

  bool operator==(const Artifact&) const = default;
};

}  // namespace ktune::codegen
