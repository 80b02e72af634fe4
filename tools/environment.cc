// use_kernel_cache_from_environment(): KTUNE_KERNEL_CACHE, XDG_CACHE_HOME, HOME.
#include "tools/environment.h"

#include <cstdlib>
#include <string>

#include "codegen/kernel_cache.h"

namespace ktune::tools {

void use_kernel_cache_from_environment() {
  const auto var = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (const std::string named = var("KTUNE_KERNEL_CACHE"); !named.empty())
    codegen::KernelCache::use_folder(named == "off" ? "" : named, true);
  else if (const std::string xdg = var("XDG_CACHE_HOME"); !xdg.empty())
    codegen::KernelCache::use_folder(xdg + "/ktune/kernels", false);
  else if (const std::string home = var("HOME"); !home.empty())
    codegen::KernelCache::use_folder(home + "/.cache/ktune/kernels", false);
}

}  // namespace ktune::tools
