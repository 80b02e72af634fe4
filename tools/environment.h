// Declares what ktune reads from its environment: the kernel cache's folder.
#pragma once

#include "codegen/kernel_cache.h"

namespace ktune::tools {

// The kernel cache of $KTUNE_KERNEL_CACHE (a folder, or "off"), else of
// $XDG_CACHE_HOME/ktune/kernels, else of $HOME/.cache/ktune/kernels, through KernelCache::open
// (a folder others may write to is refused; only KTUNE_KERNEL_CACHE's is named by the user).
codegen::KernelCache kernel_cache_from_environment();

}  // namespace ktune::tools
