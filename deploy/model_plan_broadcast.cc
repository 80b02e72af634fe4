// The Planner's per-channel broadcasts in the channel-blocked layout: Add, Sub, Mul or Div of a
// [N, C, H, W] activation and a per-channel vector ([N, C, 1, 1] or [1, C, 1, 1] activation, or a
// constant of C values: squeeze-excite's gate, a BatchNormalization written as Mul and Add). One
// pass over the large operand in the layout its producer wrote, where the generated NCHW kernel
// would convert it to NCHW and back around the operation. A BatchNormalization no conv took (after
// a transposed conv, a Concat) likewise.
#include "deploy/generated_schedule.h"
#include "deploy/model_planner.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

// Whether `shape` is a per-channel vector of `out` ([N or 1, C, 1, 1], [C, 1, 1], [1, C, 1, 1]).
bool per_channel(std::vector<int64_t> shape, const std::vector<int64_t>& out) {
  while (shape.size() < 4) shape.insert(shape.begin(), 1);
  return shape.size() == 4 && (shape[0] == out[0] || shape[0] == 1) && shape[1] == out[1] &&
         shape[2] == 1 && shape[3] == 1;
}

te::Expr apply(const std::string& op, const te::Expr& a, const te::Expr& b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  return a / b;
}

// A pass over channel-blocked data (args: inputs, then the output): the lanes vectorized, batch x
// channel blocks in parallel.
te::LoweredFunc lower_blocked_pass(const std::string& symbol, const std::vector<te::Tensor>& args) {
  const te::Tensor& o = args.back();
  te::Schedule s = te::create_schedule({o});
  s[o].vectorize(s[o].axis(4));
  parallel_leading(s[o], 3);
  return te::lower(s, args, symbol);
}

}  // namespace

bool Planner::plan_channel_broadcast(const frontend::Node& n) {
  if (!n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1 ||
      (n.op != "Add" && n.op != "Sub" && n.op != "Mul" && n.op != "Div"))
    return false;
  const auto out = g_.shape(n.outputs[0]);
  const std::string type = g_.type(n.outputs[0]);
  if (!out || out->size() != 4 || (*out)[2] * (*out)[3] == 1 ||
      (type != "float32" && !type.empty()))
    return false;
  // Which operand is the full tensor, already channel-blocked, and which the vector.
  int full = -1;
  for (int k = 0; k < 2; ++k) {
    auto cur = current_.find(n.inputs[static_cast<size_t>(k)]);
    if (cur != current_.end() && plan_.tensors[cur->second].block > 0 &&
        plan_.tensors[cur->second].shape == *out)
      full = k;
  }
  if (full < 0) return false;
  const std::string& vec = n.inputs[static_cast<size_t>(1 - full)];
  const auto vec_shape = g_.shape(vec);
  if (!vec_shape || !per_channel(*vec_shape, *out)) return false;
  const bool vec_constant = !current_.count(vec);
  if (vec_constant &&
      (!constants_.count(vec) || constants_.at(vec).f32.size() != static_cast<size_t>((*out)[1])))
    return false;

  const int64_t big = current_.at(n.inputs[static_cast<size_t>(full)]);
  const int64_t block = plan_.tensors[big].block;
  const int64_t N = (*out)[0], C = (*out)[1], H = (*out)[2], W = (*out)[3];
  const int64_t blocks = (C + block - 1) / block;
  int64_t vec_id = 0;
  bool vec_batched = false;
  if (vec_constant) {
    std::vector<float> packed(static_cast<size_t>(blocks * block), 0.0f);
    const std::vector<float>& v = constants_.at(vec).f32;
    std::copy(v.begin(), v.end(), packed.begin());
    vec_id = weight(vec + "@c" + std::to_string(block), {blocks, block}, packed);
  } else {
    vec_id = form(vec, block);
    vec_batched =
        plan_.tensors[vec_id].shape.size() == 4 && plan_.tensors[vec_id].shape[0] == N && N > 1;
    if (plan_.tensors[vec_id].shape.size() != 4) return false;
  }
  te::Tensor a = te::placeholder({N, blocks, H, W, block}, te::Float(32), "a");
  te::Tensor v = vec_constant ? te::placeholder({blocks, block}, te::Float(32), "v")
                              : te::placeholder({vec_batched ? N : 1, blocks, 1, 1, block},
                                                te::Float(32), "v");
  const std::string op = n.op;
  const bool vec_first = full == 1;
  te::Tensor o = te::compute(
      {N, blocks, H, W, block},
      [&](te::Var i, te::Var cb, te::Var y, te::Var x, te::Var l) {
        const te::Expr g = vec_constant ? v(cb, l)
                                        : v(vec_batched ? te::Expr(i) : te::Expr(int64_t{0}), cb,
                                            te::Expr(int64_t{0}), te::Expr(int64_t{0}), l);
        const te::Expr r =
            vec_first ? apply(op, g, a(i, cb, y, x, l)) : apply(op, a(i, cb, y, x, l), g);
        // The padding lanes stay zero (a Div by a zero lane would make them NaN).
        return te::select(cb * block + l < C, r, te::Expr(0.0f));
      },
      "out");
  PlanStep step;
  step.layer = n.name;
  step.kind = "elementwise";
  step.symbol = symbol("channel_" + std::string(n.op == "Mul"   ? "mul"
                                                : n.op == "Add" ? "add"
                                                : n.op == "Sub" ? "sub"
                                                                : "div"));
  step.func = lower_blocked_pass(step.symbol, {a, v, o});
  step.args = {big, vec_id, define(n.outputs[0], block)};
  plan_.steps.push_back(std::move(step));
  return true;
}

bool Planner::plan_blocked_batch_norm(const frontend::Node& n) {
  if (!n.domain.empty() || n.op != "BatchNormalization" || n.outputs.empty()) return false;
  auto cur = current_.find(n.inputs.at(0));
  if (cur == current_.end() || plan_.tensors[cur->second].block == 0 ||
      plan_.tensors[cur->second].shape.size() != 4 ||
      !(plan_.tensors[cur->second].dtype == te::Float(32)))
    return false;
  // The scale and shift the NCHW step folds (and its refusals), packed per block: the padding
  // lanes get scale and shift 0, so they stay zero.
  const std::vector<GeneratedStep> steps = describe_node(g_, n, constants_);
  if (steps.size() != 1 || steps[0].inputs.size() != 3) return false;
  const int64_t block = plan_.tensors[cur->second].block;
  const std::vector<int64_t> shape = plan_.tensors[cur->second].shape;
  const int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
  const int64_t blocks = (C + block - 1) / block;
  std::vector<int64_t> packed;
  for (size_t k = 1; k < 3; ++k) {
    std::vector<float> v(static_cast<size_t>(blocks * block), 0.0f);
    std::copy(steps[0].inputs[k].data.begin(), steps[0].inputs[k].data.end(), v.begin());
    packed.push_back(
        weight(steps[0].inputs[k].tensor + "@c" + std::to_string(block), {blocks, block}, v));
  }
  te::Tensor a = te::placeholder({N, blocks, H, W, block}, te::Float(32), "a");
  te::Tensor scale = te::placeholder({blocks, block}, te::Float(32), "scale");
  te::Tensor shift = te::placeholder({blocks, block}, te::Float(32), "shift");
  te::Tensor o = te::compute(
      {N, blocks, H, W, block},
      [&](te::Var i, te::Var cb, te::Var y, te::Var x, te::Var l) {
        return a(i, cb, y, x, l) * scale(cb, l) + shift(cb, l);
      },
      "out");
  PlanStep step;
  step.layer = n.name;
  step.kind = "elementwise";
  step.symbol = symbol("channel_affine");
  step.func = lower_blocked_pass(step.symbol, {a, scale, shift, o});
  step.args = {cur->second, packed[0], packed[1], define(n.outputs[0], block)};
  plan_.steps.push_back(std::move(step));
  return true;
}

}  // namespace ktune::deploy
