// The int8 path of a quantized model build: the int8 kernels' weights and requantize inputs, and
// the generated uint8 kernels around them (the residual Add, the max pool).
#include <algorithm>
#include <cmath>

#include "deploy/input_sums.h"
#include "deploy/int8_packing.h"
#include "deploy/model_ops.h"
#include "deploy/model_planner.h"
#include "deploy/model_pool.h"

namespace ktune::deploy {
namespace {

// Channels per block of the int8 convolutions' outputs (and of a depthwise conv's data).
constexpr int64_t kInt8Block = 16;

}  // namespace

void Planner::bind_quantized(PlanStep& s, const frontend::Node& anchor,
                             const std::vector<te::Tensor>& args) {
  auto q =
      std::find_if(tasks_.quantized.begin(), tasks_.quantized.end(),
                   [&](const frontend::QuantizedOp& o) { return &g_.nodes[o.node] == &anchor; });
  if (q == tasks_.quantized.end())
    throw Error(ErrorKind::kInternal, "node '" + anchor.name + "': no quantized operator");
  const auto& w = integer_constant(anchor, q->weight);
  // Output channels: a conv's K of [K, C, R, S], a matrix product's N of [N, K] or [K, N].
  const bool channels_first = q->conv || q->nt;
  const int64_t channels = w.shape.at(channels_first ? 0 : 1);
  const int64_t per_channel = product(w.shape) / channels;
  const std::vector<int64_t> no_zero;
  const std::vector<int64_t>& zw =
      q->weight_zero_point.empty() ? no_zero : integer_constant(anchor, q->weight_zero_point).i64;
  if (zw.size() > 1 && static_cast<int64_t>(zw.size()) != channels)
    throw unsupported(anchor, "a weight zero point of another channel count");
  const auto value = [&](const std::string& t) { return scalar_constant(anchor, t); };
  const int64_t zx = q->data_zero_point.empty() ? 0 : std::llround(value(q->data_zero_point));
  const float sx = static_cast<float>(value(q->data_scale));
  const float sy = static_cast<float>(value(q->out_scale));
  const int32_t zy = q->out_zero_point.empty() ? 0 : static_cast<int32_t>(value(q->out_zero_point));
  const std::vector<float>& sw = constant(anchor, q->weight_scale).f32;
  if (sw.size() != 1 && static_cast<int64_t>(sw.size()) != channels)
    throw unsupported(anchor, "a weight scale of another channel count");
  // A float32 bias in the accumulator's scale s_x * s_w[k], rounded half to even as ONNX Runtime's
  // quantizer rounds a bias.
  std::vector<int64_t> float_bias;
  if (q->float_bias) {
    const std::vector<float>& f = constant(anchor, q->bias).f32;
    for (size_t k = 0; k < f.size(); ++k)
      float_bias.push_back(std::llrint(f[k] / (sx * sw[sw.size() == 1 ? 0 : k])));
  }
  const std::vector<int64_t>* b = q->bias.empty() ? nullptr
                                  : q->float_bias ? &float_bias
                                                  : &integer_constant(anchor, q->bias).i64;
  if (b && static_cast<int64_t>(b->size()) != channels)
    throw unsupported(anchor, "a bias of another channel count");
  // The kernel runs on the weights less their zero point (exact when they fit int8, which
  // find_quantized_ops checked from their range) with both zero points folded into the bias; or,
  // with input sums, on the weights less the shift, the data's zero point folded into the bias
  // and (shift - z_w[k]) the coefficient of the input sums. A kernel with shift_data multiplies
  // x - 128, data of zero point zx - 128: that fold adds the 128 * sum w the products leave out
  // (the input sums stay sums of x - zx). A depthwise kernel with weights=s16 takes w - z_w as
  // int16 (its W says so).
  const bool s16 = std::any_of(args.begin(), args.end(), [](const te::Tensor& a) {
    return a.name() == "W" && a.dtype() == te::Int(16);
  });
  const bool shifted = s.task->args().get_int("shift_data") != 0;
  const std::vector<int64_t> shift{q->weight_shift};
  const std::optional<FoldedWeights> folded =
      fold_zero_points(w.i64, channels, channels_first, q->input_sums ? shift : zw,
                       shifted ? zx - 128 : zx, b ? *b : no_zero, s16 ? 16 : 8);
  if (!folded)
    throw unsupported(
        anchor, std::string("a weight minus its zero point is past ") + (s16 ? "int16" : "int8"));
  std::vector<int32_t> sum_coef;
  if (q->input_sums)
    for (int64_t k = 0; k < channels; ++k)
      sum_coef.push_back(static_cast<int32_t>(
          q->weight_shift - (zw.empty() ? 0 : zw[zw.size() == 1 ? 0 : static_cast<size_t>(k)])));
  const std::vector<int32_t>& bias = folded->bias;
  std::vector<float> scale(bias.size());
  for (size_t k = 0; k < scale.size(); ++k) scale[k] = sx * sw[sw.size() == 1 ? 0 : k] / sy;
  // A conv's data and output are channel-blocked (16 output channels per block; a depthwise
  // conv's data in blocks of 16 too); a matrix product's are rows in ONNX's layout.
  const int64_t icb = q->depthwise ? kInt8Block : q->conv ? s.task->args().get_int("ic_block") : 0;
  const int64_t out_block = q->conv ? kInt8Block : 0;
  std::vector<int8_t> packed;
  std::vector<int16_t> packed_s16;
  if (s16)
    packed_s16 = pack_depthwise_s16(folded->w, channels, w.shape.at(2), w.shape.at(3));
  else if (q->depthwise)
    packed = pack_depthwise_u8s8(folded->w, channels, w.shape.at(2), w.shape.at(3));
  else if (q->conv)
    packed = pack_conv_u8s8(folded->w, channels, w.shape.at(1), w.shape.at(2), w.shape.at(3), icb,
                            s.task->args().get_int("C"));
  else
    packed = pack_gemm_b_u8s8(folded->w, per_channel, channels, q->nt);
  // The epilogue's per-channel inputs, zero past the last channel of a padded block.
  const auto padded = [](auto v, const te::Tensor& a) {
    v.resize(static_cast<size_t>(a.num_elements()));
    return v;
  };
  for (const te::Tensor& a : args) {
    const std::string& n = a.name();
    if (n == "I" || n == "A")
      s.args.push_back(form(q->data, icb));
    else if (n == "W" && s16)
      s.args.push_back(weight(q->weight + "@packed_s16" + q->weight_zero_point, a.shape(),
                              packed_s16, te::Int(16)));
    else if (n == "W" || n == "B")
      s.args.push_back(
          weight(q->weight + "@packed" + q->weight_zero_point, a.shape(), packed, te::Int(8)));
    else if (n == "bias")
      s.args.push_back(weight(anchor.name + "@bias", a.shape(), padded(bias, a), te::Int(32)));
    else if (n == "scale")
      s.args.push_back(weight(anchor.name + "@scale", a.shape(), padded(scale, a)));
    else if (n == "zero_point")
      s.args.push_back(
          weight(anchor.name + "@zero_point", a.shape(), std::vector<int32_t>{zy}, te::Int(32)));
    else if (n == "input_sum")
      s.args.push_back(plan_input_sums(anchor, *q, s.task->args(), icb, a.shape()));
    else if (n == "sum_coef")
      s.args.push_back(
          weight(anchor.name + "@sum_coef", a.shape(), padded(sum_coef, a), te::Int(32)));
    else if (&a == &args.back())
      s.args.push_back(define(q->output, out_block));
    else
      throw unsupported(anchor, "kernel argument '" + n + "' has no binding");
  }
}

int64_t Planner::plan_input_sums(const frontend::Node& anchor, const frontend::QuantizedOp& q,
                                 const schedule_space::WorkloadArgs& a, int64_t block,
                                 const std::vector<int64_t>& shape) {
  const int32_t zx = static_cast<int32_t>(std::llround(scalar_constant(anchor, q.data_zero_point)));
  PlanStep st;
  st.layer = anchor.name;
  st.kind = "elementwise";
  PlanTensor sums{anchor.name + "@input_sums", shape, 0};
  sums.dtype = te::Int(32);
  if (q.conv) {
    InputWindowSums p{
        known_shape(q.data), block, a.get_int("R"), a.get_int("S"), a.get_int("stride"),
        a.get_int("pad"),    zx};
    st.symbol = symbol("input_window_sums");
    st.func = input_window_sums(st.symbol, p);
  } else {
    const std::vector<int64_t> x = known_shape(q.data);
    st.symbol = symbol("input_row_sums");
    st.func = input_row_sums(st.symbol, product(x) / x.back(), x.back(), zx);
  }
  const int64_t out = add(std::move(sums));
  st.args = {form(q.data, block), out};
  plan_.steps.push_back(std::move(st));
  return out;
}

int64_t Planner::int8_data_block(const std::string& tensor) const {
  int64_t block = 0;
  for (const frontend::QuantizedOp& q : tasks_.quantized) {
    if (q.data != tensor) continue;
    if (!q.conv) return 0;  // a matrix product reads rows in ONNX's layout
    int64_t b = kInt8Block;
    if (!q.depthwise) {
      auto occ = std::find_if(tasks_.occurrences.begin(), tasks_.occurrences.end(),
                              [&](const frontend::TaskOccurrence& o) { return o.node == q.node; });
      if (occ == tasks_.occurrences.end() || !tasks_.tasks[occ->task].tunable) return 0;
      b = tasks_.tasks[occ->task].tunable->args().get_int("ic_block");
    }
    if (block != 0 && b != block) return 0;
    block = b;
  }
  return block;
}

bool Planner::plan_blocked_quantize(const frontend::Node& n) {
  const std::string& x = n.inputs.at(0);
  const std::string& out = n.outputs.at(0);
  const std::string scale = n.inputs.size() > 1 ? n.inputs[1] : "";
  const std::string zero = n.inputs.size() > 2 ? n.inputs[2] : "";
  const auto s = constants_.find(scale);
  const auto z = constants_.find(zero);
  const auto shape = g_.shape(x);
  if (s == constants_.end() || s->second.f32.size() != 1 ||
      (!zero.empty() && (z == constants_.end() || z->second.i64.size() != 1)) || !shape ||
      shape->size() != 4 || dtype_of(x) != te::Float(32) || !current_.count(x))
    return false;
  // Without a zero point QuantizeLinear quantizes to uint8 (dtype_of reads "" as float32).
  const te::DataType type = zero.empty() ? te::UInt(8) : dtype_of(out);
  const int64_t block = int8_data_block(out);
  if (block == 0 || (type != te::UInt(8) && type != te::Int(8))) return false;
  PlanStep st;
  st.layer = n.name;
  st.kind = "elementwise";
  st.symbol = symbol("quantize_linear_blocked");
  st.func = quantize_linear_blocked(st.symbol, *shape, block, s->second.f32.front(),
                                    zero.empty() ? 0 : z->second.i64.front(), type);
  st.args = {form(x, 0), define(out, block)};
  plan_.steps.push_back(std::move(st));
  return true;
}

const frontend::ConstantValue& Planner::integer_constant(const frontend::Node& n,
                                                         const std::string& tensor) const {
  auto it = constants_.find(tensor);
  if (it == constants_.end() ||
      static_cast<int64_t>(it->second.i64.size()) != product(it->second.shape))
    throw unsupported(n, "input '" + tensor + "' is not an integer constant");
  return it->second;
}

// The value of a one-element constant, float or integer.
double Planner::scalar_constant(const frontend::Node& n, const std::string& tensor) const {
  if (tensor.empty()) return 0;
  auto it = constants_.find(tensor);
  if (it != constants_.end() && it->second.f32.size() == 1) return it->second.f32.front();
  if (it != constants_.end() && it->second.i64.size() == 1)
    return static_cast<double>(it->second.i64.front());
  throw unsupported(n, "input '" + tensor + "' is not a one-element constant");
}

void Planner::plan_quantized_add(const frontend::QuantizedAdd& a) {
  const frontend::Node& n = g_.nodes[a.node];
  const auto value = [&](const std::string& t) {
    return static_cast<float>(scalar_constant(n, t));
  };
  QuantizedAddOp op;
  op.a_scale = value(a.a_scale);
  op.b_scale = value(a.b_scale);
  op.out_scale = value(a.out_scale);
  op.a_zero = static_cast<int32_t>(value(a.a_zero_point));
  op.b_zero = static_cast<int32_t>(value(a.b_zero_point));
  op.out_zero = static_cast<int32_t>(value(a.out_zero_point));
  op.relu = a.relu;
  auto first = current_.find(a.a);
  if (first == current_.end()) throw unsupported(n, "its first operand is a constant");
  const int64_t block = plan_.tensors[first->second].block;
  PlanStep s;
  s.layer = n.name;
  for (size_t k : a.prologue) s.layer = g_.nodes[k].name + "+" + s.layer;
  for (size_t k : a.epilogue) s.layer += "+" + g_.nodes[k].name;
  s.kind = "elementwise";
  s.symbol = symbol("quantized_add");
  s.args = {form(a.a, block), form(a.b, block), define(a.output, block)};
  s.func = quantized_add(s.symbol, plan_.tensors[s.args.back()].elements(), op);
  plan_.steps.push_back(std::move(s));
}

void Planner::plan_quantized_max_pool(const frontend::QuantizedMaxPool& p) {
  const frontend::Node& n = g_.nodes[p.node];
  const int64_t block = uint8_pool_block(p.data);
  const std::vector<int64_t> kernel = n.ints("kernel_shape");
  const std::vector<int64_t> strides = n.ints("strides", {1, 1});
  const std::vector<int64_t> pads = n.ints("pads", {0, 0, 0, 0});
  if (kernel.size() != 2 || kernel[0] != kernel[1] || strides.size() != 2 ||
      strides[0] != strides[1] || pads.size() != 4 ||
      std::any_of(pads.begin(), pads.end(), [&](int64_t v) { return v != pads[0]; }) ||
      n.int_or("ceil_mode", 0) != 0 || n.text_or("auto_pad", "NOTSET") != "NOTSET")
    throw unsupported(n, "a uint8 max pool of another window, stride or padding form");
  for (int64_t d : n.ints("dilations", {1, 1}))
    if (d != 1) throw unsupported(n, "a dilated uint8 max pool");
  BlockedPool pool{true, known_shape(p.data), block, kernel[0], kernel[1], strides[0], pads[0]};
  pool.dtype = te::UInt(8);
  PlanStep s;
  s.layer = g_.nodes[p.dequantize].name + "+" + n.name + "+" + g_.nodes[p.quantize].name;
  s.kind = "pool";
  s.symbol = symbol("max_pool_u8_nchwc");
  s.func = pool_blocked(s.symbol, pool);
  s.args = {form(p.data, block), define(p.output, block)};
  plan_.steps.push_back(std::move(s));
}

int64_t Planner::uint8_pool_block(const std::string& data) const {
  auto cur = current_.find(data);
  const int64_t have = cur == current_.end() ? 0 : plan_.tensors[cur->second].block;
  return have > 0 ? have : kInt8Block;
}

void Planner::plan_quantized_global_pool(const frontend::QuantizedGlobalAveragePool& p) {
  const frontend::Node& n = g_.nodes[p.node];
  const auto value = [&](const std::string& t) {
    return static_cast<float>(scalar_constant(n, t));
  };
  QuantizedGlobalPool pool;
  pool.nchw = known_shape(p.data);
  pool.block = uint8_pool_block(p.data);
  pool.x_scale = value(p.data_scale);
  pool.y_scale = value(p.out_scale);
  pool.x_zero = static_cast<int32_t>(value(p.data_zero_point));
  pool.y_zero = static_cast<int32_t>(value(p.out_zero_point));
  PlanStep s;
  s.layer = n.name;
  for (size_t k : p.prologue) s.layer = g_.nodes[k].name + "+" + s.layer;
  for (size_t k : p.epilogue) s.layer += "+" + g_.nodes[k].name;
  s.kind = "pool";
  s.symbol = symbol("global_average_pool_u8_nchwc");
  s.func = global_average_pool_u8(s.symbol, pool);
  s.args = {form(p.data, pool.block)};
  if (p.epilogue.size() < 2) {
    s.args.push_back(define(p.output, pool.block));
    plan_.steps.push_back(std::move(s));
    return;
  }
  // The pooled [N, C, 1, 1] under the view's input name; the QuantizeLinear's output its view.
  const frontend::Node& v = g_.nodes[p.epilogue.front()];
  PlanTensor pooled{v.inputs.at(0), {pool.nchw[0], pool.nchw[1], 1, 1}, pool.block};
  pooled.dtype = te::UInt(8);
  s.args.push_back(add(pooled));
  current_[pooled.name] = s.args.back();
  plan_.steps.push_back(std::move(s));
  view(pooled.name, p.output, v);
}

}  // namespace ktune::deploy
