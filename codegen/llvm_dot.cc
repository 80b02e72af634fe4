// Emits dot_u8s8: vpdpbusd where the target has it, portable widening code elsewhere.
#include "codegen/llvm_dot.h"

#include <vector>

#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Target/TargetMachine.h>

namespace ktune::codegen {
namespace {

bool has_vnni512(const llvm::TargetMachine& tm) {
  if (!tm.getTargetTriple().isX86()) return false;
  const llvm::MCSubtargetInfo* sti = tm.getMCSubtargetInfo();
  return sti && sti->checkFeatures("+avx512vnni") && sti->checkFeatures("+avx512f");
}

}  // namespace

llvm::Value* emit_dot_u8s8(llvm::IRBuilder<>& b, const llvm::TargetMachine& tm, llvm::Value* acc,
                           llvm::Value* a, llvm::Value* bytes) {
  const unsigned n = llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements();
  llvm::Type* i32 = b.getInt32Ty();
  if (n == 16 && has_vnni512(tm)) {
    // vpdpbusd reads its operands as 16 dwords: the four bytes of a in every dword (the
    // broadcast), b's 64 bytes as they are.
    auto* v16 = llvm::FixedVectorType::get(i32, 16);
    llvm::Value* a_dword = b.CreateBitCast(a, i32);
    llvm::Value* a_all = b.CreateVectorSplat(16, a_dword);
    llvm::Value* b_dwords = b.CreateBitCast(bytes, v16);
    llvm::Module* m = b.GetInsertBlock()->getModule();
    llvm::Function* f =
        llvm::Intrinsic::getDeclaration(m, llvm::Intrinsic::x86_avx512_vpdpbusd_512);
    return b.CreateCall(f, {acc, a_all, b_dwords});
  }
  auto* wide = llvm::FixedVectorType::get(i32, 4 * n);
  std::vector<int> repeat(4 * n);
  for (unsigned i = 0; i < 4 * n; ++i) repeat[i] = static_cast<int>(i % 4);
  llvm::Value* a32 = b.CreateZExt(a, llvm::FixedVectorType::get(i32, 4));
  llvm::Value* a_all = b.CreateShuffleVector(a32, repeat);
  llvm::Value* prod = b.CreateMul(a_all, b.CreateSExt(bytes, wide));
  llvm::Value* sum = acc;
  for (unsigned q = 0; q < 4; ++q) {
    std::vector<int> lane(n);
    for (unsigned l = 0; l < n; ++l) lane[l] = static_cast<int>(4 * l + q);
    sum = b.CreateAdd(sum, b.CreateShuffleVector(prod, lane));
  }
  return sum;
}

}  // namespace ktune::codegen
