// Declares the one-time, thread-safe initialization of LLVM's targets used by all of codegen.
#pragma once

namespace ktune::codegen {

// Registers every target, MC layer, assembly printer and parser of the linked libLLVM, once
// per process (later calls return at once). Never throws.
void initialize_llvm();

}  // namespace ktune::codegen
