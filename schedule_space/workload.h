// Defines TargetTraits (what a template knows of its target) and workload arguments: specs, validation, canonical keys.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ktune::schedule_space {

// What a template needs to know of the target, filled by the caller from codegen::Target
// (schedule_space does not use codegen). Defaults describe an AVX-512 x86-64 core.
struct TargetTraits {
  std::string key;         // canonical target string, e.g. "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"
  int vector_bits = 512;   // native SIMD register width in bits (512 AVX-512, 256 AVX2, 128 NEON)
  int cores = 1;           // cores a kernel may use
  std::string arch = "x86_64";  // the triple's architecture: "x86_64", "aarch64", ...

  // Lanes of one SIMD register for elements of `bits` bits (at least 1).
  int vector_lanes(int bits = 32) const { return vector_bits / bits > 0 ? vector_bits / bits : 1; }
  // Number of architectural SIMD registers (32 on AVX-512 and NEON, 16 on AVX2/SSE).
  int vector_registers() const { return arch == "x86_64" && vector_bits < 512 ? 16 : 32; }
};

// Traits from a target's parts (what codegen::Target reports): arch is the triple's first
// component ("x86_64-linux-gnu" -> "x86_64"). Throws Error(kInvalidArgument) for non-positive
// vector_bits or cores.
TargetTraits make_target_traits(const std::string& key, const std::string& triple, int vector_bits, int cores);

// One argument of a template.
struct ArgSpec {
  enum class Type { kInt, kString };
  std::string name;
  Type type = Type::kInt;
  std::string default_value;  // "" = required
  std::string doc;
  int64_t min_value = 1;                 // ints: smallest accepted value (sizes are >= 1)
  // ints: largest accepted value. 2^31 - 1 by default: no tensor dimension of a real workload is
  // larger, and it keeps defining split knobs (divisors up to sqrt) instant.
  int64_t max_value = (int64_t{1} << 31) - 1;
  std::vector<std::string> choices = {}; // strings: accepted values (empty = any)
  // The workload key leaves the argument out while it has its default: an argument added later
  // (an epilogue) keeps the keys, and so the tuning logs, of the workloads that do not use it.
  bool key_omits_default = false;
};

// The resolved arguments of one workload: every declared argument, in declared order, with
// canonical values (ints re-printed, defaults filled in). Value type.
class WorkloadArgs {
 public:
  WorkloadArgs() = default;
  // Validates `given` against `specs`; throws Error(kInvalidArgument) naming the template and
  // the argument for an unknown or missing argument, a non-integer, a value below min_value
  // (zero or negative sizes) or a string outside the choices.
  WorkloadArgs(const std::string& template_name, const std::vector<ArgSpec>& specs,
               const std::map<std::string, std::string>& given);

  // The int value of `name`; throws Error(kInvalidArgument) when absent or not an int argument.
  int64_t get_int(const std::string& name) const;
  // The value of `name` as text; throws Error(kInvalidArgument) when absent.
  const std::string& get(const std::string& name) const;
  // Replaces the value of int argument `name` (a template's resolve hook); throws
  // Error(kInvalidArgument) when absent or not an int argument.
  void set_int(const std::string& name, int64_t value);
  const std::vector<std::pair<std::string, std::string>>& values() const { return values_; }
  // As a map (what Task::create takes).
  std::map<std::string, std::string> to_map() const;
  // {"K": 1024, ..., "dtype": "float32"} with ints as JSON numbers (keys sorted, as JSON objects are).
  nlohmann::json to_json() const;
  // "matmul(M=1024,N=1024,K=1024,dtype=float32)": every argument, declared order (but those
  // with key_omits_default at their default).
  std::string key(const std::string& template_name) const;

 private:
  std::vector<std::pair<std::string, std::string>> values_;
  std::vector<bool> is_int_;
  std::vector<bool> omitted_;  // left out of the key (default value of a key_omits_default argument)
};

// Splits "key=value" words into a map; throws Error(kInvalidArgument) for a word without '=',
// an empty key, or a key given twice. (Validation against a template is WorkloadArgs' job.)
std::map<std::string, std::string> split_key_values(const std::vector<std::string>& words);

}  // namespace ktune::schedule_space
