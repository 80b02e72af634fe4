// The Planner's DepthToSpace: one generated kernel from the channel-blocked input to the
// channel-blocked output, so that a ConvTranspose rewritten as a 1x1 conv and a DepthToSpace
// (frontend's conv_transpose_as_conv) stays in the blocked layout between convs.
#include "deploy/model_planner.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

constexpr int64_t kBlock = 16;  // the lanes when the input has no block yet

// In NCHWc of [n, c*s*s, h, w] -> out NCHWc of [n, c, h*s, w*s]: output channel k at (y, x) is
// input channel k*s*s + (y%s)*s + x%s (CRD) or ((y%s)*s + x%s)*c + k (DCR) at (y/s, x/s); lanes
// past c are zero. DCR with c a multiple of the block (the phases of a transposed conv,
// frontend's conv_transpose_as_conv) moves whole blocks: a vector copy of each pixel's lanes.
te::LoweredFunc depth_to_space_blocked(const std::string& name, const std::vector<int64_t>& in,
                                       int64_t block, int64_t s, bool crd) {
  const int64_t n = in.at(0), cin = in.at(1), h = in.at(2), w = in.at(3), c = cin / (s * s);
  const bool whole_blocks = !crd && c % block == 0;
  te::Tensor x = te::placeholder({n, (cin + block - 1) / block, h, w, block}, te::Float(32), "in");
  te::Tensor out = te::compute(
      {n, (c + block - 1) / block, h * s, w * s, block},
      [&](te::Var i, te::Var kb, te::Var y, te::Var xx, te::Var l) {
        const te::Expr offset = (y % s) * s + xx % s;
        if (whole_blocks) return x(i, offset * (c / block) + kb, y / s, xx / s, l);
        const te::Expr k = kb * block + l;
        te::Expr ch = crd ? k * (s * s) + offset : offset * c + k;
        ch = te::min(ch, te::Expr(cin - 1));  // the padding lanes read in bounds, then are zero
        return te::select(k < c, x(i, ch / block, y / s, xx / s, ch % block), te::Expr(0.0f));
      },
      "out");
  te::Schedule sch = te::create_schedule({out});
  te::Stage st = sch[out];
  if (whole_blocks) st.vectorize(st.axis(4));
  st.parallel(st.fuse(st.axis(0), st.axis(1)));
  return te::lower(sch, {x, out}, name);
}

}  // namespace

void Planner::plan_depth_to_space(const frontend::Node& n) {
  const std::string& x = n.inputs.at(0);
  const std::vector<int64_t> in = known_shape(x);
  const int64_t s = n.int_or("blocksize", 0);
  const std::string mode = n.text_or("mode", "DCR");
  if (in.size() != 4 || s < 1 || in[1] % (s * s) != 0 || (mode != "DCR" && mode != "CRD"))
    throw unsupported(n, "a DepthToSpace of another form than 4-D DCR or CRD");
  auto cur = current_.find(x);
  const int64_t block = cur != current_.end() && plan_.tensors[cur->second].block > 0
                            ? plan_.tensors[cur->second].block
                            : kBlock;
  PlanStep step;
  step.layer = n.name;
  step.kind = "layout";
  step.symbol = symbol("depth_to_space");
  step.func = depth_to_space_blocked(step.symbol, in, block, s, mode == "CRD");
  step.args = {form(x, block), define(n.outputs.at(0), block)};
  plan_.steps.push_back(std::move(step));
}

}  // namespace ktune::deploy
