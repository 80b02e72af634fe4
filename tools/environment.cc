// kernel_cache_from_environment(): KTUNE_KERNEL_CACHE, XDG_CACHE_HOME, HOME.
#include "tools/environment.h"

#include <cstdlib>
#include <string>

namespace ktune::tools {

codegen::KernelCache kernel_cache_from_environment() {
  const auto var = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (const std::string named = var("KTUNE_KERNEL_CACHE"); !named.empty())
    return named == "off" ? codegen::KernelCache() : codegen::KernelCache::open(named, true);
  if (const std::string xdg = var("XDG_CACHE_HOME"); !xdg.empty())
    return codegen::KernelCache::open(xdg + "/ktune/kernels", false);
  if (const std::string home = var("HOME"); !home.empty())
    return codegen::KernelCache::open(home + "/.cache/ktune/kernels", false);
  return codegen::KernelCache();
}

}  // namespace ktune::tools
