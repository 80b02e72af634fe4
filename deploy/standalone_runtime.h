// Declares the text of codegen/parallel_runtime.c, embedded into ktune at build time for `ktune
// build --runtime`.
#pragma once

#include <string_view>

namespace ktune::deploy {

// Returns the C source of ktune_parallel_for for programs linked outside ktune (plain C and
// pthreads), exactly as codegen/parallel_runtime.c was when ktune was built. Never throws.
std::string_view standalone_runtime_source();

}  // namespace ktune::deploy
