// Implements the requantize epilogue of the int8 templates.
#include "schedule_space/templates/requant.h"

#include "support/error.h"

namespace ktune::schedule_space::templates {

std::vector<ArgSpec> requant_args(const std::string& channels) {
  ArgSpec relu{.name = "relu",
               .type = ArgSpec::Type::kInt,
               .default_value = "0",
               .doc = "1: clamp the output at zero_point from below",
               .min_value = 0,
               .max_value = 1,
               .key_omits_default = true};
  return {{.name = "out",
           .type = ArgSpec::Type::kString,
           .default_value = "s32",
           .doc = "output type: s32 (the accumulator), or u8/s8 requantized: inputs bias int32 " +
                  channels +
                  ", scale float32, zero_point int32 [1]; "
                  "out = clamp(round_half_even((acc + bias) * scale) + zero_point)",
           .choices = {"s32", "u8", "s8"},
           .key_omits_default = true},
          {.name = "scale",
           .type = ArgSpec::Type::kString,
           .default_value = "per_tensor",
           .doc = "scale float32 [1] (per_tensor) or " + channels + " (per_channel)",
           .choices = {"per_tensor", "per_channel"},
           .key_omits_default = true},
          relu};
}

Requant requant_of(const WorkloadArgs& a) {
  Requant rq;
  const std::string& out = a.get("out");
  if (out == "u8") rq.out = te::UInt(8);
  if (out == "s8") rq.out = te::Int(8);
  rq.per_channel = a.get("scale") == "per_channel";
  rq.relu = a.get_int("relu") != 0;
  return rq;
}

void check_requant(const std::string& template_name, const WorkloadArgs& a) {
  if (a.get("out") == "s32" && (a.get("scale") != "per_tensor" || a.get_int("relu") != 0))
    throw Error(ErrorKind::kInvalidArgument,
                template_name + ": scale and relu apply only to out=u8 or out=s8");
}

void RequantInputs::append_to(std::vector<te::Tensor>& args) const {
  if (!bias.defined()) return;
  args.insert(args.end(), {bias, scale, zero_point});
}

RequantInputs requant_inputs(const Requant& rq, const std::vector<int64_t>& channel_shape) {
  RequantInputs t;
  if (!rq.on()) return t;
  t.bias = te::placeholder(channel_shape, te::Int(32), "bias");
  t.scale = te::placeholder(rq.per_channel ? channel_shape : std::vector<int64_t>{1}, te::Float(32),
                            "scale");
  t.zero_point = te::placeholder({1}, te::Int(32), "zero_point");
  return t;
}

te::Expr requant_value(const Requant& rq, const RequantInputs& in, const te::Expr& acc,
                       const std::vector<te::Expr>& channel) {
  if (!rq.on()) return acc;
  const te::Expr zero(0);
  const te::Expr scaled = te::cast(te::Float(32), acc + in.bias.read(channel)) *
                          (rq.per_channel ? in.scale.read(channel) : in.scale(zero));
  const te::Expr zp = te::cast(te::Float(32), in.zero_point(zero));
  const bool u8 = rq.out == te::UInt(8);
  te::Expr lo(u8 ? 0.0 : -128.0);
  if (rq.relu) lo = te::max(lo, zp);
  // Clamped in float, so that the conversion to int32 never overflows.
  const te::Expr y =
      te::min(te::max(te::round_even(scaled) + zp, lo), te::Expr(u8 ? 255.0 : 127.0));
  return te::cast(rq.out, te::cast(te::Int(32), y));
}

void InputSums::append_to(std::vector<te::Tensor>& args) const {
  if (on()) args.insert(args.end(), {sum, coef});
}

ArgSpec input_sums_arg(const std::string& positions, const std::string& channels) {
  return {.name = "input_sums",
          .type = ArgSpec::Type::kInt,
          .default_value = "0",
          .doc = "1: inputs input_sum int32 " + positions +
                 " (the data's sums less its zero "
                 "point per output position) and sum_coef int32 " +
                 channels +
                 " (c - z_w per output channel); the accumulator gains sum_coef * input_sum "
                 "(weights shifted by c since w - z_w is past int8)",
          .min_value = 0,
          .max_value = 1,
          .key_omits_default = true};
}

ArgSpec shift_data_arg() {
  return {.name = "shift_data",
          .type = ArgSpec::Type::kInt,
          .default_value = "0",
          .doc =
              "1: the products take data x - 128 (sdot's int8 without a compensation; "
              "128 * sum(w) belongs in the bias)",
          .min_value = 0,
          .max_value = 1,
          .key_omits_default = true};
}

bool input_sums_on(const WorkloadArgs& a) { return a.get_int("input_sums") != 0; }

InputSums input_sums(bool on, const std::vector<int64_t>& position_shape,
                     const std::vector<int64_t>& channel_shape) {
  InputSums t;
  if (!on) return t;
  t.sum = te::placeholder(position_shape, te::Int(32), "input_sum");
  t.coef = te::placeholder(channel_shape, te::Int(32), "sum_coef");
  return t;
}

te::Expr with_input_sums(const InputSums& in, const te::Expr& acc,
                         const std::vector<te::Expr>& channel,
                         const std::vector<te::Expr>& position) {
  if (!in.on()) return acc;
  return acc + in.coef.read(channel) * in.sum.read(position);
}

bool int8_dot_multiplies(const TargetTraits& target, bool shift) {
  if (shift) return target.int8_dot_insn == "sdot" || target.int8_dot_insn == "usdot";
  return target.int8_dot;
}

}  // namespace ktune::schedule_space::templates
