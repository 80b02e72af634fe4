// Defines ktune::codegen::Target, a parsed and validated LLVM code generation target.
#pragma once

#include <string>
#include <vector>

namespace ktune::codegen {

// A code generation target: triple, CPU and feature attributes, as LLVM 19 understands them.
// Immutable value type; safe to share between threads.
class Target {
 public:
  // Parses "host", "llvm" (the host triple and CPU) or a TVM-style string
  // "llvm -mtriple=<triple> -mcpu=<cpu> -mattr=+a,-b -num-cores=<n>" (options in any order,
  // each at most once; n from 1 to 1024).
  // Without -mcpu a foreign triple gets "generic". Throws Error(kInvalidArgument) for a
  // malformed string, an unknown CPU or attribute (the message lists what LLVM knows for that
  // triple) and Error(kUnsupported) for a triple no backend of this LLVM build handles (the
  // message lists the backends).
  static Target parse(const std::string& text);
  // The machine this process runs on: detected triple, CPU, features and core count.
  static Target host();

  // Canonical, stable form: "llvm -mtriple=T -mcpu=C[ -mattr=+a,-b][ -num-cores=n]".
  // Attributes are sorted and only those that differ from the CPU's defaults are listed, so
  // equal targets print equally (host included). It is part of the tuning log's key.
  std::string str() const;

  const std::string& triple() const { return triple_; }
  const std::string& cpu() const { return cpu_; }
  // Explicit attribute overrides ("+avx512f", "-neon"), sorted.
  const std::vector<std::string>& attributes() const { return attributes_; }
  // The LLVM feature string for TargetMachine creation ("+a,-b").
  std::string feature_string() const;
  // Width in bits of the widest native SIMD register for floats (512 with AVX-512, 128 NEON).
  int vector_bits() const { return vector_bits_; }
  // Cores the parallel runtime may use (host: detected; foreign: -num-cores or 1).
  int cores() const { return cores_; }
  // True when code for this target runs in this process: same architecture and OS, and every
  // feature it enables is present on the host CPU.
  bool is_host_compatible() const;

  bool operator==(const Target& other) const { return str() == other.str(); }

 private:
  Target() = default;
  std::string triple_;
  std::string cpu_;
  std::vector<std::string> attributes_;
  int vector_bits_ = 128;
  int cores_ = 1;
  bool explicit_cores_ = false;
};

// The LLVM version codegen was built with, e.g. "19.1.7". Part of the tuning log's key.
std::string llvm_version();

}  // namespace ktune::codegen
