// Defines cross_build: a kernel the server builds for a device that cannot (ktune-device, a
// worker started with --no-build), as the bytes of the shared object the device loads.
#pragma once

#include <string>

#include "codegen/target.h"
#include "te/lower.h"

namespace ktune::rpc_runner {

// Compiles `func` for `target` and links it into a shared object (a device without a compiler or
// linker loads it with dlopen). Returns its bytes. Throws what codegen throws.
std::string cross_build(const te::LoweredFunc& func, const codegen::Target& target);

}  // namespace ktune::rpc_runner
