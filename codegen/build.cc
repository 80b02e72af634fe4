// build(): target machine set-up, LLVM's O3 pipeline (PassBuilder), object/assembly emission and
// the kernel cache's keys.
#include <memory>
#include <optional>
#include <string>

#include <llvm/ADT/StringExtras.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/SHA256.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel_cache.h"
#include "codegen/llvm_init.h"
#include "codegen/llvm_module.h"
#include "support/error.h"

namespace ktune::codegen {

std::unique_ptr<llvm::TargetMachine> make_target_machine(const Target& target,
                                                         const BuildOptions& options) {
  initialize_llvm();
  std::string err;
  const llvm::Target* backend = llvm::TargetRegistry::lookupTarget(target.triple(), err);
  if (!backend)
    throw Error(ErrorKind::kUnsupported, "no LLVM backend for '" + target.triple() + "': " + err);
  llvm::TargetOptions to;
  // FMA contraction follows the `contract` flags codegen puts on float instructions.
  to.AllowFPOpFusion = llvm::FPOpFusion::Standard;
  const auto level = options.opt_level >= 3   ? llvm::CodeGenOptLevel::Aggressive
                     : options.opt_level == 2 ? llvm::CodeGenOptLevel::Default
                     : options.opt_level == 1 ? llvm::CodeGenOptLevel::Less
                                              : llvm::CodeGenOptLevel::None;
  // PIC: JIT memory may lie anywhere in the address space, and static links accept PIC too.
  std::unique_ptr<llvm::TargetMachine> tm(
      backend->createTargetMachine(target.triple(), target.cpu(), target.feature_string(), to,
                                   llvm::Reloc::PIC_, std::nullopt, level));
  if (!tm)
    throw Error(ErrorKind::kUnsupported,
                "LLVM cannot create a target machine for '" + target.str() + "'");
  return tm;
}

namespace {

void optimize(llvm::Module& m, llvm::TargetMachine& tm, const BuildOptions& options) {
  if (options.opt_level <= 0) return;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopUnrolling = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  const llvm::OptimizationLevel level = options.opt_level >= 3   ? llvm::OptimizationLevel::O3
                                        : options.opt_level == 2 ? llvm::OptimizationLevel::O2
                                                                 : llvm::OptimizationLevel::O1;
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(level);
  mpm.run(m, mam);
}

}  // namespace

std::string emit_file(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType type) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type)) {
    throw Error(ErrorKind::kBuild,
                "LLVM cannot emit this file type for '" + tm.getTargetTriple().str() + "'");
  }
  pm.run(m);
  return std::string(buffer.begin(), buffer.end());
}

namespace {

struct Compiled {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unique_ptr<llvm::Module> module;
};

void compile(Compiled& c, const te::LoweredFunc& f, const Target& target,
             const BuildOptions& options, bool opt) {
  c.tm = make_target_machine(target, options);
  c.module = translate_to_llvm(f, c.ctx, *c.tm, options);
  if (opt) optimize(*c.module, *c.tm, options);
}

// The kernel cache's key of module (not yet optimized) for target: a digest of everything that
// decides the object's bytes. KTUNE_PIPELINE_DIGEST is this file's own digest (CMakeLists.txt),
// so an edited pipeline or target machine set-up misses every entry made before.
std::string cache_key(llvm::Module& module, const Target& target, const BuildOptions& options) {
  std::string text = std::string(KTUNE_PIPELINE_DIGEST) + "\n" + llvm_version() + "\n" +
                     target.str() + "\n" + target.cpu() + "\n" + target.feature_string() + "\n" +
                     std::to_string(options.opt_level) + " " + std::to_string(options.allow_fma) +
                     " " + std::to_string(options.max_stack_bytes) + "\n";
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  os.flush();
  const auto digest = llvm::SHA256::hash(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

// The artifact of f, its object from the kernel cache or else optimized and emitted from module.
Artifact make_artifact(const te::LoweredFunc& f, const Target& target, llvm::Module& module,
                       llvm::TargetMachine& tm, const BuildOptions& options) {
  const auto compile = [&] {
    optimize(module, tm, options);
    return emit_file(module, tm, llvm::CodeGenFileType::ObjectFile);
  };
  // The key (the module printed and hashed) only where a cache reads it: ktune-runner's
  // measurement builds run without one.
  const KernelCache& cache = KernelCache::of_process();
  const std::string obj = cache.enabled()
                              ? cache.object(cache_key(module, target, options), f.name, compile)
                              : compile();
  Artifact a;
  a.object.assign(obj.begin(), obj.end());
  a.entry = f.name;
  a.target = target.str();
  a.llvm_version = llvm_version();
  for (const te::BufferArg& arg : f.args)
    a.signature.push_back({arg.shape, arg.dtype.str(), arg.is_output});
  return a;
}

}  // namespace

Artifact build(const te::LoweredFunc& f, const Target& target, const BuildOptions& options) {
  Compiled c;
  compile(c, f, target, options, false);
  return make_artifact(f, target, *c.module, *c.tm, options);
}

std::vector<Artifact> build_all(const std::vector<te::LoweredFunc>& fs, const Target& target,
                                const BuildOptions& options) {
  llvm::LLVMContext ctx;
  const std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(target, options);
  std::vector<Artifact> artifacts;
  for (const te::LoweredFunc& f : fs) {
    try {
      // One module per function: each object holds one kernel, as build() makes it.
      std::unique_ptr<llvm::Module> module = translate_to_llvm(f, ctx, *tm, options);
      artifacts.push_back(make_artifact(f, target, *module, *tm, options));
    } catch (const Error& e) {
      throw Error(e.kind(), f.name + ": " + e.what());
    }
  }
  return artifacts;
}

std::string emit_llvm_ir(const te::LoweredFunc& f, const Target& target,
                         const BuildOptions& options, bool optimized) {
  Compiled c;
  compile(c, f, target, options, optimized);
  std::string text;
  llvm::raw_string_ostream os(text);
  c.module->print(os, nullptr);
  return os.str();
}

std::string emit_assembly(const te::LoweredFunc& f, const Target& target,
                          const BuildOptions& options) {
  Compiled c;
  compile(c, f, target, options, true);
  return emit_file(*c.module, *c.tm, llvm::CodeGenFileType::AssemblyFile);
}

}  // namespace ktune::codegen
