// Epilogue fusion: the elementwise nodes after a conv or matmul that its template computes in the
// same kernel.
#include "frontend/epilogue_fusion.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "frontend/op_params.h"
#include "support/error.h"

namespace ktune::frontend {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

EpilogueFuser::EpilogueFuser(const Graph& graph) : g_(graph) {
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    for (const auto& in : g_.nodes[i].inputs)
      if (!in.empty()) consumers_[in].push_back(i);
    for (const auto& out : g_.nodes[i].outputs) producer_[out] = i;
  }
  graph_outputs_.insert(g_.outputs.begin(), g_.outputs.end());
  fused_.assign(g_.nodes.size(), false);
}

std::optional<std::vector<size_t>> EpilogueFuser::consumers(const std::string& tensor) const {
  if (graph_outputs_.count(tensor)) return std::nullopt;
  std::vector<size_t> out;
  auto it = consumers_.find(tensor);
  if (it != consumers_.end())
    for (size_t n : it->second)
      if (!fused_[n] && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

// The one node that reads `tensor`, when exactly one does and the tensor is not a graph output
// (a tensor someone else reads cannot disappear into a fused kernel). Nodes another kernel
// already fused are not offered again.
std::optional<size_t> EpilogueFuser::single_consumer(const std::string& tensor) const {
  auto it = consumers_.find(tensor);
  if (it == consumers_.end() || it->second.size() != 1 || graph_outputs_.count(tensor))
    return std::nullopt;
  if (fused_[it->second.front()]) return std::nullopt;
  return it->second.front();
}

bool EpilogueFuser::depends_on(const std::string& tensor, size_t anchor) const {
  std::vector<std::string> stack = {tensor};
  std::set<size_t> seen;
  while (!stack.empty()) {
    const std::string t = stack.back();
    stack.pop_back();
    auto p = producer_.find(t);
    if (p == producer_.end() || !seen.insert(p->second).second) continue;
    if (p->second == anchor) return true;
    for (const auto& in : g_.nodes[p->second].inputs) stack.push_back(in);
  }
  return false;
}

bool EpilogueFuser::per_channel(const std::string& tensor, const std::vector<int64_t>& out,
                                size_t axis) const {
  const auto s = g_.shape(tensor);
  if (!constant(tensor) || !s || s->size() > out.size() || axis >= out.size()) return false;
  // One value (a scalar, [1, 1, 1, 1]) is the same for every channel.
  if (std::all_of(s->begin(), s->end(), [](int64_t d) { return d == 1; })) return true;
  // Broadcasting aligns the trailing dimensions.
  const size_t lead = out.size() - s->size();
  for (size_t d = 0; d < s->size(); ++d) {
    const int64_t want = lead + d == axis ? out[axis] : 1;
    if ((*s)[d] != want) return false;
  }
  return lead <= axis;  // the channel axis is covered by the constant
}

std::optional<EpilogueFuser::Activation> EpilogueFuser::clip(size_t node) const {
  ClipBounds bounds{};
  try {
    bounds = read_clip(g_, g_.nodes[node], lookup_in(g_));
  } catch (const Error&) {
    return std::nullopt;  // a bound that is no constant scalar: the Clip runs on its own
  }
  const double lo = bounds.lo, hi = bounds.hi;
  if (lo > hi) return std::nullopt;
  if (lo == 0 && hi == 6) return Activation{"relu6", {}, {node}};
  if (lo == 0 && hi == kInf) return Activation{"relu", {}, {node}};
  Activation a{"clip", {}, {node}};
  if (lo != -kInf) a.args["clip_min"] = float32_text(lo);
  if (hi != kInf) a.args["clip_max"] = float32_text(hi);
  return a;
}

std::optional<EpilogueFuser::Activation> EpilogueFuser::gated(const std::string& tensor) const {
  const auto readers = consumers(tensor);
  if (!readers || readers->size() != 2 || consumers_.at(tensor).size() != 2) return std::nullopt;
  for (int first = 0; first < 2; ++first) {
    const size_t f = (*readers)[static_cast<size_t>(first)],
                 m = (*readers)[static_cast<size_t>(1 - first)];
    const Node& gate = g_.nodes[f];
    const Node& mul = g_.nodes[m];
    if (!gate.domain.empty() || !mul.domain.empty() || mul.op != "Mul" || mul.inputs.size() != 2)
      continue;
    if (gate.inputs.empty() || gate.inputs[0] != tensor || gate.outputs.size() != 1) continue;
    const std::string& g = gate.outputs[0];
    if (single_consumer(g) != m) continue;
    if (!((mul.inputs[0] == tensor && mul.inputs[1] == g) ||
          (mul.inputs[1] == tensor && mul.inputs[0] == g)))
      continue;
    if (gate.op == "Sigmoid") return Activation{"silu", {}, {f, m}};
    // HardSigmoid(x) = clamp(alpha x + beta, 0, 1); with alpha = 1/6 and beta = 1/2,
    // x * HardSigmoid(x) = x * relu6(x + 3) / 6, ONNX's HardSwish.
    if (gate.op == "HardSigmoid" && std::fabs(gate.float_or("alpha", 0.2) - 1.0 / 6.0) < 1e-6 &&
        std::fabs(gate.float_or("beta", 0.5) - 0.5) < 1e-6)
      return Activation{"hardswish", {}, {f, m}};
  }
  return std::nullopt;
}

std::optional<double> EpilogueFuser::scalar(const std::string& tensor) const {
  auto v = g_.values.find(tensor);
  if (v == g_.values.end() || v->second.size() != 1) return std::nullopt;
  return v->second[0];
}

std::optional<size_t> EpilogueFuser::sole_reader(size_t n, const char* op) const {
  const auto c = single_consumer(g_.nodes[n].outputs.at(0));
  if (!c || g_.nodes[*c].op != op || !g_.nodes[*c].domain.empty()) return std::nullopt;
  return c;
}

std::optional<std::string> EpilogueFuser::other_operand(size_t n, const std::string& x) const {
  const Node& node = g_.nodes[n];
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return std::nullopt;
  if (node.inputs[0] == x) return node.inputs[1];
  if (node.inputs[1] == x) return node.inputs[0];
  return std::nullopt;
}

bool EpilogueFuser::is(const std::optional<std::string>& tensor, double want) const {
  const auto v = tensor ? scalar(*tensor) : std::nullopt;
  return v && std::fabs(*v - want) <= 1e-6 * std::fabs(want);
}

std::optional<EpilogueFuser::Activation> EpilogueFuser::gelu_erf(const std::string& tensor) const {
  const auto readers = consumers(tensor);
  if (!readers || readers->size() != 2 || consumers_.at(tensor).size() != 2) return std::nullopt;
  const auto next = [&](size_t n, const char* op) { return sole_reader(n, op); };
  const auto other = [&](size_t n, const std::string& x) { return other_operand(n, x); };
  const auto near = [&](const std::optional<std::string>& t, double want) { return is(t, want); };
  constexpr double kSqrt2 = 1.4142135623730951;
  for (int first = 0; first < 2; ++first) {
    const size_t d = (*readers)[static_cast<size_t>(first)],
                 m = (*readers)[static_cast<size_t>(1 - first)];
    const Node& scale = g_.nodes[d];
    // x / sqrt(2) (or x * (1 / sqrt(2))) -> Erf -> + 1.
    const bool divides = scale.op == "Div" && scale.inputs.size() == 2 &&
                         scale.inputs[0] == tensor && near(scale.inputs[1], kSqrt2);
    if (!scale.domain.empty() ||
        !(divides || (scale.op == "Mul" && near(other(d, tensor), 1 / kSqrt2))))
      continue;
    const auto erf = next(d, "Erf");
    const auto plus = erf ? next(*erf, "Add") : std::nullopt;
    if (!plus || !near(other(*plus, g_.nodes[*erf].outputs.at(0)), 1.0)) continue;
    if (const auto end = times_half_x(tensor, m, *plus))
      return Activation{"gelu_erf", {}, {d, *erf, *plus, m, (*end)[1]}};
  }
  return std::nullopt;
}

std::optional<std::vector<size_t>> EpilogueFuser::times_half_x(const std::string& tensor, size_t m,
                                                               size_t plus) const {
  const Node& mul = g_.nodes[m];
  const std::string& one_plus = g_.nodes[plus].outputs.at(0);
  const auto x_times = other_operand(m, tensor);
  if (mul.op != "Mul" || !mul.domain.empty() || !x_times) return std::nullopt;
  const std::string& mul_out = mul.outputs.at(0);
  // x * (1 + f) * 0.5, or (x * 0.5) * (1 + f), as exporters write either.
  if (*x_times == one_plus && single_consumer(one_plus) == m) {
    const auto half = sole_reader(m, "Mul");
    if (half && is(other_operand(*half, mul_out), 0.5)) return std::vector<size_t>{m, *half};
  } else if (is(x_times, 0.5)) {
    const auto last = sole_reader(plus, "Mul");
    if (last && other_operand(*last, one_plus) == mul_out && single_consumer(mul_out) == last)
      return std::vector<size_t>{m, *last};
  }
  return std::nullopt;
}

std::optional<EpilogueFuser::Activation> EpilogueFuser::gelu_tanh(const std::string& x) const {
  const auto readers = consumers(x);
  if (!readers || readers->size() < 3) return std::nullopt;
  const auto out = [&](size_t n) -> const std::string& { return g_.nodes[n].outputs.at(0); };
  const auto is_op = [&](size_t n, const char* op) {
    return g_.nodes[n].op == op && g_.nodes[n].domain.empty() && g_.nodes[n].inputs.size() == 2;
  };
  // x^3: Pow(x, 3), or x * x then times x.
  std::vector<size_t> nodes;
  for (size_t r : *readers) {
    const Node& n = g_.nodes[r];
    if (is_op(r, "Pow") && n.inputs[0] == x && is(n.inputs[1], 3.0)) {
      nodes = {r};
      break;
    }
    if (is_op(r, "Mul") && n.inputs[0] == x && n.inputs[1] == x) {
      const auto cube = sole_reader(r, "Mul");
      if (cube && other_operand(*cube, out(r)) == x) {
        nodes = {r, *cube};
        break;
      }
    }
  }
  if (nodes.empty()) return std::nullopt;
  const auto kappa = sole_reader(nodes.back(), "Mul");
  if (!kappa || !is(other_operand(*kappa, out(nodes.back())), 0.044715)) return std::nullopt;
  const auto inner = sole_reader(*kappa, "Add");
  if (!inner || other_operand(*inner, out(*kappa)) != x) return std::nullopt;
  const auto scaled = sole_reader(*inner, "Mul");
  if (!scaled || !is(other_operand(*scaled, out(*inner)), std::sqrt(2 / std::numbers::pi)))
    return std::nullopt;
  const auto tanh = sole_reader(*scaled, "Tanh");
  const auto plus = tanh ? sole_reader(*tanh, "Add") : std::nullopt;
  if (!plus || !is(other_operand(*plus, out(*tanh)), 1.0)) return std::nullopt;
  nodes.insert(nodes.end(), {*kappa, *inner, *scaled, *tanh, *plus});
  // The one reader of x left is the product with x; x has no reader outside the pattern.
  std::vector<size_t> left;
  for (size_t r : *readers)
    if (std::find(nodes.begin(), nodes.end(), r) == nodes.end()) left.push_back(r);
  if (left.size() != 1) return std::nullopt;
  size_t reads = 0;
  for (size_t n : nodes)
    reads +=
        static_cast<size_t>(std::count(g_.nodes[n].inputs.begin(), g_.nodes[n].inputs.end(), x));
  if (consumers_.at(x).size() != reads + 1) return std::nullopt;
  const auto end = times_half_x(x, left[0], *plus);
  if (!end) return std::nullopt;
  nodes.insert(nodes.end(), end->begin(), end->end());
  return Activation{"gelu", {}, nodes};
}

std::optional<EpilogueFuser::Activation> EpilogueFuser::hardswish_arithmetic(
    const std::string& tensor) const {
  const auto readers = consumers(tensor);
  if (!readers || readers->size() != 2 || consumers_.at(tensor).size() != 2) return std::nullopt;
  const auto other = [&](size_t n, const std::string& x) -> std::optional<std::string> {
    return g_.nodes[n].domain.empty() ? other_operand(n, x) : std::nullopt;
  };
  for (int first = 0; first < 2; ++first) {
    const size_t a = (*readers)[static_cast<size_t>(first)],
                 m = (*readers)[static_cast<size_t>(1 - first)];
    if (g_.nodes[a].op != "Add" || !is(other(a, tensor), 3.0)) continue;
    const auto c = sole_reader(a, "Clip");
    const auto six = c ? clip(*c) : std::nullopt;
    if (!six || six->step != "relu6" || g_.nodes[*c].inputs.at(0) != g_.nodes[a].outputs.at(0))
      continue;
    if (g_.nodes[m].op != "Mul" || other(m, tensor) != g_.nodes[*c].outputs.at(0) ||
        single_consumer(g_.nodes[*c].outputs.at(0)) != m)
      continue;
    const std::string& product = g_.nodes[m].outputs.at(0);
    const auto by = single_consumer(product);
    if (!by) continue;
    const Node& last = g_.nodes[*by];
    const bool divides = last.op == "Div" && last.inputs.size() == 2 && last.inputs[0] == product &&
                         is(last.inputs[1], 6.0);
    if (last.domain.empty() && (divides || (last.op == "Mul" && is(other(*by, product), 1 / 6.0))))
      // The Clip listed first: a model build takes fused Adds before an activation's first
      // other node for a bias or a residual (deploy/model_plan_tasks.cc).
      return Activation{"hardswish", {}, {*c, a, m, *by}};
  }
  return std::nullopt;
}

std::optional<EpilogueFuser::Activation> EpilogueFuser::activation(
    const std::string& tensor) const {
  if (const auto next = single_consumer(tensor)) {
    const Node& n = g_.nodes[*next];
    if (!n.domain.empty() || n.inputs.empty() || n.inputs[0] != tensor) return std::nullopt;
    if (n.op == "Relu") return Activation{"relu", {}, {*next}};
    if (n.op == "HardSwish") return Activation{"hardswish", {}, {*next}};
    if (n.op == "Sigmoid") return Activation{"sigmoid", {}, {*next}};
    if (n.op == "Clip") return clip(*next);
    // The parameters ONNX's defaults leave out of the workload key.
    auto param = [&](Activation& a, const char* arg, const char* attribute, double onnx_default) {
      const std::string text = float32_text(n.float_or(attribute, onnx_default));
      if (text != float32_text(onnx_default)) a.args[arg] = text;
    };
    if (n.op == "LeakyRelu") {
      Activation a{"leaky_relu", {}, {*next}};
      param(a, "leaky_alpha", "alpha", 0.01);
      return a;
    }
    if (n.op == "HardSigmoid") {
      Activation a{"hardsigmoid", {}, {*next}};
      param(a, "hardsigmoid_alpha", "alpha", 0.2);
      param(a, "hardsigmoid_beta", "beta", 0.5);
      return a;
    }
    return std::nullopt;
  }
  if (auto g = gelu_erf(tensor)) return g;
  if (auto g = gelu_tanh(tensor)) return g;
  if (auto h = hardswish_arithmetic(tensor)) return h;
  return gated(tensor);
}

std::optional<int64_t> EpilogueFuser::nearest_upsample(const std::string& tensor,
                                                       size_t join) const {
  const auto p = producer_.find(tensor);
  if (p == producer_.end() || fused_[p->second] || single_consumer(tensor) != join)
    return std::nullopt;
  const Node& n = g_.nodes[p->second];
  if (!n.domain.empty() || (n.op != "Resize" && n.op != "Upsample")) return std::nullopt;
  const auto in = g_.shape(n.inputs.at(0)), out = g_.shape(tensor);
  if (!in || !out || in->size() != 4 || out->size() != 4 || (*in)[0] != (*out)[0] ||
      (*in)[1] != (*out)[1] || (*in)[2] < 1)
    return std::nullopt;
  const int64_t f = (*out)[2] / (*in)[2];
  if (f < 2 || f > 16 || (*out)[2] != (*in)[2] * f || (*out)[3] != (*in)[3] * f)
    return std::nullopt;
  // Which input index each output index reads follows from the mode, the coordinate transform
  // and the rounding together (half_pixel with round_prefer_floor is y / 2 at f = 2, not at 3):
  // compare the indices themselves.
  try {
    const ResizeParams r = read_resize(g_, n, lookup_in(g_));
    if (r.mode != "nearest") return std::nullopt;
    for (const ResizeAxis& axis : resize_spatial_axes(r, *in, *out))
      for (size_t y = 0; y < axis.index0.size(); ++y)
        if (axis.index0[y] != static_cast<int64_t>(y) / f) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;  // a form the model build refuses with its own error
  }
  return f;
}

FusedEpilogue EpilogueFuser::fuse(size_t anchor, bool has_bias, AnchorKind kind,
                                  bool upsampled_residual) {
  FusedEpilogue f;
  bool bias = has_bias;
  std::string residual;  // "", or the step that joins it: add or max
  std::string cur = g_.nodes[anchor].outputs.front();
  const auto out_shape = g_.shape(cur);
  const size_t channel_axis = kind == AnchorKind::kConv ? 1 : out_shape ? out_shape->size() - 1 : 0;
  auto next = single_consumer(cur);
  auto take = [&](size_t node) {
    fused_[node] = true;
    f.nodes.push_back(node);
    cur = g_.nodes[node].outputs.front();
    next = single_consumer(cur);
  };
  // Inference-mode BN is a per-channel scale (folded into the weights) and shift (a bias).
  const auto batch_norm = [&] {
    return next && g_.nodes[*next].op == "BatchNormalization" &&
           g_.nodes[*next].inputs.front() == cur && g_.nodes[*next].outputs.size() == 1 &&
           std::all_of(g_.nodes[*next].inputs.begin() + 1, g_.nodes[*next].inputs.end(),
                       [&](const std::string& t) { return constant(t); });
  };
  if (batch_norm()) {
    bias = true;
    take(*next);
  }
  if (!bias && out_shape && next && g_.nodes[*next].op == "Add" &&
      g_.nodes[*next].inputs.size() == 2) {
    const Node& add = g_.nodes[*next];
    const std::string& other = add.inputs[0] == cur ? add.inputs[1] : add.inputs[0];
    // MatMul + Add(B) as exporters write a Linear layer, or a conv's bias added separately.
    if (per_channel(other, *out_shape, channel_axis)) {
      bias = true;
      take(*next);
      // A conv's separate bias, then its BN (paddle2onnx's transposed convs): one affine map.
      if (kind == AnchorKind::kConv && batch_norm()) take(*next);
    }
  }
  if (next && (g_.nodes[*next].op == "Add" || g_.nodes[*next].op == "Max") &&
      g_.nodes[*next].domain.empty() && g_.nodes[*next].inputs.size() == 2) {
    const Node& join = g_.nodes[*next];
    const std::string& other = join.inputs[0] == cur ? join.inputs[1] : join.inputs[0];
    // A residual: the other operand is computed independently of this kernel (so it is ready
    // when the kernel runs) and has the output's shape. Added (a residual connection) or the
    // larger kept (tf2onnx's Maximum of two branches).
    if (!constant(other) && !depends_on(other, anchor) && g_.shape(other) &&
        g_.shape(other) == g_.shape(cur)) {
      residual = join.op == "Add" ? "add" : "max";
      const auto upsample =
          upsampled_residual && join.op == "Add" ? nearest_upsample(other, *next) : std::nullopt;
      if (upsample) {
        const size_t resize = producer_.at(other);
        fused_[resize] = true;
        f.nodes.push_back(resize);
        f.residual_upsample = *upsample;
      }
      take(*next);
    }
  }
  std::optional<Activation> act = activation(cur);
  std::vector<std::string> steps;
  if (bias) steps.push_back("bias");
  if (!residual.empty()) steps.push_back(residual);
  if (act) {
    for (size_t n : act->nodes) {
      fused_[n] = true;
      f.nodes.push_back(n);
    }
    steps.push_back(act->step);
    f.args = act->args;
  }
  for (const auto& s : steps) f.steps += (f.steps.empty() ? "" : "_") + s;
  return f;
}

}  // namespace ktune::frontend
