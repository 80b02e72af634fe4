// cross_build: lowered code to the bytes of a shared object, for a device that cannot build.
#include "rpc_runner/server/cross_build.h"

#include "codegen/codegen_llvm.h"
#include "codegen/shared_object.h"

namespace ktune::rpc_runner {

std::string cross_build(const te::LoweredFunc& func, const codegen::Target& target) {
  const auto bytes = codegen::link_shared(codegen::build(func, target)).serialize();
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace ktune::rpc_runner
