// The int8 tasks: a QuantizedOp (qdq_fusion.h) becomes conv2d_nchwc_u8s8s32,
// depthwise_conv2d_nchwc_u8s8s32 or matmul_u8s8s32 with its requantize epilogue.
#include <cmath>

#include "frontend/task_extractor.h"

namespace ktune::frontend {

// A Conv, Gemm or MatMul with dequantized inputs that runs in float32 says why.
void TaskExtractor::note_not_int8(size_t i, Candidate& c) const {
  if (auto q = quantized_.not_fused.find(i); q != quantized_.not_fused.end())
    c.note += (c.note.empty() ? "" : "; ") + std::string("float32, not int8: ") + q->second;
}

// The int8 kernel of a QuantizedOp: the operator's shape and the requantize epilogue
// (per-channel scale, Relu as a clamp at the zero point). A conv takes the data's zero point
// (the padding value) as an argument; a matrix product's is folded into its bias.
Mapped TaskExtractor::map_quantized(size_t i) {
  const QuantizedOp& q = quantized_.ops[quantized_at_.at(i)];
  Mapped mapped = q.conv ? map_conv(i, &q) : map_quantized_matmul(q);
  auto* c = std::get_if<Candidate>(&mapped);
  if (!c) return mapped;
  c->substitute.clear();
  c->alternatives.clear();
  c->dtype.clear();
  const bool s8 = g_.type(q.output) == "int8";
  c->note = s8 ? "int8: requantized to int8" : "int8: requantized to uint8";
  if (q.float_bias) c->note += "; float32 bias rounded to the accumulator's scale";
  if (q.conv) {
    c->template_name = q.depthwise ? "depthwise_conv2d_nchwc_u8s8s32" : "conv2d_nchwc_u8s8s32";
    // conv2d_nchwc_u8s8s32 has no dilation (find_quantized_ops requires 1), and takes input
    // channels in groups of 4: the padded ones read zero weights.
    if (!q.depthwise) {
      c->args.erase("dilation");
      const int64_t C = std::stoll(c->args.at("C"));
      c->args["C"] = i2s(int8_conv_channels(C));
      if (C % 4 != 0)
        c->note += "; input channels padded from " + i2s(C) + " to " + i2s(int8_conv_channels(C));
    }
    const int64_t zero_point =
        q.data_zero_point.empty() ? 0 : std::llround(g_.values.at(q.data_zero_point).front());
    c->args["data_zero_point"] = i2s(zero_point);
  }
  if (q.input_sums) {
    c->args["input_sums"] = "1";
    c->note += "; weights shifted by " + i2s(q.weight_shift) + " into int8, the " +
               (q.conv ? "input window sums" : "row sums of A") + " correcting";
  }
  if (q.s16_weights) {
    c->args["weights"] = "s16";
    c->note += "; weights less their zero point past int8, taken as int16";
  }

  // On AArch64 with sdot but not usdot the products take the data less 128 (sdot's int8), the
  // compensation folded into the bias where the weights are packed (bind_quantized); int16
  // weights run no dot.
  if (target_.int8_dot_insn == "sdot" && !q.s16_weights) c->args["shift_data"] = "1";
  c->args["out"] = s8 ? "s8" : "u8";
  c->args["scale"] = "per_channel";
  c->args["relu"] = q.relu ? "1" : "0";
  c->epilogue = FusedEpilogue{"", {}, q.epilogue};
  c->prologue = q.prologue;
  return mapped;
}

}  // namespace ktune::frontend
