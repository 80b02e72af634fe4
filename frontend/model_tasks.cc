// Task extraction: pattern-matches a Graph's operators onto ktune's templates, fuses epilogues,
// merges identical workloads.
#include "frontend/model_tasks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <variant>

#include "frontend/epilogue_fusion.h"
#include "frontend/operators.h"
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/epilogue.h"
#include "support/error.h"

namespace ktune::frontend {
namespace {

using Args = std::map<std::string, std::string>;

// What one anchor node (Conv, Gemm, pooling ...) becomes, before merging.
struct Candidate {
  std::string template_name;
  Args args;               // without the epilogue
  std::string substitute;  // a template that computes the same with these args ("" = none)
  FusedEpilogue epilogue;
  double flop = 0;
  std::string note;
  std::vector<Candidate> alternatives;  // other algorithms for the same node (ModelTask's)
  std::string dtype = "float32";        // the dtype argument ("" = the template takes none)
  std::vector<size_t> prologue;         // TaskOccurrence::prologue
  std::vector<int64_t> input_pads;      // TaskOccurrence::input_pads
};

// An anchor that cannot become a task: the reason goes to the unsupported list, with the
// generated kernel a model build computes it with ("" = none).
struct NotMapped {
  std::string reason;
  std::string generated = "";
  // The node and the nodes its generated kernel fuses, '+'-joined ("" = the node alone).
  std::string layer = "";
};

std::string i2s(int64_t v) { return std::to_string(v); }

// The Winograd output tiles (m of F(m x m, 3 x 3)) worth tuning for an OH x OW output: the larger
// tile saves more multiplies but pads a small output to a multiple of m and has a larger U. From
// 12 on F(4x4) wins; below, both are tuned: on ResNet-18's 7x7 C512 layer F(4x4) computes an 8x8
// output with 44% fewer multiplies than F(2x2) but reads 37.7 MB of U against 16.8, and which is
// faster depends on the machine's caches.
std::vector<int64_t> winograd_tiles(int64_t oh, int64_t ow) {
  if (std::min(oh, ow) >= 12) return {4};
  return {2, 4};
}

bool all_equal(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v.front(); });
}

// Why an operator without a template is listed: most need a kernel ktune cannot make; some need
// none.
std::string reason_without_template(const std::string& op) {
  if (in_family(op, OpFamily::kView)) return "layout only (no kernel)";
  if (in_family(op, OpFamily::kConstant)) return "constant (no kernel)";
  if (in_family(op, OpFamily::kQuantize)) return "no template (per-tensor kernel)";
  // conv_transpose_as_conv rewrote every other one into a Conv.
  if (op == "ConvTranspose")
    return "a transposed conv with dilations, output_shape or auto_pad (no phase conv)";
  return "no template";
}

// The generated kernel a model build computes a node with when no task covers it ("" = none), by
// the operator table.
std::string generated_kernel(const Node& n, const Graph& g) {
  const OperatorInfo* info = n.domain.empty() ? operator_info(n.op) : nullptr;
  if (!info) return "";
  switch (info->family) {
    case OpFamily::kAnchor:
    case OpFamily::kConstant:
      return "";
    case OpFamily::kView:
      return "view";
    case OpFamily::kUnary:
    case OpFamily::kBinary:
      return "elementwise";
    case OpFamily::kQuantize:
      return n.op == "DequantizeLinear" && g.constants.count(n.inputs.at(0)) ? "folded"
                                                                             : info->kernel;
    default:
      break;
  }
  if (n.op == "Transpose") return info->kernel;
  // The kernels below compute float32: the int64 tensors of a shape subgraph (Gather of a Shape,
  // Concat of dimensions) need folding at build time instead.
  const std::string type = n.outputs.empty() ? "" : g.type(n.outputs[0]);
  if (!type.empty() && type != "float32") return "";
  if (info->family == OpFamily::kReduce) return "reduce";
  // Gather of an activation at constant indices; a constant table (an embedding) is not built.
  if (n.op == "Gather")
    return n.inputs.size() == 2 && !g.constants.count(n.inputs[0]) && g.constants.count(n.inputs[1])
               ? info->kernel
               : "";
  return info->kernel;
}

void resolve(ModelTask& t, const schedule_space::TargetTraits& target);

class Extractor {
 public:
  Extractor(const Graph& graph, const schedule_space::TargetTraits& target)
      : g_(graph),
        target_(target),
        fuser_(graph),
        layer_norms_(find_layer_norms(graph)),
        quantized_(find_quantized_ops(graph)) {
    // An int8 operator's DequantizeLinear, Relu and QuantizeLinear nodes are its own.
    for (size_t k = 0; k < quantized_.ops.size(); ++k) {
      const QuantizedOp& q = quantized_.ops[k];
      quantized_at_[q.node] = k;
      for (size_t n : q.prologue) fuser_.exclude(n);
      for (size_t n : q.epilogue) fuser_.exclude(n);
    }
    // So are a uint8 Add's and a uint8 max pool's (generated kernels, listed at their operator).
    for (const QuantizedAdd& a : quantized_.adds) {
      generated_at_[a.node] = {g_.nodes[a.node].op == "QLinearAdd"
                                   ? "int8 add (QLinearAdd)"
                                   : "int8 add (DequantizeLinear pair, Add, QuantizeLinear)",
                               "quantized_add"};
      fuser_.exclude(a.node);
      for (size_t n : a.prologue) fuser_.exclude(n);
      for (size_t n : a.epilogue) fuser_.exclude(n);
    }
    for (const QuantizedMaxPool& p : quantized_.max_pools) {
      generated_at_[p.node] = {
          "uint8 max pool (between DequantizeLinear and QuantizeLinear of "
          "one scale)",
          "max_pool_u8"};
      for (size_t n : {p.node, p.dequantize, p.quantize}) fuser_.exclude(n);
    }
    for (const QuantizedGlobalAveragePool& p : quantized_.global_pools) {
      std::string how = g_.nodes[p.node].op == "QLinearGlobalAveragePool"
                            ? "uint8 global average pool (QLinearGlobalAveragePool)"
                            : "uint8 global average pool (between DequantizeLinear and "
                              "QuantizeLinear)";
      if (p.epilogue.size() == 2)  // a Flatten or Reshape before the QuantizeLinear
        how.insert(how.size() - 1, ", its " + g_.nodes[p.epilogue.front()].op + " a view");
      generated_at_[p.node] = {how, "global_average_pool_u8"};
      for (size_t n : p.prologue) fuser_.exclude(n);
      for (size_t n : p.epilogue) fuser_.exclude(n);
    }
    // A LayerNorm stays whole: no anchor takes its nodes into an epilogue.
    for (size_t k = 0; k < layer_norms_.size(); ++k)
      for (size_t n : layer_norms_[k].nodes) {
        in_layer_norm_[n] = k;
        fuser_.exclude(n);
      }
  }

  ModelTasks run() {
    ModelTasks result;
    result.model = g_.name;
    std::map<std::string, size_t> task_index;
    std::map<std::string, size_t> unsupported_index;
    auto add_unsupported = [&](const std::string& op, const std::string& layer,
                               const std::string& reason, const std::string& generated) {
      const std::string key = op + "\n" + reason + "\n" + generated;
      auto [it, fresh] = unsupported_index.emplace(key, result.unsupported.size());
      if (fresh) result.unsupported.push_back({op, 0, reason, {}, generated});
      UnsupportedOp& u = result.unsupported[it->second];
      ++u.count;
      u.layers.push_back(layer);
    };
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (auto ln = in_layer_norm_.find(i); ln != in_layer_norm_.end()) {
        const LayerNormGroup& group = layer_norms_[ln->second];
        if (group.nodes.front() != i) continue;
        std::string layer;
        for (size_t n : group.nodes) layer += (layer.empty() ? "" : "+") + g_.nodes[n].name;
        add_unsupported("LayerNorm", layer, "no template", "layer_norm");
        continue;
      }
      const Node& node = g_.nodes[i];
      if (auto gen = generated_at_.find(i); gen != generated_at_.end()) {
        add_unsupported(node.op, node.name, gen->second.first, gen->second.second);
        continue;
      }
      if (fuser_.fused(i)) continue;
      std::variant<Candidate, NotMapped, std::monostate> mapped = map_anchor(i);
      if (std::holds_alternative<std::monostate>(mapped)) {
        add_unsupported(node.op, node.name, reason_without_template(node.op),
                        generated_kernel(node, g_));
        continue;
      }
      if (auto* nm = std::get_if<NotMapped>(&mapped)) {
        add_unsupported(node.op, nm->layer.empty() ? node.name : nm->layer, nm->reason,
                        nm->generated);
        continue;
      }
      Candidate c = std::get<Candidate>(mapped);
      ModelTask t = make_task(c);
      auto [it, fresh] = task_index.emplace(t.key(), result.tasks.size());
      if (fresh) {
        resolve(t, target_);
        result.tasks.push_back(std::move(t));
      }
      ModelTask& task = result.tasks[it->second];
      ++task.count;
      TaskOccurrence occ{it->second, i, c.epilogue.nodes, c.prologue, node.name, c.input_pads};
      task.layers.push_back(node.name);
      for (size_t f : c.epilogue.nodes) {
        task.layers.push_back(g_.nodes[f].name);
        occ.layer += "+" + g_.nodes[f].name;
      }
      for (size_t p : c.prologue) {
        task.layers.push_back(g_.nodes[p].name);
        occ.layer += "+" + g_.nodes[p].name;
      }
      const std::vector<std::string> layers = task.layers;
      const size_t primary = it->second;
      result.occurrences.push_back(std::move(occ));
      for (Candidate& alt : c.alternatives) {
        alt.epilogue = c.epilogue;
        ModelTask a = make_task(alt);
        a.alternative_of = primary;
        auto [at, new_alt] = task_index.emplace(a.key(), result.tasks.size());
        if (new_alt) {
          resolve(a, target_);
          if (a.status != TaskStatus::kOk) {
            task_index.erase(at);  // optional: an algorithm no template takes is not listed
            continue;
          }
          result.tasks.push_back(std::move(a));
        }
        ModelTask& listed = result.tasks[at->second];
        ++listed.count;
        listed.layers = layers;
      }
    }
    result.layer_norms = layer_norms_;
    result.quantized = quantized_.ops;
    result.quantized_adds = quantized_.adds;
    result.quantized_max_pools = quantized_.max_pools;
    result.quantized_global_pools = quantized_.global_pools;
    result.generated_convs = generated_convs_;
    return result;
  }

 private:
  std::variant<Candidate, NotMapped, std::monostate> map_anchor(size_t i) {
    const Node& n = g_.nodes[i];
    if (auto r = quantized_.refused.find(i); r != quantized_.refused.end())
      return NotMapped{"not int8: " + r->second};
    if (!n.domain.empty()) return std::monostate{};
    if (quantized_at_.count(i)) return map_quantized(i);
    if (n.op == "Conv") return map_conv(i);
    if (n.op == "Gemm" || n.op == "MatMul") return map_gemm(i);
    if (n.op == "MaxPool" || n.op == "AveragePool" || n.op == "GlobalAveragePool" ||
        n.op == "GlobalMaxPool")
      return map_pool(n);
    return std::monostate{};
  }

  // A Conv, or the conv of an int8 operator `q` (its data and weights; nothing fused here).
  std::variant<Candidate, NotMapped, std::monostate> map_conv(size_t i,
                                                              const QuantizedOp* q = nullptr) {
    const Node& n = g_.nodes[i];
    const auto x = g_.shape(q ? q->data : n.inputs[0]);
    const auto w = g_.shape(q ? q->weight : n.inputs[1]);
    const auto y = g_.shape(n.outputs[0]);
    if (!x || !w || !y) return NotMapped{"shape not inferred"};
    if (x->size() != 4) return NotMapped{"only 2-D convolution"};
    const int64_t group = n.int_or("group", 1);
    const auto strides = n.ints("strides", {1, 1});
    const auto dilations = n.ints("dilations", {1, 1});
    const int64_t R = (*w)[2], S = (*w)[3];
    std::vector<int64_t> pads = n.ints("pads", {0, 0, 0, 0});
    const std::string auto_pad = n.text_or("auto_pad", "NOTSET");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // The padding that keeps ceil(in / stride) outputs, split over both sides.
      pads.assign(4, 0);
      for (int a = 0; a < 2; ++a) {
        const int64_t in = (*x)[2 + a], k = a == 0 ? R : S, s = strides[a], d = dilations[a];
        const int64_t total =
            std::max<int64_t>(((in + s - 1) / s - 1) * s + (k - 1) * d + 1 - in, 0);
        pads[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pads[a + 2] = total - pads[a];
      }
    } else if (auto_pad == "VALID") {
      pads.assign(4, 0);
    }
    const int64_t N = (*x)[0], C = (*x)[1], K = (*w)[0], OH = (*y)[2], OW = (*y)[3];
    // ONNX's shape inference does not compare a conv's input channels with its weights (a wrong
    // --input passes it): a model that cannot run is bad input, not a task.
    if (group < 1 || C != (*w)[1] * group || K % group != 0)
      throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (Conv): the input has " +
                                                   i2s(C) + " channels, its weights take " +
                                                   i2s((*w)[1] * group) + " (check --input)");
    // What the float32 templates do not take, a generated conv computes: a task per group would
    // need a per-group binding of data and weights, and no template dilates per axis.
    const bool depthwise = group == C && K == C;
    if (group != 1 && !depthwise) {
      if (q) return NotMapped{"a grouped conv other than depthwise (int8)"};
      return generated_conv(i, pads, "a conv of " + i2s(group) + " groups, not depthwise");
    }
    if (!all_equal(dilations)) {
      if (q) return NotMapped{"different dilations per axis"};
      return generated_conv(i, pads, "different dilations per axis");
    }
    // conv2d_nchwc and depthwise_conv2d_nchwc take a column stride of their own (stride_w).
    const bool stride_per_axis = !all_equal(strides);
    if (stride_per_axis && q)
      return NotMapped{
          "different strides per axis (float32 convs of one group and depthwise convs take them)"};
    // Padding that differs between the ends: a generated kernel pads the input, the conv pads
    // nothing (the int8 path binds its data unpadded).
    std::vector<int64_t> input_pads;
    if (!all_equal(pads)) {
      if (q) return NotMapped{"asymmetric padding (int8)"};
      input_pads = pads;
      pads.assign(4, 0);
    }
    const int64_t H = (*x)[2] + (input_pads.empty() ? 0 : input_pads[0] + input_pads[2]);
    const int64_t W = (*x)[3] + (input_pads.empty() ? 0 : input_pads[1] + input_pads[3]);
    Candidate c;
    c.args = {{"N", i2s(N)},         {"H", i2s(H)},
              {"W", i2s(W)},         {"R", i2s(R)},
              {"S", i2s(S)},         {"stride", i2s(strides[0])},
              {"pad", i2s(pads[0])}, {"dilation", i2s(dilations[0])}};
    const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (group == 1) {
      c.template_name = "conv2d_nchwc";
      c.substitute = "conv2d";
      c.args["C"] = i2s(C);
      c.args["K"] = i2s(K);
      if (stride_per_axis) c.args["stride_w"] = i2s(strides[1]);
      c.flop = 2.0 * N * K * OH * OW * C * R * S;
      if (R == 3 && S == 3 && strides[0] == 1 && !stride_per_axis && dilations[0] == 1)
        for (int64_t m : winograd_tiles(OH, OW)) {
          Candidate w = c;
          w.template_name = "conv2d_winograd_nchwc";
          w.substitute.clear();
          w.args["m"] = i2s(m);
          c.alternatives.push_back(std::move(w));
        }
    } else {
      // Depthwise: the blocked layout's kernel (as conv2d_nchwc's output), with the epilogue; the
      // NCHW template computes the same when it refuses.
      c.template_name = "depthwise_conv2d_nchwc";
      c.substitute = "depthwise_conv2d";
      c.args["C"] = i2s(C);
      if (stride_per_axis) c.args["stride_w"] = i2s(strides[1]);
      c.flop = 2.0 * N * C * OH * OW * R * S;
    }
    if (!q) c.epilogue = fuser_.fuse(i, has_bias, AnchorKind::kConv);
    if (!input_pads.empty()) {
      c.input_pads = input_pads;
      c.note += std::string(c.note.empty() ? "" : "; ") + "padding " + i2s(input_pads[0]) + "," +
                i2s(input_pads[1]) + "," + i2s(input_pads[2]) + "," + i2s(input_pads[3]) +
                " (top, left, bottom, right) by a generated kernel before it";
      for (Candidate& alt : c.alternatives) alt.input_pads = input_pads;
    }
    note_not_int8(i, c);
    return c;
  }

  // A float32 Conv no template takes, for the generated conv_blocked (GeneratedConv), with the
  // epilogue the templates' would fuse.
  NotMapped generated_conv(size_t i, const std::vector<int64_t>& pads, const std::string& reason) {
    const Node& n = g_.nodes[i];
    const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    GeneratedConv c{i, fuser_.fuse(i, has_bias, AnchorKind::kConv), pads};
    std::string layer = n.name;
    for (size_t f : c.epilogue.nodes) layer += "+" + g_.nodes[f].name;
    generated_convs_.push_back(std::move(c));
    return NotMapped{reason, "conv_blocked", layer};
  }

  // A Conv, Gemm or MatMul with dequantized inputs that runs in float32 says why.
  void note_not_int8(size_t i, Candidate& c) const {
    if (auto q = quantized_.not_fused.find(i); q != quantized_.not_fused.end())
      c.note += (c.note.empty() ? "" : "; ") + std::string("float32, not int8: ") + q->second;
  }

  // The int8 kernel of a QuantizedOp: the operator's shape and the requantize epilogue
  // (per-channel scale, Relu as a clamp at the zero point). A conv takes the data's zero point
  // (the padding value) as an argument; a matrix product's is folded into its bias.
  std::variant<Candidate, NotMapped, std::monostate> map_quantized(size_t i) {
    const QuantizedOp& q = quantized_.ops[quantized_at_.at(i)];
    std::variant<Candidate, NotMapped, std::monostate> mapped =
        q.conv ? map_conv(i, &q) : map_quantized_matmul(q);
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

  // matmul_u8s8s32 of the data's rows (every axis but the last) times the weights.
  std::variant<Candidate, NotMapped, std::monostate> map_quantized_matmul(const QuantizedOp& q) {
    const Node& n = g_.nodes[q.node];
    const auto a = g_.shape(q.data);
    const auto b = g_.shape(q.weight);
    if (!a || !b) return NotMapped{"shape not inferred"};
    int64_t M = 1;
    for (size_t d = 0; d + 1 < a->size(); ++d) M *= (*a)[d];
    const int64_t K = a->back(), N = q.nt ? (*b)[0] : (*b)[1];
    if (K != (q.nt ? (*b)[1] : (*b)[0]))
      throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (" + n.op +
                                                   "): operand shapes " + shape_text(*a) + " and " +
                                                   shape_text(*b) + " do not multiply");
    Candidate c;
    c.template_name = "matmul_u8s8s32";
    c.args = {{"M", i2s(M)}, {"N", i2s(N)}, {"K", i2s(K)}};
    c.flop = 2.0 * M * N * K;
    return c;
  }

  std::variant<Candidate, NotMapped, std::monostate> map_gemm(size_t i) {
    const Node& n = g_.nodes[i];
    const auto a = g_.shape(n.inputs[0]);
    const auto b = g_.shape(n.inputs[1]);
    if (!a || !b) return NotMapped{"shape not inferred"};
    Candidate c;
    bool has_bias = false;
    if (n.op == "Gemm") {
      // A transposed A is copied into [M, K] by a generated transpose before the product.
      const bool ta = n.int_or("transA", 0) != 0;
      const bool nt = n.int_or("transB", 0) != 0;
      if (a->size() != 2 || b->size() != 2)
        throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (Gemm): operands " +
                                                     shape_text(*a) + " and " + shape_text(*b) +
                                                     " are not matrices");
      const int64_t M = ta ? (*a)[1] : (*a)[0], K = ta ? (*a)[0] : (*a)[1],
                    N = nt ? (*b)[0] : (*b)[1];
      if (K != (nt ? (*b)[1] : (*b)[0]))
        throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (Gemm): operand shapes " +
                                                     shape_text(*a) + " and " + shape_text(*b) +
                                                     " do not multiply");
      c.template_name = "matmul";
      c.args = {{"M", i2s(M)}, {"N", i2s(N)}, {"K", i2s(K)}, {"layout", nt ? "nt" : "nn"}};
      c.flop = 2.0 * M * N * K;
      has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    } else if (a->size() == 1 || b->size() == 1) {
      // A matrix-vector product: [.., M, K] x [K] is the rows times a [K, 1] column (N = 1),
      // [K] x [K, N] one row (M = 1); the output holds the same elements without that axis.
      if (a->size() == 1 && b->size() > 2) return NotMapped{"a vector times a batch of matrices"};
      const bool vector_b = b->size() == 1;
      const int64_t K = a->back(), N = vector_b ? 1 : b->back();
      int64_t M = 1;
      if (vector_b)
        for (size_t d = 0; d + 1 < a->size(); ++d) M *= (*a)[d];
      if (K != (vector_b ? b->front() : (*b)[0]))
        throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (MatMul): operand shapes " +
                                                     shape_text(*a) + " and " + shape_text(*b) +
                                                     " do not multiply");
      c.template_name = "matmul";
      c.args = {{"M", i2s(M)}, {"N", i2s(N)}, {"K", i2s(K)}, {"layout", "nn"}};
      c.flop = 2.0 * M * N * K;
      // The output's last axis is M, not a column of N: a per-column epilogue would not apply.
      if (vector_b) {
        note_not_int8(i, c);
        return c;
      }
    } else {
      const int64_t K = a->back(), N = b->back(), M = (*a)[a->size() - 2];
      int64_t batch = 1;
      for (size_t d = 0; d + 2 < a->size(); ++d) batch *= (*a)[d];
      if (b->size() == 2) {
        // A batch of rows times one matrix is one matrix product.
        c.template_name = "matmul";
        c.args = {{"M", i2s(batch * M)}, {"N", i2s(N)}, {"K", i2s(K)}, {"layout", "nn"}};
      } else {
        c.template_name = "batch_matmul";
        c.args = {
            {"batch", i2s(batch)}, {"M", i2s(M)}, {"N", i2s(N)}, {"K", i2s(K)}, {"layout", "nn"}};
      }
      c.flop = 2.0 * batch * M * N * K;
    }
    c.epilogue = fuser_.fuse(i, has_bias, AnchorKind::kGemm);
    // Gemm + bias + Relu with B as [N, K] is exactly what dense_bias_relu computes.
    if (c.template_name == "matmul" && c.args["layout"] == "nt" &&
        c.epilogue.steps == "bias_relu") {
      c.template_name = "dense_bias_relu";
      c.args.erase("layout");
      c.epilogue.steps.clear();
      c.note = "bias and relu built into the template";
    }
    note_not_int8(i, c);
    return c;
  }

  std::variant<Candidate, NotMapped, std::monostate> map_pool(const Node& n) {
    const auto x = g_.shape(n.inputs[0]);
    const auto y = g_.shape(n.outputs[0]);
    if (!x || !y) return NotMapped{"shape not inferred", ""};
    if (x->size() != 4) return NotMapped{"only 2-D pooling", ""};
    const bool global = n.op.rfind("Global", 0) == 0;
    const bool max = n.op.find("Max") != std::string::npos;
    const int64_t N = (*x)[0], C = (*x)[1], H = (*x)[2], W = (*x)[3], OH = (*y)[2], OW = (*y)[3];
    std::vector<int64_t> kernel = global ? std::vector<int64_t>{H, W} : n.ints("kernel_shape");
    std::vector<int64_t> strides = global ? std::vector<int64_t>{1, 1} : n.ints("strides", {1, 1});
    std::vector<int64_t> pads =
        global ? std::vector<int64_t>{0, 0, 0, 0} : n.ints("pads", {0, 0, 0, 0});
    if (kernel.size() != 2) return NotMapped{"only 2-D pooling", ""};
    const std::vector<int64_t> dilations = n.ints("dilations", {1, 1});
    if (dilations != std::vector<int64_t>{1, 1}) return NotMapped{"dilated pooling", ""};
    // What the templates do not take, a generated pool in the channel-blocked layout computes
    // (deploy's pool_blocked with a PoolWindow): the window as ONNX gives it.
    const std::string auto_pad = n.text_or("auto_pad", "NOTSET");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
      return NotMapped{"auto_pad " + auto_pad.substr(0, 4), "pool"};
    if (strides.size() != 2 || pads.size() != 4) return NotMapped{"malformed window", ""};
    if (!all_equal(strides)) return NotMapped{"different strides per axis", "pool"};
    if (!all_equal(pads)) return NotMapped{"asymmetric padding", "pool"};
    if (!max && pads[0] > 0 && n.int_or("count_include_pad", 0) == 0)
      return NotMapped{"average excluding padding (count_include_pad=0)", "pool"};
    // ceil_mode may add an output row the floor formula of the templates does not have.
    if (OH != (H + 2 * pads[0] - kernel[0]) / strides[0] + 1 ||
        OW != (W + 2 * pads[0] - kernel[1]) / strides[0] + 1)
      return NotMapped{"ceil_mode output extent", "pool"};
    Candidate c;
    c.template_name = max ? "max_pool2d" : "avg_pool2d";
    c.args = {{"N", i2s(N)},
              {"C", i2s(C)},
              {"H", i2s(H)},
              {"W", i2s(W)},
              {"R", i2s(kernel[0])},
              {"S", i2s(kernel[1])},
              {"stride", i2s(strides[0])},
              {"pad", i2s(pads[0])}};
    const double window = static_cast<double>(kernel[0] * kernel[1]);
    c.flop = static_cast<double>(N * C * OH * OW) * (max ? window : window + 1);
    if (global) c.note = "global pooling";
    return c;
  }

  // The listed form: the arguments the model determines (shape, float32, the epilogue). The
  // template's other arguments (e.g. conv2d_nchwc's blocking) keep their defaults, which are the
  // template's to choose: the tuned workload's key (tunable) shows them.
  ModelTask make_task(const Candidate& c) const {
    ModelTask t;
    t.template_name = c.template_name;
    t.args = c.args;
    // ONNX float tensors; the test models and the templates' default.
    if (!c.dtype.empty()) t.args["dtype"] = c.dtype;
    t.epilogue = c.epilogue.steps;
    if (!t.epilogue.empty()) t.args["epilogue"] = t.epilogue;
    for (const auto& [k, v] : c.epilogue.args) t.args[k] = v;
    t.flop = c.flop;
    t.note = c.note;
    t.substitute = c.substitute;
    return t;
  }

  const Graph& g_;
  schedule_space::TargetTraits target_;
  EpilogueFuser fuser_;
  std::vector<LayerNormGroup> layer_norms_;
  std::map<size_t, size_t> in_layer_norm_;  // node -> its group
  QuantizedOps quantized_;
  std::map<size_t, size_t> quantized_at_;  // anchor node -> its QuantizedOp
  // A uint8 operator a model build generates: node -> (reason, generated kernel).
  std::map<size_t, std::pair<std::string, std::string>> generated_at_;
  std::vector<GeneratedConv> generated_convs_;
};

// Sets status, refused and tunable by asking the templates (Task::create) for the listed form,
// then the bare operator, then the substitute template (with the epilogue, then without).
void resolve(ModelTask& t, const schedule_space::TargetTraits& target) {
  t.refused.clear();
  t.tunable.reset();
  auto attempt = [&](const std::string& name,
                     const Args& args) -> std::optional<schedule_space::Task> {
    try {
      return schedule_space::Task::create(name, args, target);
    } catch (const Error& e) {
      // Every distinct reason: the epilogue argument and the shape may be refused separately.
      if (t.refused.find(e.what()) == std::string::npos)
        t.refused += (t.refused.empty() ? "" : "; ") + std::string(e.what());
      return std::nullopt;
    }
  };
  Args bare = t.args;
  bare.erase("epilogue");
  for (const std::string& k : schedule_space::templates::activation_arg_names()) bare.erase(k);
  if ((t.tunable = attempt(t.template_name, t.args))) {
    t.status = TaskStatus::kOk;
  } else if (!t.epilogue.empty() && (t.tunable = attempt(t.template_name, bare))) {
    t.status = TaskStatus::kEpilogueUnfused;
  } else if (!t.substitute.empty() &&
             ((!t.epilogue.empty() && (t.tunable = attempt(t.substitute, t.args))) ||
              (t.tunable = attempt(t.substitute, bare)))) {
    t.status = TaskStatus::kSubstitute;
  } else {
    t.status = TaskStatus::kRefused;
  }
}

}  // namespace

std::string to_string(TaskStatus status) {
  switch (status) {
    case TaskStatus::kOk:
      return "ok";
    case TaskStatus::kEpilogueUnfused:
      return "epilogue_unfused";
    case TaskStatus::kSubstitute:
      return "substitute";
    case TaskStatus::kRefused:
      return "refused";
  }
  return "?";
}

std::string ModelTask::key() const {
  // The shape in the template's declared order (like WorkloadArgs::key), then any other
  // argument, then dtype and epilogue last: the same key whatever order a template declares them
  // in.
  std::string text = template_name + "(";
  const std::vector<std::string>& params = schedule_space::templates::activation_arg_names();
  std::set<std::string> done = {"dtype", "epilogue"};
  done.insert(params.begin(), params.end());
  bool first = true;
  auto add = [&](const std::string& k) {
    auto it = args.find(k);
    if (it == args.end()) return;
    text += (first ? "" : ",") + k + "=" + it->second;
    first = false;
    done.insert(k);
  };
  if (schedule_space::TemplateRegistry::global().contains(template_name))
    for (const auto& spec : schedule_space::TemplateRegistry::global().get(template_name)->args)
      if (!done.count(spec.name)) add(spec.name);
  for (const auto& [k, v] : args)
    if (!done.count(k)) add(k);
  add("dtype");
  add("epilogue");
  for (const std::string& k : params) add(k);
  return text + ")";
}

double ModelTasks::total_flop() const {
  double sum = 0;
  for (const auto& t : tasks)
    if (!t.alternative_of) sum += static_cast<double>(t.count) * t.flop;
  return sum;
}

std::vector<size_t> ModelTasks::alternatives_of(size_t task) const {
  std::vector<size_t> alts;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (tasks[i].alternative_of == task) alts.push_back(i);
  return alts;
}

std::vector<std::string> ModelTasks::layers_of(size_t task) const {
  if (task < tasks.size() && tasks[task].alternative_of) task = *tasks[task].alternative_of;
  std::vector<std::string> layers;
  for (const auto& occ : occurrences)
    if (occ.task == task) layers.push_back(occ.layer);
  return layers;
}

ModelTasks extract_tasks(const Graph& graph, const schedule_space::TargetTraits& target) {
  return Extractor(graph, target).run();
}

nlohmann::json to_json(const ModelTasks& m) {
  nlohmann::json j;
  j["model"] = m.model;
  j["total_gflop"] = m.total_flop() / 1e9;
  j["tasks"] = nlohmann::json::array();
  for (const auto& t : m.tasks) {
    nlohmann::json tj = {{"template", t.template_name},
                         {"key", t.key()},
                         {"epilogue", t.epilogue},
                         {"count", t.count},
                         {"flop", t.flop},
                         {"gflop_total", t.flop * static_cast<double>(t.count) / 1e9},
                         {"layers", t.layers},
                         {"status", to_string(t.status)}};
    tj["args"] = t.args;
    if (!t.note.empty()) tj["note"] = t.note;
    if (t.status != TaskStatus::kOk) tj["refused"] = t.refused;
    if (!t.substitute.empty()) tj["substitute"] = t.substitute;
    if (t.tunable) tj["tuned_as"] = t.tunable->workload_key();
    if (t.alternative_of) tj["alternative_of"] = *t.alternative_of;
    j["tasks"].push_back(std::move(tj));
  }
  j["unsupported"] = nlohmann::json::array();
  for (const auto& u : m.unsupported) {
    nlohmann::json uj = {
        {"op", u.op}, {"count", u.count}, {"reason", u.reason}, {"layers", u.layers}};
    if (!u.generated.empty()) uj["generated"] = u.generated;
    j["unsupported"].push_back(std::move(uj));
  }
  return j;
}

ModelTasks tasks_from_json(const nlohmann::json& j, const schedule_space::TargetTraits& target) {
  // A count from a peer: nlohmann would cast a float (1e30) to an integer, which is undefined.
  auto count_of = [](const nlohmann::json& v) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > 1'000'000'000))
      throw Error(ErrorKind::kInvalidArgument,
                  "model tasks: a count must be an integer up to 10^9");
    return v.get<int64_t>();
  };
  try {
    if (!j.is_object() || !j.at("tasks").is_array())
      throw Error(ErrorKind::kInvalidArgument, "model tasks: not an object with a task list");
    ModelTasks m;
    m.model = j.at("model").get<std::string>();
    for (const auto& tj : j.at("tasks")) {
      ModelTask t;
      t.template_name = tj.at("template").get<std::string>();
      t.args = tj.at("args").get<Args>();
      t.epilogue = tj.value("epilogue", "");
      t.count = count_of(tj.at("count"));
      t.flop = tj.at("flop").get<double>();
      t.layers = tj.value("layers", std::vector<std::string>{});
      t.note = tj.value("note", "");
      t.substitute = tj.value("substitute", "");
      if (t.count < 1 || !std::isfinite(t.flop) || t.flop < 0)
        throw Error(ErrorKind::kInvalidArgument,
                    "model tasks: task " + t.key() + " has a bad count or flop");
      if (tj.contains("alternative_of")) {
        const int64_t of = count_of(tj["alternative_of"]);
        if (of < 0 || static_cast<size_t>(of) >= m.tasks.size() ||
            m.tasks[static_cast<size_t>(of)].alternative_of)
          throw Error(ErrorKind::kInvalidArgument,
                      "model tasks: task " + t.key() + " is an alternative of no earlier task");
        t.alternative_of = static_cast<size_t>(of);
      }
      resolve(t, target);
      m.tasks.push_back(std::move(t));
    }
    for (const auto& u : j.value("unsupported", nlohmann::json::array()))
      m.unsupported.push_back({u.at("op").get<std::string>(), count_of(u.at("count")),
                               u.value("reason", ""), u.value("layers", std::vector<std::string>{}),
                               u.value("generated", "")});
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument, std::string("model tasks: ") + e.what());
  }
}

}  // namespace ktune::frontend
