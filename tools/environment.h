// Declares what ktune reads from its environment: the kernel cache's folder.
#pragma once

namespace ktune::tools {

// Names the kernel cache's folder to codegen::KernelCache::use_folder: $KTUNE_KERNEL_CACHE (a
// folder, or "off"), else $XDG_CACHE_HOME/ktune/kernels, else $HOME/.cache/ktune/kernels. Only
// KTUNE_KERNEL_CACHE's is named by the user (a warning if it cannot be used).
void use_kernel_cache_from_environment();

}  // namespace ktune::tools
