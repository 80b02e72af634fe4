// Declares how ktune-device describes its machine without LLVM: triple, CPU, features, cores.
#pragma once

#include <string>

namespace ktune::tools {

struct DeviceTarget {
  std::string triple;  // e.g. "aarch64-linux-gnu" (the architecture this program was built for)
  std::string cpu;     // LLVM's name for the core ("cortex-a72"), or "generic" when unknown
  std::string
      attributes;  // "+neon,+sve" from the kernel's hardware capabilities; "" with a known cpu
  int cores = 1;   // CPUs this process may run on (its affinity mask)
  std::string cpu_source;  // where the cpu came from: "/proc/cpuinfo", "--cpu", "unknown"

  // "llvm -mtriple=T -mcpu=C[ -mattr=A] -num-cores=N": what the hello sends; the server
  // canonicalizes it with its own LLVM.
  std::string str() const;
};

// Detects this machine. The core comes from the "CPU part" lines of /proc/cpuinfo (on a
// big.LITTLE board, the biggest core: tuned kernels should suit the fast cores); when the part
// is unknown (or /proc/cpuinfo is the emulator host's), the cpu is "generic" and the SIMD
// features come from the kernel's hardware capabilities (getauxval). `cpu_override` ("" =
// detect) names the core instead, with its own features. Never throws.
DeviceTarget detect_device_target(const std::string& cpu_override = "");

}  // namespace ktune::tools
