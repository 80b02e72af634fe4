// Defines TensorIntrin: a small compute that one machine instruction performs whole, and the
// intrinsics te knows (dot_16x4_u8s8s32, dot_lanes_u8s8s32, each also with its data shifted by
// 128, and dot_16x2_bf16f32).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "te/ir.h"
#include "te/tensor.h"

namespace ktune::te {

// What a tensorized loop nest must compute, and the statement that computes it instead.
// `output` is a compute over `inputs` (placeholders) whose body is a sum: the loop nest it
// replaces is the update of that sum, with its spatial axes outermost, then its reduction axes,
// and reads of the inputs that step through memory as the inputs' row-major layout does.
struct TensorIntrin {
  std::string name;
  std::vector<Tensor> inputs;
  Tensor output;
  // The update of the whole output, given the buffer of each input and then of the output, and
  // the flat element offset of each one's first element (the same order).
  std::function<Stmt(const std::vector<Buffer>& buffers, const std::vector<Expr>& offsets)> emit;
};

// A uint8 x as an int32 factor of a product: x, or with `shifted` x - 128 (the int8 whose bits
// are x's with the sign bit flipped, which AArch64's sdot multiplies). The intrinsics' products
// read their data through it, and so must the computes they replace.
Expr u8_factor(const Expr& x, bool shifted);

// C[16] (int32) += sum_k A[k] * B[j][k], k < 4: A is uint8[4] (one dword, read by all 16 lanes),
// B int8[16][4] (64 contiguous bytes). Emitted as dot_u8s8: vpdpbusd on AVX-512 VNNI; on AArch64
// four usdot (i8mm) or sdot (dotprod), one per 16 bytes = 4 columns x 4 k, a NEON register each,
// each sdot with a second one for the compensation of the shift by 128.
// `shifted`: C[16] += sum_k (A[k] - 128) * B[j][k], emitted as dot_s8s8 of A with its sign
// bits flipped: four sdot on AArch64 dotprod without a compensation (what the shift leaves out,
// 128 * sum_k B[j][k], the caller adds once, e.g. in a bias packed with the weights); widening
// code elsewhere.
const TensorIntrin& dot_16x4_u8s8s32(bool shifted = false);

// C[16] (int32) += sum_q A[q][j] * B[q][j], q < k (1 <= k <= 4): A is uint8[k][16], B int8[k][16]
// (16k contiguous bytes each): per lane j, k products of its own bytes, as a depthwise
// convolution's k taps of one window row over 16 channels (a channel-blocked image's k
// neighbouring pixels, the weights' k taps). Emitted as dot_u8s8's rows form: on AVX-512 VNNI a
// byte transpose of each operand (vpermb with AVX-512 VBMI) and one vpdpbusd; on AArch64 the
// transposes (tbl) and four usdot (i8mm) or sdot with their compensation (dotprod); elsewhere the
// transposes and widening multiply-adds. `shifted` as for dot_16x4_u8s8s32: A less 128, four sdot
// without compensation on AArch64 dotprod. Throws Error(kInternal) for k outside 1..4.
const TensorIntrin& dot_lanes_u8s8s32(int k, bool shifted = false);

// C[16] (float32) += sum_k A[k] * B[j][k], k < 2: A is bfloat16[2] (one dword, read by all 16
// lanes), B bfloat16[16][2] (64 contiguous bytes). Emitted as dot_bf16 (vdpbf16ps on AVX-512
// BF16), whose order of the two additions the update's sum leaves open.
const TensorIntrin& dot_16x2_bf16f32();

}  // namespace ktune::te
