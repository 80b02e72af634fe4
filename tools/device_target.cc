// ktune-device's view of its machine: /proc/cpuinfo, the auxiliary vector and the affinity mask.
#include "tools/device_target.h"

#include <sched.h>
#include <sys/auxv.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace ktune::tools {
namespace {

std::string native_triple() {
#if defined(__aarch64__)
  return "aarch64-linux-gnu";
#elif defined(__x86_64__)
  return "x86_64-linux-gnu";
#elif defined(__riscv) && __riscv_xlen == 64
  return "riscv64-linux-gnu";
#else
  return "unknown-linux-gnu";
#endif
}

// Arm Ltd. (implementer 0x41) parts, by MIDR part number, as LLVM names them.
const std::map<int, std::string>& arm_parts() {
  static const std::map<int, std::string> parts = {
      {0xd03, "cortex-a53"},  {0xd04, "cortex-a35"},  {0xd05, "cortex-a55"},  {0xd07, "cortex-a57"},
      {0xd08, "cortex-a72"},  {0xd09, "cortex-a73"},  {0xd0a, "cortex-a75"},  {0xd0b, "cortex-a76"},
      {0xd0c, "neoverse-n1"}, {0xd0d, "cortex-a77"},  {0xd40, "neoverse-v1"}, {0xd41, "cortex-a78"},
      {0xd44, "cortex-x1"},   {0xd46, "cortex-a510"}, {0xd47, "cortex-a710"}, {0xd48, "cortex-x2"},
      {0xd49, "neoverse-n2"}, {0xd4f, "neoverse-v2"},
  };
  return parts;
}

// The biggest Arm core listed in /proc/cpuinfo ("" when none is known). Part numbers grow with
// the core's generation and size within a board's pairs (a53 < a72, a55 < a76).
std::string cpu_from_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  int implementer = -1, best = -1;
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = line.substr(colon + 1);
    try {
      if (key == "CPU implementer") implementer = std::stoi(value, nullptr, 0);
      if (key == "CPU part" && implementer == 0x41) {
        const int part = std::stoi(value, nullptr, 0);
        if (arm_parts().count(part) && part > best) best = part;
      }
    } catch (const std::exception&) {
      // A line this parser does not understand names no core.
    }
  }
  return best >= 0 ? arm_parts().at(best) : "";
}

// LLVM attributes for the SIMD features the kernel reports (AArch64 HWCAP bits).
std::string attributes_from_hwcap() {
#if defined(__aarch64__)
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  std::vector<std::string> attrs;
  if (hwcap & (1ul << 1)) attrs.push_back("+neon");       // HWCAP_ASIMD
  if (hwcap & (1ul << 10)) attrs.push_back("+fullfp16");  // HWCAP_ASIMDHP
  if (hwcap & (1ul << 20)) attrs.push_back("+dotprod");   // HWCAP_ASIMDDP
  if (hwcap & (1ul << 22)) attrs.push_back("+sve");       // HWCAP_SVE
  if (hwcap2 & (1ul << 1)) attrs.push_back("+sve2");      // HWCAP2_SVE2
  std::string joined;
  for (const std::string& a : attrs) joined += (joined.empty() ? "" : ",") + a;
  return joined;
#else
  return "";
#endif
}

int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

std::string DeviceTarget::str() const {
  std::string s = "llvm -mtriple=" + triple + " -mcpu=" + cpu;
  if (!attributes.empty()) s += " -mattr=" + attributes;
  return s + " -num-cores=" + std::to_string(cores);
}

DeviceTarget detect_device_target(const std::string& cpu_override) {
  DeviceTarget t;
  t.triple = native_triple();
  t.cores = affinity_cores();
  if (!cpu_override.empty()) {
    t.cpu = cpu_override;
    t.cpu_source = "--cpu";
    return t;
  }
  t.cpu = cpu_from_cpuinfo();
  if (!t.cpu.empty()) {
    t.cpu_source = "/proc/cpuinfo";
    return t;
  }
  // Unknown core (or an emulator, whose /proc/cpuinfo is the host's): LLVM's generic core plus
  // what the kernel says the SIMD unit has.
  t.cpu = "generic";
  t.cpu_source = "unknown";
  t.attributes = attributes_from_hwcap();
  return t;
}

}  // namespace ktune::tools
