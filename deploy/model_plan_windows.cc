// The Planner's windows that the templates do not take as ONNX writes them: pools of any window
// (per-axis strides, padding at each end, ceil_mode, averages without the padding) as generated
// blocked pools, and convs of 2 to C-1 groups or dilated differently per axis as generated blocked
// convs.
#include <algorithm>
#include <string>

#include "deploy/generated_schedule.h"
#include "deploy/model_conv.h"
#include "deploy/model_planner.h"
#include "deploy/model_pool.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

// ONNX's padding of a window of `kernel` taps at `stride` over `in`: the pads attribute, or
// auto_pad's SAME split (the odd one at the end for SAME_UPPER, at the start for SAME_LOWER).
std::vector<int64_t> window_pads(const frontend::Node& n, const std::vector<int64_t>& in,
                                 const std::vector<int64_t>& kernel,
                                 const std::vector<int64_t>& strides) {
  const std::string auto_pad = n.text_or("auto_pad", "NOTSET");
  if (auto_pad == "VALID") return {0, 0, 0, 0};
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") return n.ints("pads", {0, 0, 0, 0});
  std::vector<int64_t> pads(4);
  for (size_t a = 0; a < 2; ++a) {
    const int64_t extent = in[2 + a], s = strides[a];
    const int64_t total = std::max<int64_t>(((extent + s - 1) / s - 1) * s + kernel[a] - extent, 0);
    pads[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pads[a + 2] = total - pads[a];
  }
  return pads;
}

}  // namespace

void Planner::plan_pool(const frontend::Node& n) {
  const std::string& x = n.inputs.at(0);
  const std::vector<int64_t> in = known_shape(x), out = known_shape(n.outputs.at(0));
  const std::vector<int64_t> kernel = n.ints("kernel_shape");
  const std::vector<int64_t> strides = n.ints("strides", {1, 1});
  if (in.size() != 4 || kernel.size() != 2 || strides.size() != 2)
    throw unsupported(n, "a pool that is not 2-D");
  if (n.ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1})
    throw unsupported(n, "dilated pooling");
  const std::vector<int64_t> pads = window_pads(n, in, kernel, strides);
  BlockedPool pool;
  pool.max = n.op == "MaxPool";
  pool.nchw = in;
  pool.block = written_block(x);
  // The output extent is the one shape inference gave (ceil_mode included).
  pool.window = PoolWindow{kernel[0],
                           kernel[1],
                           strides[0],
                           strides[1],
                           pads[0],
                           pads[1],
                           pads[2],
                           pads[3],
                           out[2],
                           out[3],
                           n.int_or("count_include_pad", 0) != 0};
  PlanStep s;
  s.layer = n.name;
  s.kind = "pool";
  s.symbol = symbol(pool.max ? "max_pool_nchwc" : "avg_pool_nchwc");
  s.func = pool_blocked(s.symbol, pool);
  s.args = {form(x, pool.block), define(n.outputs.at(0), pool.block)};
  plan_.steps.push_back(std::move(s));
}

void Planner::plan_conv_blocked(const frontend::GeneratedConv& gc) {
  const frontend::Node& conv = g_.nodes[gc.node];
  const std::string& x = conv.inputs.at(0);
  const frontend::ConstantValue& w = constant(conv, conv.inputs.at(1));
  const std::vector<int64_t> in = known_shape(x), out = known_shape(conv.outputs.at(0));
  const std::vector<int64_t> strides = conv.ints("strides", {1, 1});
  const std::vector<int64_t> dilations = conv.ints("dilations", {1, 1});
  if (in.size() != 4 || w.shape.size() != 4 || strides.size() != 2 || dilations.size() != 2 ||
      gc.pads.size() != 4)
    throw unsupported(conv, "a conv that is not 2-D");
  // The output in the input's block.
  const int64_t block = written_block(x);
  BlockedConv c;
  c.nchw = in;
  c.k = w.shape[0];
  c.r = w.shape[2];
  c.s = w.shape[3];
  c.group = conv.int_or("group", 1);
  c.stride_h = strides[0];
  c.stride_w = strides[1];
  c.dilation_h = dilations[0];
  c.dilation_w = dilations[1];
  c.pad_top = gc.pads[0];
  c.pad_left = gc.pads[1];
  c.oh = out.at(2);
  c.ow = out.at(3);
  c.in_block = c.out_block = block;
  // The BatchNormalization's scale folds into the weights; its shift, the conv's bias and bias
  // Adds make the bias; the activation is the fuser's.
  const std::string bias_name = conv.inputs.size() > 2 ? conv.inputs[2] : "";
  const Affine affine = fused_affine(conv, gc.epilogue.nodes, c.k, bias_name);
  c.epilogue = schedule_space::templates::epilogue_of(gc.epilogue.steps, gc.epilogue.args);
  c.epilogue.bias = affine.shifted;
  c.epilogue.residual = !affine.residual.empty();

  PlanStep s;
  s.layer = conv.name;
  for (size_t f : gc.epilogue.nodes) s.layer += "+" + g_.nodes[f].name;
  s.kind = "conv";
  s.symbol = symbol("conv_nchwc");
  s.flop = 2.0 * static_cast<double>(in[0] * c.k * c.oh * c.ow * (in[1] / c.group) * c.r * c.s);
  s.func = conv_blocked(s.symbol, c);
  s.args = {form(x, block), weight(conv.inputs[1] + "@blocked", s.func.args[1].shape,
                                   pack_conv_blocked_weights(c, w.f32, affine.scale))};
  if (c.epilogue.bias) {
    std::vector<float> bias(static_cast<size_t>(s.func.args[2].num_elements()), 0.0f);
    std::copy(affine.shift.begin(), affine.shift.end(), bias.begin());
    s.args.push_back(weight(conv.name + "@bias", s.func.args[2].shape, bias));
  }
  if (c.epilogue.residual) s.args.push_back(form(affine.residual, block));
  const std::string& out_name = gc.epilogue.nodes.empty()
                                    ? conv.outputs[0]
                                    : g_.nodes[gc.epilogue.nodes.back()].outputs.at(0);
  s.args.push_back(define(out_name, block));
  plan_.steps.push_back(std::move(s));
}

}  // namespace ktune::deploy
