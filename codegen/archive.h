// Declares static_library(): kernel objects packed into one static library (an `ar` archive).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/artifact.h"

namespace ktune::codegen {

// Returns the bytes of a static library (GNU ar format with a symbol index, deterministic: no
// time stamps or owners) holding one member `<entry>.o` per artifact, in order, so that a linker
// pulls in the kernels a program calls. Artifacts may be of any target LLVM reads.
// Throws Error(kInvalidArgument) for no artifacts or two with the same entry, Error(kBuild) when
// LLVM cannot write the archive (an object it cannot read).
std::vector<uint8_t> static_library(const std::vector<Artifact>& artifacts);

}  // namespace ktune::codegen
