// Defines KernelCache: compiled kernels' objects kept on disk between processes, keyed by what
// decides their bytes (the kernel's LLVM IR, the target machine, LLVM and ktune's pipeline).
#pragma once

#include <functional>
#include <string>

namespace ktune::codegen {

// Why: most of a model build's time is LLVM optimizing kernels (ResNet-18 untuned: 14 s, 57% of
// it in LLVM), and every `build --model` and `run` of a model builds the same kernels again. As
// Triton's and JAX's compilation caches do, build() keeps each object under a digest of its
// inputs; an object read back is the one LLVM made from them.
//
// Entries are files `llvmcache-<sha256>`, each written to a temporary file and renamed into
// place, so processes may share a folder (LLVM's own localCache would abort the process on a full
// disk); LLVM's pruneCache keeps the folder under 1 GiB and drops entries unused for 30 days
// (checked at most every 20 minutes).
class KernelCache {
 public:
  // The cache of folder dir as it is; an empty dir is the cache that is off (every request
  // compiles).
  explicit KernelCache(std::string dir = "");

  // The cache of folder dir for code this process will run: dir is made (owner only) if missing.
  // Others could plant code in a folder that group or others may write to, or that another user
  // owns: such a folder gives the cache that is off, with a warning. So does one that cannot be
  // made, with a warning when the user named it (`named`), else at debug level (a default folder
  // of a service user without a home is no news).
  static KernelCache open(const std::string& dir, bool named);

  // The cache build() uses: off until the program names its folder (ktune:
  // tools/environment.h) with use_folder(), before it builds a kernel. The folder is opened
  // (open(dir, named)) when a kernel is first built, so a command that builds none neither makes
  // it nor warns about it.
  static const KernelCache& of_process();
  static void use_folder(std::string dir, bool named);

  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  // The object stored under key if the folder holds one that defines the symbol entry, else
  // compile()'s (then stored under key; a failure to store is logged at debug level and the
  // object still returned). Exceptions of compile() pass through; nothing is stored then.
  std::string object(const std::string& key, const std::string& entry,
                     const std::function<std::string()>& compile) const;

 private:
  std::string dir_;
};

}  // namespace ktune::codegen
