// Declares emit_dot_u8s8: te's dot_u8s8 call (a tensor intrinsic's body) as LLVM IR.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace llvm {
class TargetMachine;
}  // namespace llvm

namespace ktune::codegen {

// acc (<n x i32>) + the sums of four u8 x s8 products per lane: a is <4 x i8> (unsigned), b is
// <4n x i8> (signed). With 16 lanes on a target with AVX-512 VNNI: one vpdpbusd; with 4k lanes on
// AArch64: k usdot (i8mm), or k sdot with a compensation each (dotprod); otherwise the widening
// multiply and a sum of four shuffles, which any backend handles. All wrap in int32.
llvm::Value* emit_dot_u8s8(llvm::IRBuilder<>& b, const llvm::TargetMachine& tm, llvm::Value* acc,
                           llvm::Value* a, llvm::Value* bytes);

}  // namespace ktune::codegen
