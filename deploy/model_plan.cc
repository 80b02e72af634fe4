// plan_model(): walks the graph in order, turning each node into kernel calls on planned tensors,
// then places the intermediate tensors in one arena.
#include "deploy/model_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "deploy/int8_packing.h"
#include "deploy/model_nodes.h"
#include "deploy/model_ops.h"
#include "deploy/model_pool.h"
#include "frontend/model_tasks.h"
#include "schedule_space/templates/winograd.h"
#include "support/error.h"
#include "te/lower.h"

namespace ktune::deploy {
namespace {

constexpr int64_t kAlign = 64;

int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

// Ops that only reinterpret their input's bytes (in ONNX's layout).
bool is_view(const std::string& op) {
  static const std::set<std::string> kViews = {"Flatten", "Reshape", "Identity",
                                               "Dropout", "Squeeze", "Unsqueeze"};
  return kViews.count(op) > 0;
}

// The elementwise operator an ONNX op is, or "" when it is none.
std::string elementwise_of(const std::string& op) {
  if (op == "Relu") return "relu";
  if (op == "Clip") return "clip";
  if (op == "Sigmoid") return "sigmoid";
  if (op == "HardSwish") return "hardswish";
  if (op == "Add") return "add";
  if (op == "Sub") return "sub";
  if (op == "Mul") return "mul";
  if (op == "Div") return "div";
  if (op == "Erf") return "erf";
  if (op == "Sqrt") return "sqrt";
  return "";
}

class Planner {
 public:
  Planner(const frontend::Graph& g, const std::map<std::string, frontend::ConstantValue>& constants,
          const std::string& name, const PlanOptions& options)
      : g_(g),
        constants_(with_folded_dequantize(g, constants)),
        options_(options),
        target_(codegen::Target::parse(options.target)),
        tasks_(frontend::extract_tasks(g, target_traits(options.target))) {
    plan_.name = name;
  }

  ModelPlan run() {
    for (const auto& io : {g_.inputs, g_.outputs})
      for (const std::string& name : io)
        if (dtype_of(name) != te::Float(32))
          throw Error(
              ErrorKind::kUnsupported,
              "graph input or output '" + name + "' is " + g_.type(name) +
                  ": a model library takes and returns float32 (quantize inside the model)");
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      PlanTensor t{g_.inputs[i], known_shape(g_.inputs[i]), 0, Storage::kInput,
                   static_cast<int64_t>(i)};
      current_[t.name] = add(t);
      plan_.inputs.push_back(current_[t.name]);
    }
    std::map<size_t, const frontend::TaskOccurrence*> anchors;
    std::set<size_t> fused;
    for (const auto& occ : tasks_.occurrences) {
      anchors[occ.node] = &occ;
      fused.insert(occ.fused.begin(), occ.fused.end());
      fused.insert(occ.prologue.begin(), occ.prologue.end());
    }
    // A DequantizeLinear of a constant is a constant (with_folded_dequantize): no kernel.
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (g_.nodes[i].op == "DequantizeLinear" && constants_.count(g_.nodes[i].outputs.at(0)))
        fused.insert(i);
    // A LayerNorm group runs as one kernel where its first node is (which alone reads outside it).
    for (const auto& group : tasks_.layer_norms) {
      layer_norm_at_[group.nodes.front()] = &group;
      fused.insert(group.nodes.begin() + 1, group.nodes.end());
    }
    // Graph order, except that a task waits until every tensor it reads exists: a fused residual
    // may come from a branch that the graph lists after the task's anchor.
    std::vector<size_t> waiting;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (fused.count(i) || g_.nodes[i].op == "Constant") continue;
      waiting.push_back(i);
      for (bool progress = true; progress;) {
        progress = false;
        for (auto it = waiting.begin(); it != waiting.end(); ++it) {
          auto a = anchors.find(*it);
          if (!ready(*it, a == anchors.end() ? nullptr : a->second)) continue;
          plan_node(*it, a == anchors.end() ? nullptr : a->second);
          waiting.erase(it);
          progress = true;
          break;
        }
      }
    }
    if (!waiting.empty()) {
      const frontend::Node& n = g_.nodes[waiting.front()];
      throw Error(ErrorKind::kInvalidArgument,
                  "node '" + n.name + "' (" + n.op + ") reads a tensor that no node computes");
    }
    for (size_t j = 0; j < g_.outputs.size(); ++j) {
      const int64_t from = form(g_.outputs[j], 0);
      PlanTensor t{g_.outputs[j], plan_.tensors[from].shape, 0, Storage::kOutput,
                   static_cast<int64_t>(j)};
      const int64_t out = add(t);
      plan_.outputs.push_back(out);
      PlanStep s;
      s.layer = "output " + g_.outputs[j];
      s.kind = "layout";
      s.symbol = symbol("copy");
      s.func = elementwise(s.symbol, ElementwiseOp{"copy"}, product(t.shape));
      s.args = {from, out};
      plan_.steps.push_back(std::move(s));
    }
    place_in_arena(plan_);
    return std::move(plan_);
  }

 private:
  // Whether every tensor node i (with the nodes fused into it) reads from outside exists.
  bool ready(size_t i, const frontend::TaskOccurrence* occ) const {
    std::vector<size_t> nodes = {i};
    if (occ) nodes.insert(nodes.end(), occ->fused.begin(), occ->fused.end());
    if (occ) nodes.insert(nodes.end(), occ->prologue.begin(), occ->prologue.end());
    std::set<std::string> inside;
    for (size_t k : nodes) inside.insert(g_.nodes[k].outputs.begin(), g_.nodes[k].outputs.end());
    for (size_t k : nodes)
      for (const std::string& in : g_.nodes[k].inputs)
        if (!in.empty() && !inside.count(in) && !constants_.count(in) && !g_.constants.count(in) &&
            !current_.count(in))
          return false;
    return true;
  }

  void plan_node(size_t i, const frontend::TaskOccurrence* occ) {
    const frontend::Node& n = g_.nodes[i];
    if (occ) {
      plan_task(*occ);
    } else if (auto ln = layer_norm_at_.find(i); ln != layer_norm_at_.end()) {
      plan_generated(describe_layer_norm(g_, *ln->second, constants_));
    } else if (is_view(n.op)) {
      plan_view(n);
    } else if (auto step = describe_node(g_, n, constants_)) {
      plan_generated(*step);
    } else if (!elementwise_of(n.op).empty()) {
      plan_elementwise(n);
    } else {
      throw unsupported(n, reason_of(n));
    }
  }

  Error unsupported(const frontend::Node& n, const std::string& why) const {
    return Error(ErrorKind::kUnsupported, "node '" + n.name + "' (" + n.op + "): " + why);
  }

  std::string reason_of(const frontend::Node& n) const {
    for (const auto& u : tasks_.unsupported)
      if (u.op == n.op && std::find(u.layers.begin(), u.layers.end(), n.name) != u.layers.end())
        return u.reason;
    return "no kernel for this operator";
  }

  std::vector<int64_t> known_shape(const std::string& tensor) const {
    auto s = g_.shape(tensor);
    if (!s)
      throw Error(ErrorKind::kInvalidArgument,
                  "tensor '" + tensor + "' has no known shape (give --input NAME=SHAPE)");
    return *s;
  }

  const frontend::ConstantValue& constant(const frontend::Node& n,
                                          const std::string& tensor) const {
    auto it = constants_.find(tensor);
    if (it == constants_.end() || (it->second.f32.empty() && product(it->second.shape) > 0))
      throw unsupported(n, "input '" + tensor + "' is not a float32 constant");
    return it->second;
  }

  std::string symbol(const std::string& what) const {
    return plan_.name + "_" + std::to_string(plan_.steps.size()) + "_" + what;
  }

  int64_t add(PlanTensor t) {
    plan_.tensors.push_back(std::move(t));
    return static_cast<int64_t>(plan_.tensors.size()) - 1;
  }

  // A packed weight: its bytes appended to the weights, 64-byte aligned.
  template <typename T>
  int64_t weight(const std::string& name, std::vector<int64_t> shape, const std::vector<T>& data,
                 te::DataType dtype = te::Float(32)) {
    PlanTensor t{name, std::move(shape), 0, Storage::kWeights};
    t.dtype = dtype;
    t.offset = static_cast<int64_t>(plan_.weights.size());
    plan_.weights.resize(
        static_cast<size_t>(align_up(t.offset + static_cast<int64_t>(data.size() * sizeof(T)))));
    std::memcpy(plan_.weights.data() + t.offset, data.data(), data.size() * sizeof(T));
    return add(std::move(t));
  }

  // The tensor holding `onnx` in layout `block`, converting (one kernel per conversion, made once)
  // from the form that exists.
  int64_t form(const std::string& onnx, int64_t block) {
    auto cur = current_.find(onnx);
    if (cur == current_.end()) {
      if (constants_.count(onnx))
        throw Error(ErrorKind::kUnsupported, "constant '" + onnx + "' used as an activation");
      throw Error(ErrorKind::kInvalidArgument,
                  "tensor '" + onnx + "' is read before it is computed");
    }
    const PlanTensor& have = plan_.tensors[cur->second];
    if (have.block == block) return cur->second;
    auto made = forms_.find({onnx, block});
    if (made != forms_.end()) return made->second;
    if (have.shape.size() != 4)
      throw Error(ErrorKind::kUnsupported,
                  "tensor '" + onnx + "' is not 4-D and cannot be blocked");
    int64_t from = cur->second;
    if (have.block != 0 && block != 0) from = form(onnx, 0);  // re-blocking goes through NCHW
    PlanTensor t{block ? onnx + "@c" + std::to_string(block) : onnx, have.shape, block};
    t.dtype = have.dtype;
    const int64_t to = add(t);
    PlanStep s;
    s.layer = "layout " + onnx;
    s.kind = "layout";
    s.symbol = symbol(block ? "to_nchw" + std::to_string(block) + "c" : "to_nchw");
    s.func = block ? to_blocked(s.symbol, t.shape, block, t.dtype)
                   : from_blocked(s.symbol, t.shape, plan_.tensors[from].block, t.dtype);
    s.args = {from, to};
    plan_.steps.push_back(std::move(s));
    forms_[{onnx, block}] = to;
    return to;
  }

  // The element type of tensor `onnx`: float32 unless the graph says uint8, int8 or int32.
  te::DataType dtype_of(const std::string& onnx) const {
    const std::string t = g_.type(onnx);
    if (t.empty() || t == "float32") return te::Float(32);
    if (t == "uint8") return te::UInt(8);
    if (t == "int8") return te::Int(8);
    if (t == "int32") return te::Int(32);
    throw Error(ErrorKind::kUnsupported, "tensor '" + onnx + "' is " + t +
                                             " (model builds compute float32, uint8, int8, int32)");
  }

  // A new tensor for the value `onnx`, which becomes its current form.
  int64_t define(const std::string& onnx, int64_t block) {
    PlanTensor t{onnx, known_shape(onnx), block};
    t.dtype = dtype_of(onnx);
    const int64_t id = add(std::move(t));
    current_[onnx] = id;
    return id;
  }

  void plan_view(const frontend::Node& n) {
    const int64_t src = form(n.inputs.at(0), 0);
    PlanTensor t{n.outputs.at(0), known_shape(n.outputs.at(0))};
    t.dtype = plan_.tensors[src].dtype;
    t.alias_of = plan_.tensors[src].alias_of >= 0 ? plan_.tensors[src].alias_of : src;
    if (product(t.shape) != product(plan_.tensors[src].shape))
      throw unsupported(n, "a view that changes the element count");
    current_[t.name] = add(t);
  }

  void plan_elementwise(const frontend::Node& n) {
    ElementwiseOp op{elementwise_of(n.op)};
    if (op.op == "clip") {
      op.min = -INFINITY;
      op.max = INFINITY;
      const auto bound = [&](size_t input, float fallback) {
        if (n.inputs.size() <= input || n.inputs[input].empty()) return fallback;
        const auto& v = constant(n, n.inputs[input]);
        if (v.f32.size() != 1) throw unsupported(n, "a bound that is not a scalar");
        return v.f32.front();
      };
      op.min = n.attrs.count("min") ? n.attrs.at("min").floats.at(0) : bound(1, op.min);
      op.max = n.attrs.count("max") ? n.attrs.at("max").floats.at(0) : bound(2, op.max);
    }
    const std::string& first = n.inputs.at(0);
    if (current_.find(first) == current_.end())
      throw unsupported(n, "its first operand is a constant");
    int64_t block = plan_.tensors[current_[first]].block;
    std::vector<int64_t> args = {form(first, block)};
    if (op.operands() == 2) {
      const std::string& second = n.inputs.at(1);
      if (current_.find(second) == current_.end() || known_shape(second) != known_shape(first))
        throw unsupported(
            n, "operands of different shapes or a constant operand (broadcasting is not built)");
      args.push_back(form(second, block));
    }
    if (known_shape(n.outputs.at(0)) != known_shape(first))
      throw unsupported(n, "the output shape differs from the input's");
    args.push_back(define(n.outputs.at(0), block));
    PlanStep s;
    s.layer = n.name;
    s.kind = "elementwise";
    s.symbol = symbol(op.op);
    s.func = elementwise(s.symbol, op, plan_.tensors[args.back()].elements());
    s.args = std::move(args);
    plan_.steps.push_back(std::move(s));
  }

  // A generated kernel on ONNX's layout: constants packed into the weights, activations converted
  // from a blocked layout where one is.
  void plan_generated(const GeneratedStep& g) {
    PlanStep s;
    s.layer = g.layer;
    s.kind = "elementwise";
    s.symbol = symbol(g.what);
    for (const StepOperand& in : g.inputs)
      s.args.push_back(in.constant ? weight(in.tensor, in.shape, in.data) : form(in.tensor, 0));
    s.args.push_back(define(g.output, 0));
    s.func = g.kernel(s.symbol);
    plan_.steps.push_back(std::move(s));
  }

  // What the nodes fused into a task add to its operator, per output channel: y = scale * op +
  // shift (BatchNormalization, bias Adds; the scale folds into the weights), and the residual
  // tensor.
  struct Affine {
    std::vector<float> scale, shift;
    bool shifted = false;  // a bias or BN: the kernel needs its bias argument
    std::string residual;  // "" = none
  };

  Affine fused_affine(const frontend::Node& anchor, const frontend::TaskOccurrence& occ,
                      int64_t channels, const std::string& anchor_bias) {
    Affine a;
    a.scale.assign(static_cast<size_t>(channels), 1.0f);
    a.shift.assign(static_cast<size_t>(channels), 0.0f);
    if (!anchor_bias.empty()) {
      const auto& b = constant(anchor, anchor_bias);
      if (static_cast<int64_t>(b.f32.size()) != channels)
        throw unsupported(anchor, "a bias of another channel count");
      a.shift = b.f32;
      a.shifted = true;
    }
    std::string chain = anchor.outputs.at(0);
    bool activation = false;  // the activation's nodes (an Add inside gelu_erf) add nothing here
    for (size_t j : occ.fused) {
      const frontend::Node& f = g_.nodes[j];
      activation = activation || (f.op != "BatchNormalization" && f.op != "Add");
      if (!activation && f.op == "BatchNormalization") {
        const auto& gamma = constant(f, f.inputs.at(1)).f32;
        const auto& beta = constant(f, f.inputs.at(2)).f32;
        const auto& mean = constant(f, f.inputs.at(3)).f32;
        const auto& var = constant(f, f.inputs.at(4)).f32;
        const float eps = f.attrs.count("epsilon") ? f.attrs.at("epsilon").floats.at(0) : 1e-5f;
        const size_t n = a.scale.size();
        if (gamma.size() != n || beta.size() != n || mean.size() != n || var.size() != n)
          throw unsupported(f, "parameters of another channel count");
        for (size_t k = 0; k < n; ++k) {
          const float s = gamma[k] / std::sqrt(var[k] + eps);
          a.shift[k] = a.shift[k] * s + beta[k] - mean[k] * s;
          a.scale[k] *= s;
        }
        a.shifted = true;
      } else if (!activation && f.op == "Add" &&
                 (f.inputs.at(0) == chain || f.inputs.at(1) == chain)) {
        const std::string& other = f.inputs[0] == chain ? f.inputs[1] : f.inputs[0];
        if (constants_.count(other)) {
          // A per-channel constant (the fuser checked that it broadcasts along the channel axis).
          const auto& c = constant(f, other);
          if (static_cast<int64_t>(c.f32.size()) != channels)
            throw unsupported(f, "a bias of another channel count");
          for (size_t k = 0; k < a.shift.size(); ++k) a.shift[k] += c.f32[k];
          a.shifted = true;
        } else {
          a.residual = other;
        }
      }
      // Activations are the template's epilogue; the chain continues through each fused node.
      chain = f.outputs.at(0);
    }
    return a;
  }

  void plan_task(const frontend::TaskOccurrence& occ) {
    const frontend::ModelTask& mt = tasks_.tasks[occ.task];
    const frontend::Node& anchor = g_.nodes[occ.node];
    if (mt.status != frontend::TaskStatus::kOk || !mt.tunable)
      throw unsupported(anchor, "its task " + mt.key() + " is " + frontend::to_string(mt.status) +
                                    (mt.refused.empty() ? "" : " (" + mt.refused + ")"));
    const schedule_space::Task& task = *mt.tunable;
    const std::string& layer = occ.layer;
    std::string out_name = anchor.outputs.at(0);
    if (!occ.fused.empty()) out_name = g_.nodes[occ.fused.back()].outputs.at(0);
    // A pool whose input is channel-blocked runs blocked too (a generated kernel): converting to
    // NCHW and back around it would cost more than the pool.
    const std::string& tmpl = task.template_name();
    if ((tmpl == "max_pool2d" || tmpl == "avg_pool2d") && occ.fused.empty()) {
      auto cur = current_.find(anchor.inputs.at(0));
      if (cur != current_.end() && plan_.tensors[cur->second].block > 0) {
        const int64_t block = plan_.tensors[cur->second].block;
        BlockedPool pool{tmpl == "max_pool2d",
                         plan_.tensors[cur->second].shape,
                         block,
                         task.args().get_int("R"),
                         task.args().get_int("S"),
                         task.args().get_int("stride"),
                         task.args().get_int("pad")};
        PlanStep s;
        s.layer = layer;
        s.kind = "pool";
        s.symbol = symbol(pool.max ? "max_pool_nchwc" : "avg_pool_nchwc");
        s.flop = mt.flop;
        s.task = task;
        s.func = pool_blocked(s.symbol, pool);
        s.args = {cur->second, define(out_name, block)};
        plan_.steps.push_back(std::move(s));
        return;
      }
    }
    PlanStep s;
    s.layer = layer;
    s.kind = "task";
    s.flop = mt.flop;
    ChoiceOptions how;
    how.missing_log_is_untuned = true;
    s.task = task;
    s.choice = choose_config(options_.history, Workload{target_, task}, how);
    // Another algorithm for the same layers (Winograd for a 3x3 conv) runs when its best record
    // measured faster than the task's (an untuned alternative never replaces the task).
    for (size_t a : tasks_.alternatives_of(occ.task)) {
      const frontend::ModelTask& alt = tasks_.tasks[a];
      if (!alt.tunable) continue;
      ConfigChoice c = choose_config(options_.history, Workload{target_, *alt.tunable}, how);
      if (c.source != ConfigChoice::Source::kTuned) continue;
      if (s.choice->source != ConfigChoice::Source::kTuned ||
          c.best->cost() < s.choice->best->cost()) {
        s.task = *alt.tunable;
        s.choice = std::move(c);
      }
    }
    const schedule_space::Task& run = *s.task;
    s.symbol = symbol(run.template_name());
    if (options_.require_tuned && s.choice->source != ConfigChoice::Source::kTuned)
      throw Error(ErrorKind::kNotFound, "node '" + anchor.name + "': " + run.workload_key() +
                                            " is not tuned (" + s.choice->untuned_reason + ")");
    const schedule_space::Instantiated inst = run.instantiate(s.choice->config);
    s.func = te::lower(inst.schedule, inst.args, s.symbol);

    if (tmpl == "conv2d_nchwc_u8s8s32" || tmpl == "matmul_u8s8s32")
      bind_quantized(s, anchor, inst.args);
    else if (tmpl == "conv2d_nchwc" || tmpl == "depthwise_conv2d_nchwc")
      bind_conv(s, anchor, occ, out_name, inst.args);
    else if (tmpl == "matmul" || tmpl == "dense_bias_relu" || tmpl == "batch_matmul")
      bind_gemm(s, anchor, occ, out_name, inst.args);
    else if (tmpl == "max_pool2d" || tmpl == "avg_pool2d")
      s.args = {form(anchor.inputs.at(0), 0), define(out_name, 0)};
    else
      throw unsupported(anchor, "template " + tmpl + " is not built into models yet");
    plan_.steps.push_back(std::move(s));
  }

  void bind_conv(PlanStep& s, const frontend::Node& conv, const frontend::TaskOccurrence& occ,
                 const std::string& out_name, const std::vector<te::Tensor>& args) {
    const bool depthwise = s.task->template_name() == "depthwise_conv2d_nchwc";
    const bool winograd = s.task->template_name() == "conv2d_winograd_nchwc";
    const auto& w = constant(conv, conv.inputs.at(1));
    const int64_t K = w.shape.at(0), C = depthwise ? K : w.shape.at(1), R = w.shape.at(2),
                  S = w.shape.at(3);
    const Affine affine = fused_affine(conv, occ, K, conv.inputs.size() > 2 ? conv.inputs[2] : "");
    const std::vector<float>& scale = affine.scale;
    const std::vector<float>& shift = affine.shift;
    const std::string& residual = affine.residual;
    const int64_t icb =
        depthwise ? s.task->args().get_int("block") : s.task->args().get_int("ic_block");
    const int64_t ocb = depthwise ? icb : s.task->args().get_int("oc_block");
    const int64_t kb = (K + ocb - 1) / ocb, cb = (C + icb - 1) / icb;
    std::vector<float> packed;
    if (winograd) {
      // U = G g G^T per channel pair, of the weights with the batch norm's scale folded in.
      std::vector<float> folded(w.f32.begin(), w.f32.end());
      for (int64_t k = 0; k < K; ++k)
        for (size_t i = 0; i < static_cast<size_t>(C * R * S); ++i)
          folded[static_cast<size_t>(k * C * R * S) + i] *= scale[static_cast<size_t>(k)];
      packed = schedule_space::templates::winograd_transform_weights(
          folded.data(), K, C, s.task->args().get_int("m"), icb, ocb);
    } else if (depthwise) {
      // [C/b][R][S][b]
      packed.assign(static_cast<size_t>(cb * R * S * icb), 0.0f);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t q = 0; q < S; ++q)
            packed[static_cast<size_t>(((c / icb * R + r) * S + q) * icb + c % icb)] =
                w.f32[static_cast<size_t>((c * R + r) * S + q)] * scale[static_cast<size_t>(c)];
    } else {
      // [K/ocb][C/icb][R][S][icb][ocb]
      packed.assign(static_cast<size_t>(kb * cb * R * S * icb * ocb), 0.0f);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t r = 0; r < R; ++r)
            for (int64_t q = 0; q < S; ++q)
              packed[static_cast<size_t>(
                  ((((k / ocb * cb + c / icb) * R + r) * S + q) * icb + c % icb) * ocb + k % ocb)] =
                  w.f32[static_cast<size_t>(((k * C + c) * R + r) * S + q)] *
                  scale[static_cast<size_t>(k)];
    }
    std::vector<float> bias(static_cast<size_t>(kb * ocb), 0.0f);
    std::copy(shift.begin(), shift.end(), bias.begin());
    const bool has_bias_shift = affine.shifted;
    for (const te::Tensor& a : args) {
      const std::string& n = a.name();
      if (n == "I")
        s.args.push_back(form(conv.inputs.at(0), icb));
      else if (n == "W")
        s.args.push_back(weight(conv.inputs.at(1) + "@packed", a.shape(), packed));
      else if (n == "U")
        s.args.push_back(weight(conv.inputs.at(1) + "@winograd", a.shape(), packed));
      else if (n == "bias")
        s.args.push_back(weight(conv.name + "@bias", a.shape(), bias));
      else if (n == "residual")
        s.args.push_back(form(residual, ocb));
      else if (&a == &args.back())
        s.args.push_back(define(out_name, ocb));
      else
        throw unsupported(conv, "kernel argument '" + n + "' has no binding");
    }
    // A folded BN or a conv bias needs the kernel's bias argument; without it the shift is lost.
    const bool kernel_has_bias = std::any_of(
        args.begin(), args.end(), [](const te::Tensor& a) { return a.name() == "bias"; });
    if (has_bias_shift && !kernel_has_bias)
      throw unsupported(conv, "a bias without a fused bias epilogue");
  }

  // The int8 kernel of a QuantizedOp: the uint8 data (blocked as a conv reads it), the int8
  // weights packed, and the requantize epilogue's inputs. With the data's zero point zx the
  // kernel's int32 sum is that of x * w, i.e. (x - zx) * w + zx * sum(w): the bias takes
  // -zx * sum(w[k]) per output channel (a conv's padding taps read zx, so the same holds at the
  // borders). The scale is ONNX Runtime's, s_x * s_w[k] / s_y in float32.
  void bind_quantized(PlanStep& s, const frontend::Node& anchor,
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
    if (!q->weight_zero_point.empty())
      for (int64_t z : integer_constant(anchor, q->weight_zero_point).i64)
        if (z != 0) throw unsupported(anchor, "the weights' zero point is not 0");
    const auto value = [&](const std::string& t) { return scalar_constant(anchor, t); };
    const int64_t zx = q->data_zero_point.empty() ? 0 : std::llround(value(q->data_zero_point));
    const float sx = static_cast<float>(value(q->data_scale));
    const float sy = static_cast<float>(value(q->out_scale));
    const int32_t zy =
        q->out_zero_point.empty() ? 0 : static_cast<int32_t>(value(q->out_zero_point));
    const std::vector<float>& sw = constant(anchor, q->weight_scale).f32;
    const std::vector<int64_t>* b =
        q->bias.empty() ? nullptr : &integer_constant(anchor, q->bias).i64;
    if (b && static_cast<int64_t>(b->size()) != channels)
      throw unsupported(anchor, "a bias of another channel count");
    if (sw.size() != 1 && static_cast<int64_t>(sw.size()) != channels)
      throw unsupported(anchor, "a weight scale of another channel count");
    std::vector<int64_t> sum(static_cast<size_t>(channels), 0);
    for (size_t i = 0; i < w.i64.size(); ++i)
      sum[static_cast<size_t>(channels_first ? static_cast<int64_t>(i) / per_channel
                                             : static_cast<int64_t>(i) % channels)] += w.i64[i];
    std::vector<int32_t> bias(sum.size());
    std::vector<float> scale(sum.size());
    for (size_t k = 0; k < sum.size(); ++k) {
      bias[k] = static_cast<int32_t>((b ? (*b)[k] : 0) - zx * sum[k]);
      scale[k] = sx * sw[sw.size() == 1 ? 0 : k] / sy;
    }
    // A conv's data and output are channel-blocked (16 output channels per block); a matrix
    // product's are rows in ONNX's layout.
    const int64_t icb = q->conv ? s.task->args().get_int("ic_block") : 0;
    const int64_t out_block = q->conv ? 16 : 0;
    const std::vector<int8_t> packed =
        q->conv ? pack_conv_u8s8(w.i64, channels, w.shape.at(1), w.shape.at(2), w.shape.at(3), icb)
                : pack_gemm_b_u8s8(w.i64, per_channel, channels, q->nt);
    // The epilogue's per-channel inputs, zero past the last channel of a padded block.
    const auto padded = [](auto v, const te::Tensor& a) {
      v.resize(static_cast<size_t>(a.num_elements()));
      return v;
    };
    for (const te::Tensor& a : args) {
      const std::string& n = a.name();
      if (n == "I" || n == "A")
        s.args.push_back(form(q->data, icb));
      else if (n == "W" || n == "B")
        s.args.push_back(weight(q->weight + "@packed", a.shape(), packed, te::Int(8)));
      else if (n == "bias")
        s.args.push_back(weight(anchor.name + "@bias", a.shape(), padded(bias, a), te::Int(32)));
      else if (n == "scale")
        s.args.push_back(weight(anchor.name + "@scale", a.shape(), padded(scale, a)));
      else if (n == "zero_point")
        s.args.push_back(
            weight(anchor.name + "@zero_point", a.shape(), std::vector<int32_t>{zy}, te::Int(32)));
      else if (&a == &args.back())
        s.args.push_back(define(q->output, out_block));
      else
        throw unsupported(anchor, "kernel argument '" + n + "' has no binding");
    }
  }

  // An integer constant (int8, uint8, int32, int64 values).
  const frontend::ConstantValue& integer_constant(const frontend::Node& n,
                                                  const std::string& tensor) const {
    auto it = constants_.find(tensor);
    if (it == constants_.end() ||
        static_cast<int64_t>(it->second.i64.size()) != product(it->second.shape))
      throw unsupported(n, "input '" + tensor + "' is not an integer constant");
    return it->second;
  }

  // The value of a one-element constant, float or integer.
  double scalar_constant(const frontend::Node& n, const std::string& tensor) const {
    auto it = constants_.find(tensor);
    if (it != constants_.end() && it->second.f32.size() == 1) return it->second.f32.front();
    if (it != constants_.end() && it->second.i64.size() == 1)
      return static_cast<double>(it->second.i64.front());
    throw unsupported(n, "input '" + tensor + "' is not a one-element constant");
  }

  void bind_gemm(PlanStep& s, const frontend::Node& gemm, const frontend::TaskOccurrence& occ,
                 const std::string& out_name, const std::vector<te::Tensor>& args) {
    for (size_t j : occ.fused)
      if (g_.nodes[j].op == "BatchNormalization")
        throw unsupported(gemm, "BatchNormalization after a matrix product");
    const int64_t columns = known_shape(gemm.outputs.at(0)).back();
    const Affine affine = fused_affine(
        gemm, occ, columns, gemm.op == "Gemm" && gemm.inputs.size() > 2 ? gemm.inputs[2] : "");
    const std::string& residual = affine.residual;
    if (gemm.op == "Gemm" && (gemm.attrs.count("alpha") || gemm.attrs.count("beta"))) {
      const float alpha = gemm.attrs.count("alpha") ? gemm.attrs.at("alpha").floats.at(0) : 1.0f;
      const float beta = gemm.attrs.count("beta") ? gemm.attrs.at("beta").floats.at(0) : 1.0f;
      if (alpha != 1.0f || beta != 1.0f) throw unsupported(gemm, "alpha or beta other than 1");
    }
    for (const te::Tensor& a : args) {
      const std::string& n = a.name();
      const bool first = &a == &args.front();
      if (first) {
        s.args.push_back(form(gemm.inputs.at(0), 0));
      } else if (&a == &args.back()) {
        s.args.push_back(define(out_name, 0));
      } else if (n == "bias") {
        if (static_cast<int64_t>(affine.shift.size()) != a.num_elements())
          throw unsupported(gemm, "a bias that is not one value per column");
        s.args.push_back(weight(gemm.name + "@bias", a.shape(), affine.shift));
      } else if (n == "residual") {
        s.args.push_back(form(residual, 0));
      } else if (&a == &args[1]) {
        if (constants_.count(gemm.inputs.at(1))) {
          const auto& b = constant(gemm, gemm.inputs.at(1));
          if (product(b.shape) != a.num_elements())
            throw unsupported(gemm, "weights of an unexpected shape");
          s.args.push_back(weight(gemm.inputs.at(1), a.shape(), b.f32));
        } else {
          s.args.push_back(form(gemm.inputs.at(1), 0));
        }
      } else {
        throw unsupported(gemm, "kernel argument '" + n + "' has no binding");
      }
    }
    const bool kernel_has_bias = std::any_of(
        args.begin(), args.end(), [](const te::Tensor& a) { return a.name() == "bias"; });
    if (affine.shifted && !kernel_has_bias)
      throw unsupported(gemm, "a bias without a fused bias epilogue");
  }

  const frontend::Graph& g_;
  const std::map<std::string, frontend::ConstantValue> constants_;  // with folded DequantizeLinear
  const PlanOptions& options_;
  codegen::Target target_;
  frontend::ModelTasks tasks_;
  ModelPlan plan_;
  std::map<std::string, int64_t> current_;  // ONNX tensor -> its latest form
  std::map<std::pair<std::string, int64_t>, int64_t>
      forms_;  // (ONNX tensor, block) -> converted copy
  std::map<size_t, const frontend::LayerNormGroup*> layer_norm_at_;  // first node -> its group
};

}  // namespace

int64_t PlanTensor::elements() const {
  if (block == 0 || shape.size() != 4) return product(shape);
  const int64_t blocks = (shape[1] + block - 1) / block;
  return shape[0] * blocks * shape[2] * shape[3] * block;
}

int64_t PlanTensor::bytes() const { return elements() * dtype.bytes(); }

ModelPlan plan_model(const frontend::Graph& graph,
                     const std::map<std::string, frontend::ConstantValue>& constants,
                     const std::string& name, const PlanOptions& options) {
  return Planner(graph, constants, name, options).run();
}

}  // namespace ktune::deploy
