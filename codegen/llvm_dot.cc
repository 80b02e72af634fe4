// Emits dot_u8s8 and dot_bf16 (vpdpbusd, vdpbf16ps where the target has them, portable widening
// code elsewhere) and the bfloat16 conversions.
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

bool has_bf16_512(const llvm::TargetMachine& tm) {
  if (!tm.getTargetTriple().isX86()) return false;
  const llvm::MCSubtargetInfo* sti = tm.getMCSubtargetInfo();
  return sti && sti->checkFeatures("+avx512bf16") && sti->checkFeatures("+avx512f");
}

// Type t with its scalar (or every lane) replaced by `elem`.
llvm::Type* with_element(llvm::Type* t, llvm::Type* elem) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(t))
    return llvm::VectorType::get(elem, vt->getElementCount());
  return elem;
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

llvm::Value* emit_dot_bf16(llvm::IRBuilder<>& b, const llvm::TargetMachine& tm, llvm::Value* acc,
                           llvm::Value* a, llvm::Value* pairs) {
  const unsigned n = llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements();
  if (n == 16 && has_bf16_512(tm)) {
    // a's two bfloat16 in every dword (the broadcast): the instruction's last operand, which it
    // can read from memory with an embedded broadcast.
    llvm::Value* a_dword = b.CreateBitCast(a, b.getInt32Ty());
    llvm::Value* a_all = b.CreateBitCast(b.CreateVectorSplat(16, a_dword),
                                         llvm::FixedVectorType::get(b.getBFloatTy(), 32));
    llvm::Module* m = b.GetInsertBlock()->getModule();
    llvm::Function* f =
        llvm::Intrinsic::getDeclaration(m, llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512);
    return b.CreateCall(
        f, {acc, b.CreateBitCast(pairs, llvm::FixedVectorType::get(b.getBFloatTy(), 32)), a_all});
  }
  llvm::Value* af = emit_bfloat16_to_float(b, a);
  llvm::Value* pf = emit_bfloat16_to_float(b, pairs);
  llvm::Value* sum = acc;
  for (unsigned q : {1u, 0u}) {
    std::vector<int> lane(n);
    for (unsigned l = 0; l < n; ++l) lane[l] = static_cast<int>(2 * l + q);
    llvm::Value* aq = b.CreateVectorSplat(n, b.CreateExtractElement(af, b.getInt64(q)));
    sum = b.CreateFAdd(sum, b.CreateFMul(aq, b.CreateShuffleVector(pf, lane)));
  }
  return sum;
}

llvm::Value* emit_bfloat16_to_float(llvm::IRBuilder<>& b, llvm::Value* v) {
  llvm::Type* t = v->getType();
  llvm::Value* bits = b.CreateZExt(b.CreateBitCast(v, with_element(t, b.getInt16Ty())),
                                   with_element(t, b.getInt32Ty()));
  bits = b.CreateShl(bits, llvm::ConstantInt::get(bits->getType(), 16));
  return b.CreateBitCast(bits, with_element(t, b.getFloatTy()));
}

llvm::Value* emit_float_to_bfloat16(llvm::IRBuilder<>& b, llvm::Value* v) {
  llvm::Type* t = v->getType();
  llvm::Type* i32 = with_element(t, b.getInt32Ty());
  const auto c = [&](uint32_t x) { return llvm::ConstantInt::get(i32, x); };
  llvm::Value* u = b.CreateBitCast(v, i32);
  llvm::Value* high = b.CreateLShr(u, c(16));
  llvm::Value* odd = b.CreateAnd(high, c(1));
  llvm::Value* rounded = b.CreateLShr(b.CreateAdd(b.CreateAdd(u, c(0x7FFF)), odd), c(16));
  llvm::Value* quiet = b.CreateOr(high, c(0x40));
  llvm::Value* bits = b.CreateSelect(b.CreateFCmpUNO(v, v), quiet, rounded);
  return b.CreateTrunc(bits, with_element(t, b.getInt16Ty()));
}

}  // namespace ktune::codegen
