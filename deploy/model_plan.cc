// plan_model(): walks the graph in order, turning each node into kernel calls on planned tensors,
// then places the intermediate tensors in one arena. The tensor forms, views and generated kernels
// are here; tuned tasks are model_plan_tasks.cc's, the int8 path model_plan_int8.cc's.
#include "deploy/model_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "deploy/generated_schedule.h"
#include "deploy/model_nodes.h"
#include "deploy/model_ops.h"
#include "deploy/model_planner.h"
#include "frontend/model_tasks.h"
#include "frontend/op_params.h"
#include "frontend/operators.h"
#include "support/error.h"
#include "te/lower.h"

namespace ktune::deploy {
namespace {

// Channel-blocked data of `from` lanes in `to` lanes, in one pass (through NCHW it would take two):
// output lane l of block cb is channel cb*to + l, lane ch % from of input block ch / from; the
// lanes past c are zero.
te::LoweredFunc reblocked(const std::string& name, const std::vector<int64_t>& nchw, int64_t from,
                          int64_t to, te::DataType dtype) {
  const int64_t n = nchw.at(0), c = nchw.at(1), h = nchw.at(2), w = nchw.at(3);
  const int64_t in_blocks = (c + from - 1) / from, out_blocks = (c + to - 1) / to;
  if (to > from && to % from == 0) {
    // Whole input blocks side by side: the output seen as [n][ceil(c/to)][h][w][to/from][from]
    // (the same bytes) copies vectors of `from` lanes; those past the input's blocks are zero.
    te::Tensor in = te::placeholder({n, in_blocks, h, w, from}, dtype, "in");
    te::Tensor out = te::compute(
        {n, out_blocks, h, w, to / from, from},
        [&](const std::vector<te::Var>& i) {
          const te::Expr b = i[1] * (to / from) + i[4];
          return te::select(b < in_blocks,
                            in(i[0], te::min(b, te::Expr(in_blocks - 1)), i[2], i[3], i[5]),
                            te::cast(dtype, te::Expr(0)));
        },
        "out");
    te::Schedule s = te::create_schedule({out});
    s[out].vectorize(s[out].axis(5));
    parallel_leading(s[out], 3);
    return te::lower(s, {in, out}, name);
  }
  if (from > to && from % to == 0) {
    // An input block split in `from/to` output blocks: the input seen as
    // [n][ceil(c/from)][h][w][from/to][to], vectors of `to` lanes (the lanes past c are the
    // input's, zero).
    te::Tensor in = te::placeholder({n, in_blocks, h, w, from / to, to}, dtype, "in");
    te::Tensor out = te::compute(
        {n, out_blocks, h, w, to},
        [&](te::Var i, te::Var cb, te::Var y, te::Var x, te::Var l) {
          return in(i, cb / (from / to), y, x, cb % (from / to), l);
        },
        "out");
    te::Schedule s = te::create_schedule({out});
    s[out].vectorize(s[out].axis(4));
    parallel_leading(s[out], 3);
    return te::lower(s, {in, out}, name);
  }
  te::Tensor in = te::placeholder({n, in_blocks, h, w, from}, dtype, "in");
  te::Tensor out = te::compute(
      {n, out_blocks, h, w, to},
      [&](te::Var i, te::Var cb, te::Var y, te::Var x, te::Var l) {
        // The clamp keeps the read in bounds; the select writes the padding lanes as zeros.
        const te::Expr ch = te::min(cb * to + l, te::Expr(c - 1));
        return te::select(cb * to + l < c, in(i, ch / from, y, x, ch % from),
                          te::cast(dtype, te::Expr(0)));
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  parallel_leading(s[out], 3);
  return te::lower(s, {in, out}, name);
}

// Ops that only reinterpret their input's bytes (in ONNX's layout).
bool is_view(const std::string& op) { return frontend::in_family(op, frontend::OpFamily::kView); }

// The elementwise kernel's operator an ONNX op is, or "" when it is none.
std::string elementwise_of(const std::string& op) {
  const frontend::OperatorInfo* info = frontend::operator_info(op);
  const bool elementwise = info && (info->family == frontend::OpFamily::kUnary ||
                                    info->family == frontend::OpFamily::kBinary);
  return elementwise ? info->kernel : "";
}

}  // namespace

Planner::Planner(const frontend::Graph& g,
                 const std::map<std::string, frontend::ConstantValue>& constants,
                 const std::string& name, const PlanOptions& options)
    : g_(g),
      constants_(with_folded_dequantize(g, constants)),
      options_(options),
      target_(codegen::Target::parse(options.target)),
      tasks_(frontend::extract_tasks(g, target_traits(options.target))) {
  plan_.name = name;
}

ModelPlan Planner::run() {
  // Token ids come in as int64 or int32 (what exporters write for an embedding's indices);
  // everything else a model library takes and returns is float32.
  for (const std::string& name : g_.outputs)
    if (dtype_of(name) != te::Float(32))
      throw Error(ErrorKind::kUnsupported,
                  "graph output '" + name + "' is " + g_.type(name) +
                      ": a model library returns float32 (quantize inside the model)");
  for (const std::string& name : g_.inputs)
    if (const te::DataType t = dtype_of(name);
        t != te::Float(32) && t != te::Int(64) && t != te::Int(32))
      throw Error(ErrorKind::kUnsupported,
                  "graph input '" + name + "' is " + g_.type(name) +
                      ": a model library takes float32, or int64 / int32 indices (quantize "
                      "inside the model)");
  for (size_t i = 0; i < g_.inputs.size(); ++i) {
    PlanTensor t{g_.inputs[i], known_shape(g_.inputs[i]), 0, Storage::kInput,
                 static_cast<int64_t>(i)};
    t.dtype = dtype_of(t.name);
    current_[t.name] = add(t);
    plan_.inputs.push_back(current_[t.name]);
  }
  std::map<size_t, const frontend::TaskOccurrence*> anchors;
  std::set<size_t> fused;
  const auto absorb = [&](size_t node, const std::vector<size_t>& others) {
    group_[node].insert(group_[node].end(), others.begin(), others.end());
    fused.insert(others.begin(), others.end());
  };
  for (const auto& occ : tasks_.occurrences) {
    anchors[occ.node] = &occ;
    absorb(occ.node, occ.fused);
    absorb(occ.node, occ.prologue);
  }
  for (const auto& a : tasks_.quantized_adds) {
    quantized_add_at_[a.node] = &a;
    absorb(a.node, a.prologue);
    absorb(a.node, a.epilogue);
  }
  for (const auto& p : tasks_.quantized_max_pools) {
    quantized_max_pool_at_[p.node] = &p;
    absorb(p.node, {p.dequantize, p.quantize});
  }
  for (const auto& p : tasks_.quantized_global_pools) {
    quantized_global_pool_at_[p.node] = &p;
    absorb(p.node, p.prologue);
    absorb(p.node, p.epilogue);
  }
  for (const auto& c : tasks_.generated_convs) {
    generated_conv_at_[c.node] = &c;
    absorb(c.node, c.epilogue.nodes);
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
  // A Softmax of scaled scores scales them as it reads them, where the Softmax is.
  for (const auto& m : tasks_.scaled_softmaxes) {
    scaled_softmax_at_[m.softmax] = &m;
    absorb(m.softmax, {m.scale_node});
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
        if (!ready(*it)) continue;
        plan_or_block(*it, a == anchors.end() ? nullptr : a->second);
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
  if (!blocked_.empty()) {
    if (options_.verdict_only) return std::move(plan_);
    throw Error(ErrorKind::kUnsupported, blocked_text(blocked_));
  }
  std::set<int64_t> written_in_place;
  for (size_t j = 0; j < g_.outputs.size(); ++j) {
    const int64_t from = form(g_.outputs[j], 0);
    const int64_t root = plan_.tensors[from].alias_of >= 0 ? plan_.tensors[from].alias_of : from;
    if (writable_as_output(root) && written_in_place.insert(root).second) {
      // Its step writes the caller's buffer (a view of it, such as an Identity, reads it there):
      // no copy after it.
      PlanTensor& t = plan_.tensors[static_cast<size_t>(root)];
      t.storage = Storage::kOutput;
      t.index = static_cast<int64_t>(j);
      plan_.outputs.push_back(from);
      continue;
    }
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

bool Planner::writable_as_output(int64_t id) const {
  const PlanTensor& t = plan_.tensors[static_cast<size_t>(id)];
  if (t.storage != Storage::kArena || t.alias_of >= 0 || t.block != 0 || t.dtype != te::Float(32))
    return false;
  for (const PlanTensor& other : plan_.tensors)
    if (other.alias_of == id && (other.view_offset != 0 || other.elements() != t.elements()))
      return false;  // a part of it: its offset has no meaning in another buffer
  int writers = 0;
  for (const PlanStep& step : plan_.steps)
    if (!step.args.empty() && step.args.back() == id) ++writers;
  return writers == 1;
}

bool Planner::ready(size_t i) const {
  std::vector<size_t> nodes = {i};
  if (auto g = group_.find(i); g != group_.end())
    nodes.insert(nodes.end(), g->second.begin(), g->second.end());
  std::set<std::string> inside;
  for (size_t k : nodes) inside.insert(g_.nodes[k].outputs.begin(), g_.nodes[k].outputs.end());
  for (size_t k : nodes)
    for (const std::string& in : g_.nodes[k].inputs)
      if (!in.empty() && !inside.count(in) && !constants_.count(in) && !g_.constants.count(in) &&
          !current_.count(in) && !deferred_views_.count(in))
        return false;
  return true;
}

void Planner::plan_or_block(size_t i, const frontend::TaskOccurrence* occ) {
  try {
    plan_node(i, occ);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kUnsupported) throw;
    const frontend::Node& n = g_.nodes[i];
    std::string why = e.what();
    const std::string prefix = "node '" + n.name + "' (" + n.op + "): ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    // What it and the nodes it absorbs would define exists, so that every node after it is
    // planned too and the refusal lists them all.
    std::vector<size_t> nodes = {i};
    if (auto g = group_.find(i); g != group_.end())
      nodes.insert(nodes.end(), g->second.begin(), g->second.end());
    blocked_.push_back({n.name, n.op, why, nodes.size()});
    for (size_t k : nodes)
      for (const std::string& out : g_.nodes[k].outputs)
        if (!out.empty() && !current_.count(out) && g_.shape(out)) {
          PlanTensor t{out, *g_.shape(out), 0};
          current_[out] = add(std::move(t));
        }
  }
}

void Planner::plan_node(size_t i, const frontend::TaskOccurrence* occ) {
  const frontend::Node& n = g_.nodes[i];
  if (occ) {
    plan_task(*occ);
  } else if (auto c = generated_conv_at_.find(i); c != generated_conv_at_.end()) {
    plan_conv_blocked(*c->second);
  } else if (auto a = quantized_add_at_.find(i); a != quantized_add_at_.end()) {
    plan_quantized_add(*a->second);
  } else if (auto p = quantized_max_pool_at_.find(i); p != quantized_max_pool_at_.end()) {
    plan_quantized_max_pool(*p->second);
  } else if (auto gp = quantized_global_pool_at_.find(i); gp != quantized_global_pool_at_.end()) {
    plan_quantized_global_pool(*gp->second);
  } else if (auto ln = layer_norm_at_.find(i); ln != layer_norm_at_.end()) {
    plan_generated(describe_layer_norm(g_, *ln->second, constants_));
  } else if (auto sm = scaled_softmax_at_.find(i); sm != scaled_softmax_at_.end()) {
    plan_generated(describe_scaled_softmax(g_, *sm->second));
  } else if (n.op == "QuantizeLinear" && n.domain.empty() && plan_blocked_quantize(n)) {
    // planned in the int8 convs' layout
  } else if (defer_blocked_view(n) || plan_blocked_transpose(n)) {
    // a Transpose (of a Reshape) of a blocked tensor: one kernel from the blocked layout
  } else if (is_view(n.op) || frontend::transpose_is_view(g_, n)) {
    plan_view(n);
  } else if (plan_channel_broadcast(n)) {
    // one pass in the channel-blocked layout
  } else if (plan_blocked_resize(n) || plan_blocked_batch_norm(n)) {
    // in the layout its producer wrote
  } else if (plan_concat_in_place(n) || plan_split_as_views(n) || plan_slice_as_view(n)) {
    // slices of one buffer
  } else if (auto steps = describe_node(g_, n, constants_); !steps.empty()) {
    for (const GeneratedStep& step : steps) plan_generated(step);
  } else if (!elementwise_of(n.op).empty()) {
    plan_elementwise(n);
  } else if ((n.op == "MaxPool" || n.op == "AveragePool") && n.domain.empty() &&
             n.outputs.size() == 1) {
    plan_pool(n);
  } else if (n.op == "DepthToSpace" && n.domain.empty()) {
    plan_depth_to_space(n);
  } else {
    throw unsupported(n, reason_of(n));
  }
}

Error Planner::unsupported(const frontend::Node& n, const std::string& why) const {
  return Error(ErrorKind::kUnsupported, "node '" + n.name + "' (" + n.op + "): " + why);
}

std::string Planner::reason_of(const frontend::Node& n) const {
  for (const auto& u : tasks_.unsupported)
    if (u.op == n.op && std::find(u.layers.begin(), u.layers.end(), n.name) != u.layers.end())
      return u.reason == "no template" ? "no template or generated kernel computes " + n.op
                                       : u.reason;
  return "no kernel for this operator";
}

std::vector<int64_t> Planner::known_shape(const std::string& tensor) const {
  auto s = g_.shape(tensor);
  if (!s)
    throw Error(ErrorKind::kInvalidArgument,
                "tensor '" + tensor + "' has no known shape (give --input NAME=SHAPE)");
  return *s;
}

const frontend::ConstantValue& Planner::constant(const frontend::Node& n,
                                                 const std::string& tensor) const {
  auto it = constants_.find(tensor);
  if (it == constants_.end() || (it->second.f32.empty() && product(it->second.shape) > 0))
    throw unsupported(n, "input '" + tensor + "' is not a float32 constant");
  return it->second;
}

std::string Planner::symbol(const std::string& what) const {
  return plan_.name + "_" + std::to_string(plan_.steps.size()) + "_" + what;
}

int64_t Planner::add(PlanTensor t) {
  plan_.tensors.push_back(std::move(t));
  return static_cast<int64_t>(plan_.tensors.size()) - 1;
}

int64_t Planner::written_block(const std::string& onnx) const {
  auto cur = current_.find(onnx);
  const int64_t block =
      cur == current_.end() ? 0 : plan_.tensors[static_cast<size_t>(cur->second)].block;
  return block > 0 ? block : kGeneratedBlock;
}

int64_t Planner::form(const std::string& onnx, int64_t block) {
  auto cur = current_.find(onnx);
  if (cur == current_.end()) {
    if (constants_.count(onnx))
      throw Error(ErrorKind::kUnsupported, "constant '" + onnx + "' used as an activation");
    throw Error(ErrorKind::kInvalidArgument, "tensor '" + onnx + "' is read before it is computed");
  }
  const PlanTensor& have = plan_.tensors[cur->second];
  if (have.block == block) return cur->second;
  auto made = forms_.find({onnx, block});
  if (made != forms_.end()) return made->second;
  if (same_bytes(have, block)) {
    // The same bytes read in the other layout: a view, no kernel.
    PlanTensor t{block ? onnx + "@c" + std::to_string(block) : onnx, have.shape, block};
    t.dtype = have.dtype;
    t.alias_of = have.alias_of >= 0 ? have.alias_of : cur->second;
    t.view_offset = have.view_offset;
    const int64_t to = add(t);
    forms_[{onnx, block}] = to;
    return to;
  }
  if (have.shape.size() != 4)
    throw Error(ErrorKind::kUnsupported, "tensor '" + onnx + "' is not 4-D and cannot be blocked");
  const int64_t from = cur->second, from_block = have.block;
  PlanTensor t{block ? onnx + "@c" + std::to_string(block) : onnx, have.shape, block};
  t.dtype = have.dtype;
  const int64_t to = add(t);  // `have` may move with plan_.tensors from here on
  PlanStep s;
  s.layer = "layout " + onnx;
  s.kind = "layout";
  s.symbol = symbol(block ? "to_nchw" + std::to_string(block) + "c" : "to_nchw");
  if (from_block != 0 && block != 0)
    s.func = reblocked(s.symbol, t.shape, from_block, block, t.dtype);
  else if (block != 0)
    s.func = to_blocked(s.symbol, t.shape, block, t.dtype);
  else
    s.func = from_blocked(s.symbol, t.shape, from_block, t.dtype);
  s.args = {from, to};
  plan_.steps.push_back(std::move(s));
  forms_[{onnx, block}] = to;
  return to;
}

te::DataType Planner::dtype_of(const std::string& onnx) const {
  const std::string t = g_.type(onnx);
  if (t.empty() || t == "float32") return te::Float(32);
  if (t == "uint8") return te::UInt(8);
  if (t == "int8") return te::Int(8);
  if (t == "int32") return te::Int(32);
  if (t == "int64") return te::Int(64);
  throw Error(ErrorKind::kUnsupported,
              "tensor '" + onnx + "' is " + t +
                  " (model builds compute float32, uint8, int8, int32, and read int64 indices)");
}

int64_t Planner::define(const std::string& onnx, int64_t block) {
  PlanTensor t{onnx, known_shape(onnx), block};
  t.dtype = dtype_of(onnx);
  const int64_t id = add(std::move(t));
  current_[onnx] = id;
  return id;
}

bool Planner::blocked_is_nchw(const PlanTensor& t) {
  return t.block > 0 && t.shape.size() == 4 && t.shape[2] == 1 && t.shape[3] == 1 &&
         (t.shape[0] == 1 || t.shape[1] % t.block == 0);
}

bool Planner::same_bytes(const PlanTensor& t, int64_t block) {
  if (t.shape.size() != 4) return false;
  const auto nchw = [](int64_t b) { return b == 1 ? 0 : b; };  // a block of 1 is NCHW itself
  if (nchw(t.block) == nchw(block)) return true;
  if (nchw(block) == 0) return blocked_is_nchw(t);
  // [N, C, 1, 1] in whole blocks read blocked: its lanes are its channels in order.
  return nchw(t.block) == 0 && t.shape[2] == 1 && t.shape[3] == 1 && t.shape[1] % block == 0;
}

void Planner::plan_view(const frontend::Node& n) { view(n.inputs.at(0), n.outputs.at(0), n); }

void Planner::view(const std::string& from, const std::string& to, const frontend::Node& n) {
  const int64_t src = form(from, 0);
  PlanTensor t{to, known_shape(to)};
  t.dtype = plan_.tensors[src].dtype;
  t.alias_of = plan_.tensors[src].alias_of >= 0 ? plan_.tensors[src].alias_of : src;
  t.view_offset = plan_.tensors[src].view_offset;
  if (product(t.shape) != product(plan_.tensors[src].shape))
    throw unsupported(n, "a view that changes the element count");
  current_[t.name] = add(t);
}

void Planner::plan_elementwise(const frontend::Node& n) {
  ElementwiseOp op{elementwise_of(n.op)};
  if (op.op == "clip") {
    try {
      const frontend::ClipBounds b = frontend::read_clip(g_, n, frontend::lookup_in(constants_));
      op.min = static_cast<float>(b.lo);
      op.max = static_cast<float>(b.hi);
    } catch (const Error& e) {
      throw unsupported(n, e.what());
    }
  }
  // The activations' attributes, with ONNX's defaults.
  if (op.op == "hardsigmoid") {
    op.alpha = static_cast<float>(n.float_or("alpha", 0.2));
    op.beta = static_cast<float>(n.float_or("beta", 0.5));
  } else if (op.op == "leaky_relu") {
    op.alpha = static_cast<float>(n.float_or("alpha", 0.01));
  } else if (op.op == "elu") {
    op.alpha = static_cast<float>(n.float_or("alpha", 1.0));
  } else if (op.op == "selu") {
    op.alpha = static_cast<float>(n.float_or("alpha", 1.67326319217681884765625));
    op.beta = static_cast<float>(n.float_or("gamma", 1.05070102214813232421875));
  } else if (op.op == "gelu_erf") {
    const std::string approximate = n.text_or("approximate", "none");
    if (approximate == "tanh")
      op.op = "gelu_tanh";
    else if (approximate != "none")
      throw unsupported(n, "approximate='" + approximate + "'");
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

void Planner::plan_generated(const GeneratedStep& g) {
  PlanStep s;
  s.layer = g.layer;
  s.kind = "elementwise";
  s.symbol = symbol(g.what);
  for (const StepOperand& in : g.inputs) {
    s.args.push_back(in.constant ? weight(in.tensor, in.shape, in.data) : form(in.tensor, 0));
    PlanTensor& t = plan_.tensors[static_cast<size_t>(s.args.back())];
    // A graph input of indices into a table: random inputs stay below its rows.
    if (g.index_rows > 0 && !in.constant && t.storage == Storage::kInput && !t.dtype.is_float())
      t.values_below = t.values_below > 0 ? std::min(t.values_below, g.index_rows) : g.index_rows;
  }
  s.args.push_back(define(g.output, 0));
  s.func = g.kernel(s.symbol);
  plan_.steps.push_back(std::move(s));
}

int64_t PlanTensor::elements() const {
  if (block == 0 || shape.size() != 4) return Planner::product(shape);
  const int64_t blocks = (shape[1] + block - 1) / block;
  return shape[0] * blocks * shape[2] * shape[3] * block;
}

int64_t PlanTensor::bytes() const { return elements() * dtype.bytes(); }

std::string blocked_text(const std::vector<BlockedNode>& blocked) {
  std::string text = std::to_string(blocked.size()) +
                     (blocked.size() == 1 ? " node cannot" : " nodes cannot") + " be built:";
  for (const BlockedNode& b : blocked)
    text += " node '" + b.node + "' (" + b.op + "): " + b.reason + ";";
  text.pop_back();
  return text;
}

std::vector<BlockedNode> plan_verdict(
    const frontend::Graph& graph, const std::map<std::string, frontend::ConstantValue>& constants,
    const std::string& target) {
  PlanOptions options;
  options.target = target;
  options.verdict_only = true;
  Planner planner(graph, constants, "verdict", options);
  planner.run();
  return planner.blocked();
}

size_t untune_generated_tasks(frontend::ModelTasks& tasks, const frontend::Graph& graph,
                              const std::map<std::string, frontend::ConstantValue>& constants,
                              const std::string& target) {
  PlanOptions options;
  options.target = target;
  options.verdict_only = true;
  Planner planner(graph, constants, "verdict", options);
  const ModelPlan plan = planner.run();
  std::set<std::string> from_template, generated;
  for (const PlanStep& s : plan.steps)
    if (s.task) (s.kind == "task" ? from_template : generated).insert(s.task->workload_key());
  size_t marked = 0;
  for (frontend::ModelTask& t : tasks.tasks) {
    if (!t.tunable) continue;
    const std::string key = t.tunable->workload_key();
    if (!generated.count(key) || from_template.count(key)) continue;
    t.mark_built_generated(
        "a model build runs it as a generated kernel: a pool on channel-blocked data runs "
        "blocked");
    ++marked;
  }
  return marked;
}

StepSources step_sources(const ModelPlan& plan) {
  StepSources n;
  for (const PlanStep& s : plan.steps) {
    if (!s.choice) {
      ++n.generated;
      continue;
    }
    switch (s.choice->source) {
      case ConfigChoice::Source::kTuned:
        ++n.tuned;
        if (s.choice->on_fallback_config()) ++n.tuned_fallback_config;
        break;
      case ConfigChoice::Source::kNearest:
        ++n.nearest;
        break;
      case ConfigChoice::Source::kFallback:
        ++n.fallback;
        break;
    }
  }
  return n;
}

ModelPlan plan_model(const frontend::Graph& graph,
                     const std::map<std::string, frontend::ConstantValue>& constants,
                     const std::string& name, const PlanOptions& options) {
  return Planner(graph, constants, name, options).run();
}

}  // namespace ktune::deploy
