// Defines Requant, the requantize epilogue of the int8 templates (ONNX QuantizeLinear after an
// int32 bias), with its workload arguments and input tensors; InputSums, the correction for
// weights whose zero point does not fit int8 that the epilogue adds before it; and the shift_data
// argument.
#pragma once

#include <string>
#include <vector>

#include "schedule_space/workload.h"
#include "te/tensor.h"

namespace ktune::schedule_space::templates {

// y = clamp(round_half_even((acc + bias[c]) * scale) + zero_point, lo, hi), [lo, hi] the output
// type's range, lo raised to zero_point by relu (zero in the quantized domain). The product is a
// float32 one, rounded with nearbyint, as ONNX Runtime computes it (QLinearMatMul, QLinearConv).
// Value type.
struct Requant {
  te::DataType out = te::Int(32);  // Int(32): no epilogue, the accumulator is the output
  bool per_channel = false;        // scale float32 per output channel instead of [1]
  bool relu = false;
  bool on() const { return out != te::Int(32); }
};

// The arguments out, scale and relu (each left out of the workload key at its default), in that
// order. `channels` says where the per-channel inputs lie, e.g. "[N]".
std::vector<ArgSpec> requant_args(const std::string& channels);

// The requantize epilogue of a workload with requant_args.
Requant requant_of(const WorkloadArgs& a);

// A template's check hook part: throws Error(kInvalidArgument) naming `template_name` when scale
// or relu is set with out=s32.
void check_requant(const std::string& template_name, const WorkloadArgs& a);

// The epilogue's inputs: bias int32 and (per channel) scale float32 of `channel_shape`, a
// per-tensor scale float32 [1], zero_point int32 [1] (the output's); undefined when off.
struct RequantInputs {
  te::Tensor bias, scale, zero_point;
  // Appends the defined ones to `args` in kernel-argument order (bias, scale, zero_point).
  void append_to(std::vector<te::Tensor>& args) const;
};
RequantInputs requant_inputs(const Requant& rq, const std::vector<int64_t>& channel_shape);

// An output element from its int32 accumulator `acc` whose output channel is at `channel` (an
// index of channel_shape): `acc` itself when the epilogue is off, else requantized.
te::Expr requant_value(const Requant& rq, const RequantInputs& in, const te::Expr& acc,
                       const std::vector<te::Expr>& channel);

// Weights w with a zero point z_w such that some w - z_w is past int8 run as w - c for a shift c
// that fits (128 for uint8 weights): sum (x - z_x)(w - z_w) = sum (x - z_x)(w - c) + (c - z_w) *
// sum (x - z_x). The kernel computes the first sum; with input_sums=1 the epilogue adds the second
// as coef[channel] * sum[position]: `sum` int32 the data's sums less their zero point per output
// position (a conv's input windows, a matrix product's rows of A), `coef` int32 c - z_w per output
// channel. Undefined tensors when off.
struct InputSums {
  te::Tensor sum, coef;
  bool on() const { return sum.defined(); }
  // Appends the defined ones to `args` in kernel-argument order (input_sum, sum_coef).
  void append_to(std::vector<te::Tensor>& args) const;
};

// The argument input_sums (0/1, left out of the key at 0); `positions` and `channels` say the
// shapes of the sum and coef inputs, e.g. "[N,OH,OW]", "[K/16,16]".
ArgSpec input_sums_arg(const std::string& positions, const std::string& channels);

// Whether a workload with input_sums_arg has input_sums=1.
bool input_sums_on(const WorkloadArgs& a);

// The inputs when `on`: sum of `position_shape`, coef of `channel_shape`.
InputSums input_sums(bool on, const std::vector<int64_t>& position_shape,
                     const std::vector<int64_t>& channel_shape);

// The accumulator with the correction: acc + coef[channel] * sum[position] (acc when off).
te::Expr with_input_sums(const InputSums& in, const te::Expr& acc,
                         const std::vector<te::Expr>& channel,
                         const std::vector<te::Expr>& position);

// The argument shift_data (0/1, left out of the key at 0): with 1 the products read every uint8
// data value x as x - 128 (te::u8_factor: the int8 with x's sign bit flipped, which AArch64's
// sdot multiplies), so the sdot kernels need no compensation per product. The accumulator is then
// sum (x - 128) * w: what it lacks of sum x * w, 128 * sum w per output channel, depends on the
// weights alone and belongs in the requantize bias, computed once where the weights are packed (a
// model build folds it with the data's zero point). The padding value is shifted as well.
ArgSpec shift_data_arg();

// Whether `target` has an int8 dot instruction that multiplies the data as the products read it:
// uint8 (vpdpbusd, usdot, or sdot with a compensation per product) or, with `shift`, int8 (sdot;
// i8mm targets have it too).
bool int8_dot_multiplies(const TargetTraits& target, bool shift);

}  // namespace ktune::schedule_space::templates
