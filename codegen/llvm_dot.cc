// Emits dot_u8s8 (vpdpbusd on AVX-512 VNNI, usdot (i8mm) or sdot (dotprod) on AArch64),
// dot_s8s8 (sdot on AArch64 dotprod), dot_bf16 (vdpbf16ps on AVX-512 BF16), portable widening code
// elsewhere, and the bfloat16 conversions.
#include "codegen/llvm_dot.h"

#include <vector>

#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/IntrinsicsAArch64.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Target/TargetMachine.h>

namespace ktune::codegen {
namespace {

bool has_features(const llvm::TargetMachine& tm, bool arch, const char* features) {
  const llvm::MCSubtargetInfo* sti = tm.getMCSubtargetInfo();
  return arch && sti && sti->checkFeatures(features);
}

// Type t with its scalar (or every lane) replaced by `elem`.
llvm::Type* with_element(llvm::Type* t, llvm::Type* elem) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(t))
    return llvm::VectorType::get(elem, vt->getElementCount());
  return elem;
}

// The four bytes each of n lanes reads from v, a dot_u8s8 operand in its rows form (k rows of n
// bytes), lane by lane: byte 4j + q is row q's column j; for q >= k zero (`zero`), else any byte
// of v (where the other operand is zero). A byte transpose (one vpermb with AVX-512 VBMI).
llvm::Value* lane_bytes(llvm::IRBuilder<>& b, llvm::Value* v, unsigned n, bool zero) {
  const unsigned size = llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements();
  const unsigned k = size / n;
  std::vector<int> order(4 * n);
  for (unsigned j = 0; j < n; ++j)
    for (unsigned q = 0; q < 4; ++q)
      order[4 * j + q] = static_cast<int>(q < k ? q * n + j : zero ? size : j);
  return b.CreateShuffleVector(v, llvm::Constant::getNullValue(v->getType()), order);
}

// Whether a dot_u8s8 is in the broadcast form (a's four bytes read by every lane), not the rows
// form (a and b both rows of a byte per lane, so of one type).
bool is_broadcast(llvm::Value* a, llvm::Value* bytes) { return a->getType() != bytes->getType(); }

// A rows-form operand v (k rows of 16 bytes) as 64 bytes, the bytes past 16k zero. A load of v
// becomes a masked load of 64 bytes (one zero-masked vmovdqu8, which cannot fault past v): a
// 16k-byte vector that is not a power of two would otherwise be loaded in pieces and the
// transpose lowered byte by byte.
llvm::Value* widen_rows(llvm::IRBuilder<>& b, llvm::Value* v) {
  const unsigned size = llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements();
  if (size == 64) return v;
  auto* v64 = llvm::FixedVectorType::get(b.getInt8Ty(), 64);
  llvm::Value* zero = llvm::Constant::getNullValue(v64);
  if (auto* load = llvm::dyn_cast<llvm::LoadInst>(v); load && load->isSimple()) {
    std::vector<llvm::Constant*> mask(64);
    for (unsigned i = 0; i < 64; ++i) mask[i] = b.getInt1(i < size);
    return b.CreateMaskedLoad(v64, load->getPointerOperand(), load->getAlign(),
                              llvm::ConstantVector::get(mask), zero);
  }
  std::vector<int> concat(64);
  for (unsigned i = 0; i < 64; ++i) concat[i] = static_cast<int>(i < size ? i : size);
  return b.CreateShuffleVector(v, llvm::Constant::getNullValue(v->getType()), concat);
}

// The rows-form operand v transposed to four bytes per lane (lane_bytes, the rows past k zero)
// as one single-source 64-byte shuffle of widen_rows(v): one vpermb with AVX-512 VBMI.
llvm::Value* lane_bytes_x86(llvm::IRBuilder<>& b, llvm::Value* v) {
  const unsigned k = llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements() / 16;
  std::vector<int> order(64);
  for (unsigned j = 0; j < 16; ++j)
    for (unsigned q = 0; q < 4; ++q)
      order[4 * j + q] = static_cast<int>(q < k ? q * 16 + j : 16 * k);
  return b.CreateShuffleVector(widen_rows(b, v), order);
}

// vpdpbusd reads its operands as 16 dwords: the four bytes of a in every dword (the broadcast),
// b's 64 bytes as they are; in the rows form each lane's bytes of both, transposed.
llvm::Value* emit_vpdpbusd(llvm::IRBuilder<>& b, llvm::Value* acc, llvm::Value* a,
                           llvm::Value* bytes) {
  llvm::Type* i32 = b.getInt32Ty();
  auto* v16 = llvm::FixedVectorType::get(i32, 16);
  llvm::Value* a_all;
  if (is_broadcast(a, bytes)) {
    a_all = b.CreateVectorSplat(16, b.CreateBitCast(a, i32));
  } else {
    a_all = b.CreateBitCast(lane_bytes_x86(b, a), v16);
    bytes = lane_bytes_x86(b, bytes);
  }
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::Function* f = llvm::Intrinsic::getDeclaration(m, llvm::Intrinsic::x86_avx512_vpdpbusd_512);
  return b.CreateCall(f, {acc, a_all, b.CreateBitCast(bytes, v16)});
}

// How a NEON dot instruction multiplies a dot call's bytes.
enum class NeonDot {
  kUsdot,            // i8mm: u8 x s8, as dot_u8s8
  kSdot,             // dotprod: s8 x s8, as dot_s8s8
  kSdotCompensated,  // dotprod for dot_u8s8: a - 128 as s8, the product compensated (below)
};

// One NEON dot instruction per 4 lanes: lane l of group g sums four products of its four bytes
// of a (the broadcast form: a's four bytes, in every lane; the rows form: lane_bytes of a) with
// b's bytes 16g + 4l .. 16g + 4l + 3, which is exactly the group's 16 bytes (so b in the
// broadcast form needs no shuffle). kSdotCompensated reads a xor 0x80 = a - 128 as s8, and the lost
// 128 * sum_q b[4l + q] comes back as the subtraction of sdot(0, b, -128), which depends on b
// alone (LLVM shares it between the rows of an unrolled register tile that read the same B block)
// but still runs with every step of the reduction: the templates avoid it by the shift in their
// compute (shift_data), whose compensation the caller folds into the bias once. All wrap in
// int32 as the dot calls do.
llvm::Value* emit_neon_dot(llvm::IRBuilder<>& b, NeonDot kind, llvm::Value* acc, llvm::Value* a,
                           llvm::Value* bytes) {
  const unsigned n = llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements();
  auto* v4i32 = llvm::FixedVectorType::get(b.getInt32Ty(), 4);
  auto* v16i8 = llvm::FixedVectorType::get(b.getInt8Ty(), 16);
  llvm::Module* m = b.GetInsertBlock()->getModule();
  const bool usdot = kind == NeonDot::kUsdot;
  llvm::Function* dot = llvm::Intrinsic::getDeclaration(
      m, usdot ? llvm::Intrinsic::aarch64_neon_usdot : llvm::Intrinsic::aarch64_neon_sdot,
      {v4i32, v16i8});
  const bool broadcast = is_broadcast(a, bytes);
  if (!broadcast) {
    a = lane_bytes(b, a, n, false);
    bytes = lane_bytes(b, bytes, n, true);
  }
  const unsigned a_bytes = llvm::cast<llvm::FixedVectorType>(a->getType())->getNumElements();
  if (kind == NeonDot::kSdotCompensated)
    a = b.CreateXor(a, b.CreateVectorSplat(a_bytes, b.getInt8(0x80)));
  llvm::Value* a_all =
      broadcast ? b.CreateBitCast(b.CreateVectorSplat(4, b.CreateBitCast(a, b.getInt32Ty())), v16i8)
                : nullptr;
  llvm::Value* minus128 = b.CreateVectorSplat(16, b.getInt8(0x80));
  std::vector<llvm::Value*> groups;
  for (unsigned g = 0; g < n / 4; ++g) {
    std::vector<int> lanes(4), bytes_of(16);
    for (unsigned l = 0; l < 4; ++l) lanes[l] = static_cast<int>(4 * g + l);
    for (unsigned q = 0; q < 16; ++q) bytes_of[q] = static_cast<int>(16 * g + q);
    llvm::Value* acc_g = b.CreateShuffleVector(acc, lanes);
    llvm::Value* b_g = b.CreateShuffleVector(bytes, bytes_of);
    llvm::Value* a_g = broadcast ? a_all : b.CreateShuffleVector(a, bytes_of);
    llvm::Value* sum =
        usdot ? b.CreateCall(dot, {acc_g, a_g, b_g}) : b.CreateCall(dot, {acc_g, b_g, a_g});
    if (kind == NeonDot::kSdotCompensated) {
      llvm::Value* zero = llvm::Constant::getNullValue(v4i32);
      sum = b.CreateSub(sum, b.CreateCall(dot, {zero, b_g, minus128}));
    }
    groups.push_back(sum);
  }
  return llvm::concatenateVectors(b, groups);
}

// acc + the widened products summed in fours (a widened as signed with `s8`): a sum of four
// shuffles, which any backend handles.
llvm::Value* emit_widening(llvm::IRBuilder<>& b, bool s8, llvm::Value* acc, llvm::Value* a,
                           llvm::Value* bytes) {
  const unsigned n = llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements();
  llvm::Type* i32 = b.getInt32Ty();
  auto* wide = llvm::FixedVectorType::get(i32, 4 * n);
  const auto widen = [&](llvm::Value* v, llvm::Type* t) {
    return s8 ? b.CreateSExt(v, t) : b.CreateZExt(v, t);
  };
  std::vector<int> repeat(4 * n);
  for (unsigned i = 0; i < 4 * n; ++i) repeat[i] = static_cast<int>(i % 4);
  llvm::Value* a_all;
  if (is_broadcast(a, bytes)) {
    a_all = b.CreateShuffleVector(widen(a, llvm::FixedVectorType::get(i32, 4)), repeat);
  } else {
    a_all = widen(lane_bytes(b, a, n, false), wide);
    bytes = lane_bytes(b, bytes, n, true);
  }
  llvm::Value* prod = b.CreateMul(a_all, b.CreateSExt(bytes, wide));
  llvm::Value* sum = acc;
  for (unsigned q = 0; q < 4; ++q) {
    std::vector<int> lane(n);
    for (unsigned l = 0; l < n; ++l) lane[l] = static_cast<int>(4 * l + q);
    sum = b.CreateAdd(sum, b.CreateShuffleVector(prod, lane));
  }
  return sum;
}

}  // namespace

llvm::Value* emit_dot_bytes(llvm::IRBuilder<>& b, const llvm::TargetMachine& tm, bool s8,
                            llvm::Value* acc, llvm::Value* a, llvm::Value* bytes) {
  const unsigned n = llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements();
  const llvm::Triple& triple = tm.getTargetTriple();
  if (!s8 && n == 16 && has_features(tm, triple.isX86(), "+avx512vnni,+avx512f"))
    return emit_vpdpbusd(b, acc, a, bytes);
  const bool neon = n % 4 == 0;
  if (!s8 && neon && has_features(tm, triple.isAArch64(), "+neon,+i8mm"))
    return emit_neon_dot(b, NeonDot::kUsdot, acc, a, bytes);
  if (neon && has_features(tm, triple.isAArch64(), "+neon,+dotprod"))
    return emit_neon_dot(b, s8 ? NeonDot::kSdot : NeonDot::kSdotCompensated, acc, a, bytes);
  return emit_widening(b, s8, acc, a, bytes);
}

llvm::Value* emit_dot_bf16(llvm::IRBuilder<>& b, const llvm::TargetMachine& tm, llvm::Value* acc,
                           llvm::Value* a, llvm::Value* pairs) {
  const unsigned n = llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements();
  if (n == 16 && has_features(tm, tm.getTargetTriple().isX86(), "+avx512bf16,+avx512f")) {
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
