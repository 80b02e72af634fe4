// Declares the internal step of codegen that translates te's loop IR into an LLVM module.
#pragma once

#include <memory>

#include "codegen/codegen_llvm.h"
#include "te/ir.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace ktune::codegen {

// Returns an unoptimized, verified module holding the kernel `f.name` and its helpers, with
// the data layout and triple of tm. Throws Error(kBuild) for IR it cannot translate.
std::unique_ptr<llvm::Module> translate_to_llvm(const te::LoweredFunc& f, llvm::LLVMContext& ctx,
                                                llvm::TargetMachine& tm, const BuildOptions& options);

}  // namespace ktune::codegen
