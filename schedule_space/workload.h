// Defines TargetTraits (what a template knows of its target) and workload arguments: specs,
// validation, canonical keys.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ktune::schedule_space {

// What a template needs to know of the target, filled by the caller from codegen::Target
// (schedule_space does not use codegen). Defaults describe an AVX-512 x86-64 core.
//
// AArch64: every core is described as 128-bit NEON with 32 vector registers, SVE cores included.
// Codegen emits fixed-width vectors, which LLVM lowers to NEON; SVE registers are at least 128
// bits and alias the NEON ones, so this code runs on every SVE core. We do not emit fixed-length
// SVE: LLVM would (a `vscale_range(2,2)` function attribute turns <8 x float> FMAs on
// neoverse-v1 into `ptrue p0.s; fmad z0.s`), but the code is then only correct on cores of
// exactly that length, and the length is not part of the -mcpu name (Neoverse V1: 256 bits,
// V2 and N2: 128, A64FX: 512). On Neoverse V1 NEON loses no peak: its four 128-bit pipes issue
// as many FMAs as its two 256-bit SVE pipes. Where SVE is wider than the FMA issue (A64FX) NEON
// code reaches a quarter of peak; that is the known gap.
struct TargetTraits {
  std::string key;  // canonical target string, e.g. "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"
  int vector_bits = 512;  // native SIMD register width in bits (512 AVX-512, 256 AVX2, 128 NEON)
  int cores = 1;          // cores a kernel may use
  std::string arch = "x86_64";  // the triple's architecture: "x86_64", "aarch64", ...
  // The target has an int8 dot-product instruction (four byte products summed into each int32
  // lane), which the int8 templates tensorize with; int8_dot_insn says which:
  //   "vpdpbusd": x86-64 AVX-512 VNNI, u8 x s8, 16 lanes;
  //   "usdot":    AArch64 i8mm, u8 x s8, 4 lanes;
  //   "sdot":     AArch64 dotprod, s8 x s8, 4 lanes: u8 operands are shifted by 128 and the
  //               product compensated (codegen/llvm_dot.cc), an extra sdot per B vector, or,
  //               with the int8 templates' shift_data, the products take x - 128 and the
  //               compensation is the caller's (a model build folds it into the bias);
  //   "":         none, widening multiply-adds.
  bool int8_dot = false;
  std::string int8_dot_insn;
  // x86-64 with AVX-512 BF16: 16 float32 lanes, each adding two bfloat16 x bfloat16 products,
  // in one instruction (vdpbf16ps), the bf16 templates' tensor intrinsic.
  bool bf16_dot = false;

  // Lanes of one SIMD register for elements of `bits` bits (at least 1).
  int vector_lanes(int bits = 32) const { return vector_bits / bits > 0 ? vector_bits / bits : 1; }
  // Number of architectural SIMD registers (32 on AVX-512 and NEON, 16 on AVX2/SSE).
  int vector_registers() const { return arch == "x86_64" && vector_bits < 512 ? 16 : 32; }
  bool is_aarch64() const { return arch == "aarch64"; }
  // Vector registers a register tile may fill with accumulators when each reduction step keeps
  // `operand_vectors` loaded vectors live (the B vectors of a GEMM row, the weight vectors of an
  // oc block). x86-64: all but two, whatever the operands (an FMA takes one operand straight
  // from memory, with a broadcast under AVX-512). AArch64: all but the operand vectors and one
  // for the broadcast scalar: FMLA reads registers only, the scalar is loaded and used by
  // element, and LLVM loads every operand vector of a step before its FMAs (more spills: a
  // 7 x 4-vector NCHWc tile, 28 + 4 + 1 = 33 registers, reloads an accumulator every step).
  int64_t accumulator_budget(int64_t operand_vectors) const {
    return is_aarch64() ? vector_registers() - operand_vectors - 1 : vector_registers() - 2;
  }
  // Per-core data cache sizes that fallback configs size their cache blocks for. AArch64: the
  // Cortex-A72/A76 class, taking the smaller of the two: A72's 32 KiB L1D (A76: 64 KiB) and a
  // 256 KiB L2 share (Raspberry Pi 4: 1 MiB L2 for four A72s; A76: 256 or 512 KiB private).
  // x86-64: Zen 4 (32 KiB, 1 MiB), where the x86 fallbacks were measured.
  int64_t l1d_bytes() const { return int64_t{32} << 10; }
  int64_t l2_bytes() const { return is_aarch64() ? int64_t{256} << 10 : int64_t{1} << 20; }
};

// Traits from a target's parts (what codegen::Target reports): arch is the triple's first
// component ("x86_64-linux-gnu" -> "x86_64"); int8_dot from the key's -mcpu (a CPU whose
// defaults include AVX-512 VNNI, or AArch64 i8mm or dotprod) and -mattr (+avx512vnni,
// -avx512vnni, -avx512f; +i8mm, +dotprod, -i8mm, -dotprod, -neon); bf16_dot likewise for AVX-512
// BF16 (+avx512bf16, -avx512bf16, -avx512f). Throws
// Error(kInvalidArgument) for non-positive vector_bits or cores.
TargetTraits make_target_traits(const std::string& key, const std::string& triple, int vector_bits,
                                int cores);

// One argument of a template.
struct ArgSpec {
  enum class Type { kInt, kString };
  std::string name;
  Type type = Type::kInt;
  std::string default_value;  // "" = required
  std::string doc;
  int64_t min_value = 1;  // ints: smallest accepted value (sizes are >= 1)
  // ints: largest accepted value. 2^31 - 1 by default: no tensor dimension of a real workload is
  // larger, and it keeps defining split knobs (divisors up to sqrt) instant.
  int64_t max_value = (int64_t{1} << 31) - 1;
  std::vector<std::string> choices = {};  // strings: accepted values (empty = any)
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
  // Replaces the value of string argument `name` (a template's resolve hook: a canonical form);
  // the key leaves it out when it equals a key_omits_default argument's default. Throws
  // Error(kInvalidArgument) when absent or an int argument.
  void set_string(const std::string& name, const std::string& value);
  const std::vector<std::pair<std::string, std::string>>& values() const { return values_; }
  // As a map (what Task::create takes).
  std::map<std::string, std::string> to_map() const;
  // {"K": 1024, ..., "dtype": "float32"} with ints as JSON numbers (keys sorted, as JSON objects
  // are).
  nlohmann::json to_json() const;
  // "matmul(M=1024,N=1024,K=1024,dtype=float32)": every argument, declared order (but those
  // with key_omits_default at their default).
  std::string key(const std::string& template_name) const;

 private:
  std::vector<std::pair<std::string, std::string>> values_;
  std::vector<bool> is_int_;
  std::vector<bool>
      omitted_;  // left out of the key (default value of a key_omits_default argument)
  std::vector<std::optional<std::string>>
      omitted_default_;  // key_omits_default arguments: the default
};

// Splits "key=value" words into a map; throws Error(kInvalidArgument) for a word without '=',
// an empty key, or a key given twice. (Validation against a template is WorkloadArgs' job.)
std::map<std::string, std::string> split_key_values(const std::vector<std::string>& words);

}  // namespace ktune::schedule_space
