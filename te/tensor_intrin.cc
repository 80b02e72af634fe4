// Implements the tensor intrinsics te knows.
#include "te/tensor_intrin.h"

#include <string>

#include "support/error.h"

namespace ktune::te {

namespace {

// The update: dot(acc, a's `a_lanes` elements, b's `b_lanes`) into c's 16 lanes. With `shifted`
// (a uint8), dot_s8s8 of a's bytes less 128 as int8: the sign bit flipped, one instruction.
Stmt emit_dot16(CallOp dot, int a_lanes, int b_lanes, const std::vector<Buffer>& buf,
                const std::vector<Expr>& off, bool shifted = false) {
  const Expr one = IntImm::make(1);
  const Expr c_index = Ramp::make(off[2], one, 16);
  Expr a = Load::make(buf[0], Ramp::make(off[0], one, a_lanes));
  if (shifted)
    a = Cast::make(Int(8, a_lanes),
                   Sub::make(a, Broadcast::make(IntImm::make(128, UInt(8)), a_lanes)));
  const Expr value = Call::make(
      shifted ? CallOp::kDotS8S8 : dot,
      {Load::make(buf[2], c_index), a, Load::make(buf[1], Ramp::make(off[1], one, b_lanes))});
  return Store::make(buf[2], value, c_index);
}

TensorIntrin make_dot_16x4_u8s8s32(bool shifted) {
  TensorIntrin in;
  in.name = shifted ? "dot_16x4_u8s8s32_shifted" : "dot_16x4_u8s8s32";
  const Tensor a = placeholder({4}, UInt(8), "a");
  const Tensor b = placeholder({16, 4}, Int(8), "b");
  const IterVar k = reduce_axis({0, 4}, "k");
  in.inputs = {a, b};
  in.output = compute(
      {16}, [&](Var j) { return sum(u8_factor(a(k), shifted) * cast(Int(32), b(j, k)), k); }, "c");
  in.emit = [shifted](const std::vector<Buffer>& buf, const std::vector<Expr>& off) {
    return emit_dot16(CallOp::kDotU8S8, 4, 64, buf, off, shifted);
  };
  return in;
}

TensorIntrin make_dot_lanes_u8s8s32(int k, bool shifted) {
  TensorIntrin in;
  in.name = "dot_lanes_u8s8s32_k" + std::to_string(k) + (shifted ? "_shifted" : "");
  const Tensor a = placeholder({k, 16}, UInt(8), "a");
  const Tensor b = placeholder({k, 16}, Int(8), "b");
  const IterVar q = reduce_axis({0, k}, "q");
  in.inputs = {a, b};
  in.output = compute(
      {16}, [&](Var j) { return sum(u8_factor(a(q, j), shifted) * cast(Int(32), b(q, j)), q); },
      "c");
  in.emit = [k, shifted](const std::vector<Buffer>& buf, const std::vector<Expr>& off) {
    return emit_dot16(CallOp::kDotU8S8, 16 * k, 16 * k, buf, off, shifted);
  };
  return in;
}

TensorIntrin make_dot_16x2_bf16f32() {
  TensorIntrin in;
  in.name = "dot_16x2_bf16f32";
  const Tensor a = placeholder({2}, BFloat16(), "a");
  const Tensor b = placeholder({16, 2}, BFloat16(), "b");
  const IterVar k = reduce_axis({0, 2}, "k");
  in.inputs = {a, b};
  in.output = compute(
      {16}, [&](Var j) { return sum(cast(Float(32), a(k)) * cast(Float(32), b(j, k)), k); }, "c");
  in.emit = [](const std::vector<Buffer>& buf, const std::vector<Expr>& off) {
    return emit_dot16(CallOp::kDotBF16, 2, 32, buf, off);
  };
  return in;
}

}  // namespace

Expr u8_factor(const Expr& x, bool shifted) {
  return shifted ? cast(Int(32), x) - Expr(128) : cast(Int(32), x);
}

const TensorIntrin& dot_16x4_u8s8s32(bool shifted) {
  static const TensorIntrin intrins[2] = {make_dot_16x4_u8s8s32(false),
                                          make_dot_16x4_u8s8s32(true)};
  return intrins[shifted ? 1 : 0];
}

const TensorIntrin& dot_lanes_u8s8s32(int k, bool shifted) {
  static const TensorIntrin intrins[2][4] = {
      {make_dot_lanes_u8s8s32(1, false), make_dot_lanes_u8s8s32(2, false),
       make_dot_lanes_u8s8s32(3, false), make_dot_lanes_u8s8s32(4, false)},
      {make_dot_lanes_u8s8s32(1, true), make_dot_lanes_u8s8s32(2, true),
       make_dot_lanes_u8s8s32(3, true), make_dot_lanes_u8s8s32(4, true)}};
  if (k < 1 || k > 4)
    throw Error(ErrorKind::kInternal, "dot_lanes_u8s8s32: k=" + std::to_string(k) + " not in 1..4");
  return intrins[shifted ? 1 : 0][k - 1];
}

const TensorIntrin& dot_16x2_bf16f32() {
  static const TensorIntrin intrin = make_dot_16x2_bf16f32();
  return intrin;
}

}  // namespace ktune::te
