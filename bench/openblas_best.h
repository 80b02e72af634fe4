// Defines use_openblas_at_its_best(): makes a benchmark compare with OpenBLAS's AVX-512 kernels.
#pragma once

#include <cblas.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ktune::bench {

// OpenBLAS 0.3.21 picks its kernels when it loads; it does not recognize every AVX-512 CPU (a
// Sapphire Rapids VM gets its AVX2 "Haswell" kernels) and some environments pin
// OPENBLAS_CORETYPE=Haswell. On an AVX-512 host (`vector_bits` 512) with weaker kernels chosen,
// re-executes this program with OPENBLAS_CORETYPE=SkylakeX, so the comparison is with OpenBLAS
// at its best. Returns normally when no re-run is needed or execv failed.
inline void use_openblas_at_its_best(int vector_bits, char** argv) {
  const std::string core = openblas_get_corename();
  if (vector_bits != 512 || core.find("Skylake") != std::string::npos ||
      core.find("Cooperlake") != std::string::npos ||
      core.find("SapphireRapids") != std::string::npos) {
    return;
  }
  std::printf(
      "OpenBLAS chose its '%s' kernels on an AVX-512 host: re-running with "
      "OPENBLAS_CORETYPE=SkylakeX\n",
      core.c_str());
  std::fflush(stdout);
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  execv("/proc/self/exe", argv);
  std::perror("execv");  // fall through and compare with the kernels OpenBLAS chose
}

}  // namespace ktune::bench
