// The ktune-runner executable: a child of the local runner that runs candidate kernels in
// isolation (a crash or hang ends this process, never the tuner).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <unistd.h>

#include "codegen/kernel.h"
#include "rpc_runner/runner/runner_service.h"

int main(int argc, char** argv) {
  int fd = -1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--fd") == 0) fd = std::atoi(argv[i + 1]);
  }
  if (fd < 0) {
    const char usage[] = "usage: ktune-runner --fd N (started by ktune's local runner)\n";
    (void)!write(2, usage, sizeof usage - 1);
    return 2;
  }
  // Relocatable objects go through LLVM's JIT; shared objects (linked by a server for devices
  // without a compiler) through dlopen.
  auto jit = [](const ktune::codegen::Artifact& artifact) {
    auto kernel = std::make_shared<ktune::codegen::Kernel>(ktune::codegen::Kernel::load(artifact));
    ktune::rpc_runner::LoadedKernel loaded;
    loaded.fn = kernel->entry();
    loaded.owner = kernel;
    return loaded;
  };
  return ktune::rpc_runner::serve(fd, ktune::rpc_runner::make_kernel_loader(jit));
}
