// find_quantized_ops(): describes each quantized Conv, Gemm or MatMul (from its DequantizeLinear
// and QuantizeLinear neighbours, or from a QLinearConv's or QLinearMatMul's inputs) and checks
// the types, scales and zero points the int8 kernel computes with.
#include "frontend/qdq_fusion.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <tuple>
#include <variant>

#include "support/error.h"

namespace ktune::frontend {
namespace {

bool is_anchor(const Node& n) {
  return n.domain.empty() && (n.op == "Conv" || n.op == "Gemm" || n.op == "MatMul");
}

bool is_qoperator(const Node& n) {
  return n.domain.empty() && (n.op == "QLinearConv" || n.op == "QLinearMatMul");
}

class QdqMatcher {
 public:
  explicit QdqMatcher(const Graph& g) : g_(g), outputs_(g.outputs.begin(), g.outputs.end()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const std::string& in : g.nodes[i].inputs)
        if (!in.empty()) consumers_[in].push_back(i);
      for (const std::string& out : g.nodes[i].outputs) producer_[out] = i;
    }
  }

  QuantizedOps run() const {
    QuantizedOps found;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      const bool qdq = is_anchor(n) && dequantize(n.inputs.at(0));
      if (!qdq && !is_qoperator(n)) continue;
      QuantizedOp q;
      std::string why = qdq ? describe_qdq(i, q) : describe_qoperator(i, q);
      if (why.empty()) why = check(q);
      if (why.empty())
        found.ops.push_back(std::move(q));
      else
        (qdq ? found.not_fused : found.refused)[i] = why;
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (n.domain == "com.microsoft" && n.op == "QLinearAdd") {
        QuantizedAdd add;
        if (const std::string why = describe_qlinear_add(i, add); why.empty())
          found.adds.push_back(std::move(add));
        else
          found.refused[i] = why;
      } else if (n.domain == "com.microsoft" && n.op == "QLinearGlobalAveragePool") {
        QuantizedGlobalAveragePool pool;
        if (const std::string why = describe_qlinear_global_pool(i, pool); why.empty())
          found.global_pools.push_back(std::move(pool));
        else
          found.refused[i] = why;
      }
      if (!n.domain.empty()) continue;
      if (n.op == "Add") {
        if (auto add = describe_add(i)) found.adds.push_back(std::move(*add));
      } else if (n.op == "MaxPool") {
        if (auto pool = describe_max_pool(i)) found.max_pools.push_back(*pool);
      } else if (n.op == "GlobalAveragePool") {
        if (auto pool = describe_global_pool(i)) found.global_pools.push_back(std::move(*pool));
      }
    }
    return found;
  }

 private:
  // The DequantizeLinear node that computes `tensor`, if one does.
  std::optional<size_t> dequantize(const std::string& tensor) const {
    auto p = producer_.find(tensor);
    if (p == producer_.end()) return std::nullopt;
    const Node& n = g_.nodes[p->second];
    if (n.op != "DequantizeLinear" || !n.domain.empty()) return std::nullopt;
    return p->second;
  }

  // The only reader of `tensor`, when it has one and is no graph output.
  std::optional<size_t> only_reader(const std::string& tensor) const {
    auto c = consumers_.find(tensor);
    if (outputs_.count(tensor) || c == consumers_.end() || c->second.size() != 1)
      return std::nullopt;
    return c->second.front();
  }

  static std::string input(const Node& n, size_t k) {
    return n.inputs.size() > k ? n.inputs[k] : std::string();
  }

  // True when `tensor` is one known value (a per-tensor scale or zero point).
  bool scalar(const std::string& tensor) const {
    auto v = g_.values.find(tensor);
    return g_.constants.count(tensor) && v != g_.values.end() && v->second.size() == 1;
  }

  // The tensors of the QDQ form, from the DequantizeLinear nodes before the anchor and the
  // [Relu ->] QuantizeLinear after it: "" when they are there, else why not.
  std::string describe_qdq(size_t i, QuantizedOp& q) const {
    const Node& n = g_.nodes[i];
    q.node = i;
    q.conv = n.op == "Conv";
    q.nt = n.op == "Gemm" && n.int_or("transB", 0) != 0;
    const Node& dx = g_.nodes[*dequantize(n.inputs.at(0))];
    q.data = dx.inputs.at(0);
    q.data_scale = input(dx, 1);
    q.data_zero_point = input(dx, 2);
    const auto dw = dequantize(input(n, 1));
    if (!dw) return "the weights are not dequantized";
    const Node& w = g_.nodes[*dw];
    q.weight = w.inputs.at(0);
    q.weight_scale = input(w, 1);
    q.weight_zero_point = input(w, 2);
    q.depthwise = q.conv && depthwise(n, q.data, q.weight);
    if (!weight_scale_on_output_channels(q, w.int_or("axis", 1)))
      return "the weights' scale is neither one value nor one per output channel";
    if (!input(n, 2).empty()) {
      const auto db = dequantize(n.inputs[2]);
      q.float_bias = !db;
      q.bias = db ? g_.nodes[*db].inputs.at(0) : n.inputs[2];
    }

    // The anchor [-> Relu] -> QuantizeLinear, each the only reader of what precedes it.
    auto next = only_reader(n.outputs.at(0));
    if (next && g_.nodes[*next].op == "Relu") {
      q.relu = true;
      q.epilogue.push_back(*next);
      next = only_reader(g_.nodes[*next].outputs.at(0));
    }
    if (!next || g_.nodes[*next].op != "QuantizeLinear")
      return "its output is not quantized by one QuantizeLinear";
    const Node& qn = g_.nodes[*next];
    q.epilogue.push_back(*next);
    q.out_scale = input(qn, 1);
    q.out_zero_point = input(qn, 2);
    q.output = qn.outputs.at(0);

    // The weights' and bias' DequantizeLinear nodes are the kernel's; the data's too when no other
    // node reads the float data.
    for (const std::string& t : {n.inputs[0], n.inputs[1], input(n, 2)})
      if (auto d = t.empty() ? std::nullopt : dequantize(t); d && only_reader(t))
        q.prologue.push_back(*d);
    return "";
  }

  // Whether conv `n` of data `x` and weights `w` has one channel per group (group == C == K).
  bool depthwise(const Node& n, const std::string& x, const std::string& w) const {
    const int64_t group = n.int_or("group", 1);
    const auto xs = g_.shape(x), ws = g_.shape(w);
    return group > 1 && xs && ws && xs->size() == 4 && ws->size() == 4 && (*xs)[1] == group &&
           (*ws)[0] == group && (*ws)[1] == 1;
  }

  // A uint8 operand of an int8 elementwise operator: a DequantizeLinear per tensor of uint8 data.
  std::optional<size_t> uint8_dequantize(const std::string& tensor) const {
    const auto d = dequantize(tensor);
    if (!d) return std::nullopt;
    const Node& n = g_.nodes[*d];
    const std::string zp = input(n, 2);
    if (g_.type(n.inputs.at(0)) != "uint8" || g_.constants.count(n.inputs.at(0)) ||
        !scalar(input(n, 1)) || (!zp.empty() && !scalar(zp)))
      return std::nullopt;
    return d;
  }

  // A QuantizeLinear per tensor to uint8 that is the only reader of `tensor`.
  std::optional<size_t> uint8_quantize_of(const std::string& tensor) const {
    const auto q = only_reader(tensor);
    if (!q) return std::nullopt;
    const Node& n = g_.nodes[*q];
    const std::string zp = input(n, 2);
    if (n.op != "QuantizeLinear" || !n.domain.empty() || g_.type(n.outputs.at(0)) != "uint8" ||
        !scalar(input(n, 1)) || (!zp.empty() && !scalar(zp)))
      return std::nullopt;
    return q;
  }

  // DQ(a) + DQ(b) -> Add [-> Relu] -> Q of uint8 tensors, per tensor, with operands of one shape.
  std::optional<QuantizedAdd> describe_add(size_t i) const {
    const Node& n = g_.nodes[i];
    if (n.inputs.size() != 2) return std::nullopt;
    const auto da = uint8_dequantize(n.inputs[0]), db = uint8_dequantize(n.inputs[1]);
    const auto sa = g_.shape(n.inputs[0]), sb = g_.shape(n.inputs[1]);
    if (!da || !db || !sa || !sb || *sa != *sb) return std::nullopt;
    QuantizedAdd q;
    q.node = i;
    auto next = only_reader(n.outputs.at(0));
    if (next && g_.nodes[*next].op == "Relu" && g_.nodes[*next].domain.empty()) {
      q.relu = true;
      q.epilogue.push_back(*next);
    }
    const auto qn = uint8_quantize_of(q.relu ? g_.nodes[*next].outputs.at(0) : n.outputs.at(0));
    if (!qn) return std::nullopt;
    q.epilogue.push_back(*qn);
    const Node& a = g_.nodes[*da];
    const Node& b = g_.nodes[*db];
    q.a = a.inputs.at(0);
    q.a_scale = input(a, 1);
    q.a_zero_point = input(a, 2);
    q.b = b.inputs.at(0);
    q.b_scale = input(b, 1);
    q.b_zero_point = input(b, 2);
    q.out_scale = input(g_.nodes[*qn], 1);
    q.out_zero_point = input(g_.nodes[*qn], 2);
    q.output = g_.nodes[*qn].outputs.at(0);
    for (size_t d : {*da, *db})
      if (only_reader(g_.nodes[d].outputs.at(0))) q.prologue.push_back(d);
    return q;
  }

  // "" when `tensor` is uint8 with a per-tensor scale and zero point, else why not.
  std::string uint8_per_tensor(const std::string& tensor, const std::string& scale,
                               const std::string& zero_point) const {
    if (g_.type(tensor) != "uint8") return "'" + tensor + "' is " + g_.type(tensor) + ", not uint8";
    if (!scalar(scale) || (!zero_point.empty() && !scalar(zero_point)))
      return "the scale or zero point of '" + tensor + "' is not one value";
    return "";
  }

  // QLinearAdd(a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale, c_zero_point).
  std::string describe_qlinear_add(size_t i, QuantizedAdd& q) const {
    const Node& n = g_.nodes[i];
    q.node = i;
    q.a = input(n, 0);
    q.a_scale = input(n, 1);
    q.a_zero_point = input(n, 2);
    q.b = input(n, 3);
    q.b_scale = input(n, 4);
    q.b_zero_point = input(n, 5);
    q.out_scale = input(n, 6);
    q.out_zero_point = input(n, 7);
    q.output = n.outputs.at(0);
    for (const auto& [t, s, z] :
         {std::tuple{q.a, q.a_scale, q.a_zero_point}, std::tuple{q.b, q.b_scale, q.b_zero_point},
          std::tuple{q.output, q.out_scale, q.out_zero_point}})
      if (std::string why = uint8_per_tensor(t, s, z); !why.empty()) return why;
    if (g_.constants.count(q.a) || g_.constants.count(q.b)) return "a constant operand";
    const auto sa = g_.shape(q.a), sb = g_.shape(q.b);
    if (!sa || !sb || *sa != *sb) return "operands of different shapes (broadcasting is not built)";
    return "";
  }

  // QLinearGlobalAveragePool(x, x_scale, x_zero_point, y_scale, y_zero_point) of NCHW data.
  std::string describe_qlinear_global_pool(size_t i, QuantizedGlobalAveragePool& q) const {
    const Node& n = g_.nodes[i];
    q.node = i;
    q.data = input(n, 0);
    q.data_scale = input(n, 1);
    q.data_zero_point = input(n, 2);
    q.out_scale = input(n, 3);
    q.out_zero_point = input(n, 4);
    q.output = n.outputs.at(0);
    for (const auto& [t, s, z] : {std::tuple{q.data, q.data_scale, q.data_zero_point},
                                  std::tuple{q.output, q.out_scale, q.out_zero_point}})
      if (std::string why = uint8_per_tensor(t, s, z); !why.empty()) return why;
    if (n.int_or("channels_last", 0) != 0) return "channels last (NHWC) data";
    const auto x = g_.shape(q.data);
    if (!x || x->size() != 4) return "data that is not 4-D";
    return "";
  }

  // DQ(x uint8) -> GlobalAveragePool [-> Flatten | Reshape] -> Q(uint8) of 4-D data, every scale
  // and zero point a per-tensor constant (else the pool runs in float32 between them).
  std::optional<QuantizedGlobalAveragePool> describe_global_pool(size_t i) const {
    const Node& n = g_.nodes[i];
    const auto d = uint8_dequantize(n.inputs.at(0));
    const auto x = d ? g_.shape(g_.nodes[*d].inputs.at(0)) : std::nullopt;
    if (!x || x->size() != 4 || n.outputs.size() != 1) return std::nullopt;
    const auto view = pooled_view(n.outputs.at(0), (*x)[0], (*x)[1]);
    const auto qn = uint8_quantize_of(view ? g_.nodes[*view].outputs.at(0) : n.outputs.at(0));
    if (!qn) return std::nullopt;
    const Node& dq = g_.nodes[*d];
    const Node& q = g_.nodes[*qn];
    QuantizedGlobalAveragePool p;
    p.node = i;
    if (only_reader(n.inputs.at(0))) p.prologue.push_back(*d);
    if (view) p.epilogue.push_back(*view);
    p.epilogue.push_back(*qn);
    p.data = dq.inputs.at(0);
    p.data_scale = input(dq, 1);
    p.data_zero_point = input(dq, 2);
    p.out_scale = input(q, 1);
    p.out_zero_point = input(q, 2);
    p.output = q.outputs.at(0);
    return p;
  }

  // The Flatten or Reshape that alone reads the pooled `tensor` of n x c channels, when it makes
  // it [n, c] or [n, c, 1, 1] (a view of the same values in the same order).
  std::optional<size_t> pooled_view(const std::string& tensor, int64_t n, int64_t c) const {
    const auto v = only_reader(tensor);
    if (!v) return std::nullopt;
    const Node& view = g_.nodes[*v];
    if (!view.domain.empty() || (view.op != "Flatten" && view.op != "Reshape") ||
        view.outputs.size() != 1)
      return std::nullopt;
    const auto s = g_.shape(view.outputs[0]);
    if (!s || (*s != std::vector<int64_t>{n, c} && *s != std::vector<int64_t>{n, c, 1, 1}))
      return std::nullopt;
    return v;
  }

  // The value of a per-tensor scale or zero point ("" reads as 0).
  double value(const std::string& tensor) const {
    return tensor.empty() ? 0.0 : g_.values.at(tensor).front();
  }

  // DQ(x) -> MaxPool -> Q with the DequantizeLinear's scale and zero point.
  std::optional<QuantizedMaxPool> describe_max_pool(size_t i) const {
    const Node& n = g_.nodes[i];
    const auto d = uint8_dequantize(n.inputs.at(0));
    if (!d || !only_reader(n.inputs.at(0)) || n.outputs.size() != 1) return std::nullopt;
    const auto qn = uint8_quantize_of(n.outputs.at(0));
    if (!qn) return std::nullopt;
    const Node& dq = g_.nodes[*d];
    const Node& q = g_.nodes[*qn];
    if (value(input(dq, 1)) != value(input(q, 1)) || value(input(dq, 2)) != value(input(q, 2)))
      return std::nullopt;
    return QuantizedMaxPool{i, *d, *qn, dq.inputs.at(0), q.outputs.at(0)};
  }

  // The tensors of the QOperator form: QLinearConv(x, x_scale, x_zero_point, w, w_scale,
  // w_zero_point, y_scale, y_zero_point[, B]) and QLinearMatMul(a, ..., b, ..., y, ...), whose
  // per-channel weight scale is along the output channels by definition.
  std::string describe_qoperator(size_t i, QuantizedOp& q) const {
    const Node& n = g_.nodes[i];
    q.node = i;
    q.conv = n.op == "QLinearConv";
    q.data = input(n, 0);
    q.data_scale = input(n, 1);
    q.data_zero_point = input(n, 2);
    q.weight = input(n, 3);
    q.weight_scale = input(n, 4);
    q.weight_zero_point = input(n, 5);
    q.depthwise = q.conv && depthwise(n, q.data, q.weight);
    q.out_scale = input(n, 6);
    q.out_zero_point = input(n, 7);
    q.bias = input(n, 8);
    q.output = n.outputs.at(0);
    if (!weight_scale_on_output_channels(q, q.conv ? 0 : 1))
      return "the weights' scale is neither one value nor one per output channel";
    return "";
  }

  // Whether the weights' scale is one value or one per output channel (along `axis` of the
  // weights: 0 for a conv's [K, C, R, S] and a Gemm's [N, K], 1 for [K, N]).
  bool weight_scale_on_output_channels(const QuantizedOp& q, int64_t axis) const {
    const auto wshape = g_.shape(q.weight);
    const auto sshape = g_.shape(q.weight_scale);
    if (!wshape || !sshape || !g_.constants.count(q.weight_scale)) return false;
    int64_t scales = 1;
    for (int64_t d : *sshape) scales *= d;
    if (scales == 1) return true;
    if (axis < 0) axis += static_cast<int64_t>(wshape->size());
    const int64_t out_axis = q.conv || q.nt ? 0 : 1;
    return axis == out_axis && static_cast<size_t>(axis) < wshape->size() &&
           scales == (*wshape)[static_cast<size_t>(axis)];
  }

  // The element count of a tensor of known shape, else -1.
  int64_t elements(const std::string& tensor) const {
    const auto s = g_.shape(tensor);
    if (!s) return -1;
    int64_t n = 1;
    for (int64_t d : *s) n *= d;
    return n;
  }

  // Whether every weight minus its zero point fits int8, so that the model build runs the int8
  // kernel on w - z_w (exact: sum (x - z_x)(w - z_w) is then the kernel's sum with the data's
  // zero point folded into the bias), or "" when the zero point is no constant or the weights'
  // values are not in the model (why). Decided from the ranges of the weights and of the zero
  // points, per tensor, or per output channel when the zero point is (each channel's weights
  // against its own zero point, what the model build's fold_zero_points checks weight by weight):
  // u8 weights of zero point 128 always fit. Throws Error(kInvalidArgument) naming the node for a
  // zero point that is not of the weights' type or of the scale's extent.
  std::variant<bool, std::string> weight_zero_point_fits(const QuantizedOp& q) const {
    const Node& n = g_.nodes[q.node];
    const std::string wtype = g_.type(q.weight);
    const ByteRanges no_zero_point;
    const ByteRanges* z_ranges = &no_zero_point;
    if (!q.weight_zero_point.empty()) {
      const std::string& z = q.weight_zero_point;
      const auto bad = [&](const std::string& why) {
        return Error(
            ErrorKind::kInvalidArgument,
            "node '" + n.name + "' (" + n.op + "): the weights' zero point '" + z + "' " + why);
      };
      if (g_.type(z) != wtype)
        throw bad("is " + (g_.type(z).empty() ? std::string("of unknown type") : g_.type(z)) +
                  ", not " + wtype + " as the weights");
      const int64_t count = elements(z);
      if (count != 1 && count != elements(q.weight_scale))
        throw bad("has " + std::to_string(count) + " elements, the scale " +
                  std::to_string(elements(q.weight_scale)));
      const auto r = g_.byte_ranges.find(z);
      if (!g_.constants.count(z) || r == g_.byte_ranges.end())
        return "the weights' zero point is not a constant";
      z_ranges = &r->second;
    }
    const auto w = g_.byte_ranges.find(q.weight);
    if (w == g_.byte_ranges.end()) return "the weights' values are not in the model";
    // (weight range, zero point range) pairs: the whole tensors', or each output channel's when
    // the zero point has one per channel (weight_scale_on_output_channels put them on that axis).
    std::vector<std::pair<ByteRanges::Range, ByteRanges::Range>> pairs;
    const auto& channels = q.conv || q.nt ? w->second.axis0 : w->second.axis1;
    if (z_ranges->axis0.size() > 1 && channels.size() == z_ranges->axis0.size()) {
      for (size_t k = 0; k < channels.size(); ++k)
        pairs.push_back({channels[k], z_ranges->axis0[k]});
    } else {
      pairs.push_back({w->second.whole, z_ranges->whole});
    }
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const auto& [wr, zr] : pairs) {
      lo = std::min(lo, wr.first - zr.second);
      hi = std::max(hi, wr.second - zr.first);
    }
    return lo >= -128 && hi <= 127;
  }

  // "" when the weights run in int8: less their zero point, or else less a shift into int8 with
  // the input sums correction (q.input_sums), or for a depthwise conv less their zero point as
  // int16 (q.s16_weights: its widening multiply-adds take int16 weights at no cost, where the
  // sums would be per channel and cost a pass of their own); else why not.
  std::string shift_weights(QuantizedOp& q) const {
    const std::variant<bool, std::string> fits = weight_zero_point_fits(q);
    if (const auto* why = std::get_if<std::string>(&fits)) return *why;
    if (std::get<bool>(fits)) return "";
    if (q.depthwise) {
      q.s16_weights = true;
      return "";
    }
    q.input_sums = true;
    q.weight_shift = g_.type(q.weight) == "uint8" ? 128 : 0;
    return "";
  }

  // "" when the described tensors are what the int8 kernel computes with (shift_weights), else
  // why not.
  std::string check(QuantizedOp& q) const {
    const Node& n = g_.nodes[q.node];
    if (g_.type(q.data) != "uint8") return "the data is " + g_.type(q.data) + ", not uint8";
    if (!scalar(q.data_scale) || (!q.data_zero_point.empty() && !scalar(q.data_zero_point)))
      return "the data's scale or zero point is not one value (per-axis data)";
    const auto wshape = g_.shape(q.weight);
    const size_t rank = q.conv ? 4 : 2;
    const std::string wtype = g_.type(q.weight);
    if (!g_.constants.count(q.weight) || (wtype != "int8" && wtype != "uint8") || !wshape ||
        wshape->size() != rank)
      return std::string("the weights are not a ") + (q.conv ? "4-D" : "2-D") +
             " int8 or uint8 constant";
    if (std::string why = shift_weights(q); !why.empty()) return why;
    if (!q.bias.empty() &&
        (!g_.constants.count(q.bias) || g_.type(q.bias) != (q.float_bias ? "float32" : "int32")))
      return "the bias is neither a dequantized int32 constant nor a float32 constant";
    if (g_.type(q.output) != "uint8" && g_.type(q.output) != "int8")
      return "the output is quantized to " + g_.type(q.output);
    if (!scalar(q.out_scale) || (!q.out_zero_point.empty() && !scalar(q.out_zero_point)))
      return "the output's scale or zero point is not one value";
    const auto x = g_.shape(q.data);
    if (q.conv) {
      if (!x || x->size() != 4) return "not a 2-D convolution";
      // Depthwise: depthwise_conv2d_nchwc_u8s8s32. Otherwise conv2d_nchwc_u8s8s32, whose input
      // channels come in groups of 4: a model build pads them with zero weights.
      if (q.depthwise) return "";
      if (n.int_or("group", 1) != 1)
        return "a grouped conv other than depthwise (the int8 templates have no groups)";
      for (int64_t d : n.ints("dilations", {1, 1}))
        if (d != 1) return "a dilated conv (the int8 template has no dilation)";
      return "";
    }
    if (n.op == "Gemm") {
      if (n.int_or("transA", 0) != 0) return "a transposed A";
      if (n.float_or("alpha", 1.0) != 1.0 || n.float_or("beta", 1.0) != 1.0)
        return "alpha or beta other than 1";
    }
    if (!x || x->size() < 2) return "the data is not a matrix or a batch of rows";
    return "";
  }

  const Graph& g_;
  std::set<std::string> outputs_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::map<std::string, size_t> producer_;
};

}  // namespace

QuantizedOps find_quantized_ops(const Graph& g) { return QdqMatcher(g).run(); }

}  // namespace ktune::frontend
