// Declares te's dot calls (tensor intrinsics' bodies) and bfloat16 conversions as LLVM IR.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace llvm {
class TargetMachine;
}  // namespace llvm

namespace ktune::codegen {

// acc (<n x i32>) + the sums of four byte products per lane, a's bytes unsigned (dot_u8s8) or,
// with `s8`, signed (dot_s8s8), b's signed: a is <4 x i8>, b <4n x i8>; or, the rows form, a and
// b are <kn x i8>, k <= 4 rows of a byte per lane (transposed to four bytes per lane by byte
// shuffles, b's missing rows zero). Unsigned a with 16 lanes on a target with AVX-512 VNNI: one
// vpdpbusd. With 4k lanes on AArch64: k usdot (i8mm, unsigned a), or k sdot (dotprod; unsigned a
// shifted by 128 into s8 and each sdot compensated by another); otherwise the widening multiply
// and a sum of four shuffles, which any backend handles. All wrap in int32.
llvm::Value* emit_dot_bytes(llvm::IRBuilder<>& b, const llvm::TargetMachine& tm, bool s8,
                            llvm::Value* acc, llvm::Value* a, llvm::Value* bytes);

// Codegen holds bfloat16 values as their bits (i16 lanes).
//
// acc (<n x float>) + two bfloat16 products per lane, in dot_bf16's order (te/ir.h): a is
// <2 x i16>, pairs <2n x i16>. With 16 lanes on a target with AVX-512 BF16: one vdpbf16ps;
// otherwise float32 multiplies and adds of the widened values (the products are exact, so a
// fused multiply-add gives the same sums).
llvm::Value* emit_dot_bf16(llvm::IRBuilder<>& b, const llvm::TargetMachine& tm, llvm::Value* acc,
                           llvm::Value* a, llvm::Value* pairs);

// bfloat16 bits (i16, scalar or vector) to float32: shifted into the high half, exact.
llvm::Value* emit_bfloat16_to_float(llvm::IRBuilder<>& b, llvm::Value* v);
// float32 to bfloat16 bits, as te/bfloat16.h's float_to_bfloat16 (nearest, ties to even; NaN
// quiet), in integer instructions: LLVM lowers a bfloat fptrunc to a library call on most targets.
llvm::Value* emit_float_to_bfloat16(llvm::IRBuilder<>& b, llvm::Value* v);

}  // namespace ktune::codegen
