// The Planner's Resize of channel-blocked data: the same coordinate tables as the NCHW kernel
// (describe_node's resize step), read per pixel, the lanes of a block copied (nearest) or weighed
// (linear) as one vector. The upsampling of an FPN or YOLO neck sits between convs: in NCHW it
// would cost a conversion out of the blocked layout before it and one back after it.
#include "deploy/generated_schedule.h"
#include "deploy/model_planner.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

// NCHWc [n, cb, h, w, block] -> [n, cb, oh, ow, block]; the tables as resize() takes them.
te::LoweredFunc resize_blocked(const std::string& name, const std::vector<int64_t>& in,
                               int64_t block, int64_t oh, int64_t ow, bool linear) {
  const int64_t n = in.at(0), cb = (in.at(1) + block - 1) / block, h = in.at(2), w = in.at(3);
  te::Tensor x = te::placeholder({n, cb, h, w, block}, te::Float(32), "x");
  te::Tensor ht = te::placeholder({4, oh}, te::Float(32), "h_table");
  te::Tensor wt = te::placeholder({4, ow}, te::Float(32), "w_table");
  // The tables hold indices below 2^24 as float32: exact.
  const auto index = [](const te::Tensor& t, int row, const te::Var& v) {
    return te::cast(te::kIndexType, t(row, v));
  };
  te::Tensor out = te::compute(
      {n, cb, oh, ow, block},
      [&](te::Var i, te::Var kb, te::Var y, te::Var xo, te::Var l) {
        const te::Expr y0 = index(ht, 0, y), x0 = index(wt, 0, xo);
        if (!linear) return x(i, kb, y0, x0, l);
        const te::Expr y1 = index(ht, 1, y), x1 = index(wt, 1, xo);
        const te::Expr wy0 = ht(2, y), wy1 = ht(3, y), wx0 = wt(2, xo), wx1 = wt(3, xo);
        return wx0 * wy0 * x(i, kb, y0, x0, l) + wx1 * wy0 * x(i, kb, y0, x1, l) +
               wx0 * wy1 * x(i, kb, y1, x0, l) + wx1 * wy1 * x(i, kb, y1, x1, l);
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  te::Stage st = s[out];
  st.vectorize(st.axis(4));
  // Rows too: one image of few channel blocks is otherwise one or two parallel iterations.
  parallel_leading(st, 3);
  return te::lower(s, {x, ht, wt, out}, name);
}

}  // namespace

bool Planner::plan_blocked_resize(const frontend::Node& n) {
  if (!n.domain.empty() || (n.op != "Resize" && n.op != "Upsample") || n.outputs.size() != 1)
    return false;
  auto cur = current_.find(n.inputs.at(0));
  if (cur == current_.end() || plan_.tensors[cur->second].block == 0 ||
      !(plan_.tensors[cur->second].dtype == te::Float(32)))
    return false;
  // The tables and the checks of the NCHW step; a form it refuses is refused here too.
  const std::vector<GeneratedStep> steps = describe_node(g_, n, constants_);
  if (steps.size() != 1 || steps[0].inputs.size() != 3) return false;
  const GeneratedStep& step = steps[0];
  const std::vector<int64_t> in = known_shape(n.inputs[0]), out = known_shape(n.outputs[0]);
  const int64_t block = plan_.tensors[cur->second].block;
  PlanStep s;
  s.layer = n.name;
  s.kind = "elementwise";
  s.symbol = symbol("resize_blocked");
  s.args = {cur->second};
  for (size_t k = 1; k < 3; ++k)
    s.args.push_back(weight(step.inputs[k].tensor, step.inputs[k].shape, step.inputs[k].data));
  s.args.push_back(define(n.outputs[0], block));
  s.func =
      resize_blocked(s.symbol, in, block, out[2], out[3], n.text_or("mode", "nearest") == "linear");
  plan_.steps.push_back(std::move(s));
  return true;
}

}  // namespace ktune::deploy
