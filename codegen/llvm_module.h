// Declares codegen's internal LLVM steps: te's loop IR -> an LLVM module, the target machine, and
// object emission.
#pragma once

#include <memory>

#include "codegen/codegen_llvm.h"
#include "te/ir.h"

#include <string>

#include <llvm/Support/CodeGen.h>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace ktune::codegen {

// Returns an unoptimized, verified module holding the kernel `f.name` and its helpers, with
// the data layout and triple of tm. Throws Error(kBuild) for IR it cannot translate.
std::unique_ptr<llvm::Module> translate_to_llvm(const te::LoweredFunc& f, llvm::LLVMContext& ctx,
                                                llvm::TargetMachine& tm,
                                                const BuildOptions& options);

// The target machine of `target` (PIC, FMA contraction as options say). Throws
// Error(kUnsupported) when LLVM has no backend for it.
std::unique_ptr<llvm::TargetMachine> make_target_machine(const Target& target,
                                                         const BuildOptions& options);

// The object (or assembly) file of a module for tm. Throws Error(kBuild) when LLVM cannot emit it.
std::string emit_file(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType type);

}  // namespace ktune::codegen
