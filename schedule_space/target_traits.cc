// make_target_traits: the parts of a target a template needs, from the target string, including
// which int8 dot-product instruction the CPU and -mattr give, and whether it has AVX-512 BF16.
#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "schedule_space/workload.h"
#include "support/error.h"

namespace ktune::schedule_space {
namespace {

// The value of option `-name=` in a target string ("" when absent).
std::string target_option(const std::string& key, const std::string& name) {
  const std::string tag = " -" + name + "=";
  const size_t at = key.find(tag);
  if (at == std::string::npos) return "";
  const size_t from = at + tag.size();
  return key.substr(from, key.find(' ', from) - from);
}

template <size_t N>
bool is_one_of(const std::string& cpu, const char* const (&cpus)[N]) {
  return std::any_of(std::begin(cpus), std::end(cpus), [&](const char* c) { return cpu == c; });
}

// Whether the target string has `feature`: `cpu_default` (the -mcpu's defaults: Target::str()
// lists only the attributes that differ from them), then -mattr's +feature, and any of `off`
// (-feature, or a feature it needs) removing it.
bool has_feature(const std::string& key, bool cpu_default, const std::string& feature,
                 const std::vector<std::string>& off) {
  bool on = cpu_default;
  const std::string attrs = "," + target_option(key, "mattr") + ",";
  if (attrs.find(",+" + feature + ",") != std::string::npos) on = true;
  for (const std::string& f : off)
    if (attrs.find(",-" + f + ",") != std::string::npos) on = false;
  return on;
}

// The CPUs whose LLVM 19 defaults include each feature.
const char* const kVnniCpus[] = {
    "cascadelake",   "cooperlake",     "icelake-client", "icelake-server", "tigerlake",
    "rocketlake",    "sapphirerapids", "emeraldrapids",  "graniterapids",  "graniterapids-d",
    "diamondrapids", "znver4",         "znver5"};
const char* const kBf16Cpus[] = {"cooperlake",    "sapphirerapids",  "emeraldrapids",
                                 "graniterapids", "graniterapids-d", "diamondrapids",
                                 "znver4",        "znver5"};
// AArch64 with i8mm (usdot); all of them also have dotprod.
const char* const kI8mmCpus[] = {"ampere1",       "ampere1a",      "ampere1b",    "apple-a15",
                                 "apple-a16",     "apple-a17",     "apple-m2",    "apple-m3",
                                 "apple-m4",      "cobalt-100",    "cortex-a510", "cortex-a520",
                                 "cortex-a520ae", "cortex-a710",   "cortex-a715", "cortex-a720",
                                 "cortex-a720ae", "cortex-a725",   "cortex-x2",   "cortex-x3",
                                 "cortex-x4",     "cortex-x925",   "grace",       "neoverse-512tvb",
                                 "neoverse-n2",   "neoverse-n3",   "neoverse-v1", "neoverse-v2",
                                 "neoverse-v3",   "neoverse-v3ae", "oryon-1"};
// AArch64 with dotprod (sdot) but not i8mm.
const char* const kDotprodOnlyCpus[] = {
    "apple-a13",   "apple-a14",   "apple-m1",     "cortex-a55", "cortex-a65", "cortex-a65ae",
    "cortex-a75",  "cortex-a76",  "cortex-a76ae", "cortex-a77", "cortex-a78", "cortex-a78ae",
    "cortex-a78c", "cortex-r82",  "cortex-r82ae", "cortex-x1",  "cortex-x1c", "exynos-m4",
    "exynos-m5",   "neoverse-e1", "neoverse-n1",  "saphira",    "tsv110"};

// The int8 dot instruction of the target (see TargetTraits::int8_dot_insn). codegen picks the
// same one from LLVM's view of the target (codegen/llvm_dot.cc).
std::string int8_dot_insn(const std::string& key, const std::string& arch) {
  const std::string cpu = target_option(key, "mcpu");
  if (arch == "x86_64")
    return has_feature(key, is_one_of(cpu, kVnniCpus), "avx512vnni", {"avx512vnni", "avx512f"})
               ? "vpdpbusd"
               : "";
  if (arch != "aarch64") return "";
  const bool i8mm = is_one_of(cpu, kI8mmCpus);
  if (has_feature(key, i8mm, "i8mm", {"i8mm", "neon"})) return "usdot";
  const bool dotprod = i8mm || is_one_of(cpu, kDotprodOnlyCpus);
  return has_feature(key, dotprod, "dotprod", {"dotprod", "neon"}) ? "sdot" : "";
}

}  // namespace

TargetTraits make_target_traits(const std::string& key, const std::string& triple, int vector_bits,
                                int cores) {
  if (vector_bits <= 0 || cores <= 0)
    throw Error(ErrorKind::kInvalidArgument,
                "target '" + key + "': vector_bits and cores must be positive");
  TargetTraits t;
  t.key = key;
  t.vector_bits = vector_bits;
  t.cores = cores;
  t.arch = triple.substr(0, triple.find('-'));
  if (t.arch == "arm64") t.arch = "aarch64";
  t.int8_dot_insn = int8_dot_insn(key, t.arch);
  t.int8_dot = !t.int8_dot_insn.empty();
  t.bf16_dot =
      t.arch == "x86_64" && has_feature(key, is_one_of(target_option(key, "mcpu"), kBf16Cpus),
                                        "avx512bf16", {"avx512bf16", "avx512f"});
  return t;
}

}  // namespace ktune::schedule_space
