// The Planner's DepthToSpace: one generated kernel from the channel-blocked input to the
// channel-blocked output, so that a ConvTranspose rewritten as a 1x1 conv and a DepthToSpace
// (frontend's conv_transpose_as_conv) stays in the blocked layout between convs.
#include <numeric>

#include "deploy/model_planner.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

// In NCHWc of [n, c*s*s, h, w] -> out NCHWc of [n, c, h*s, w*s]: output channel k at (y, x) is
// input channel k*s*s + (y%s)*s + x%s (CRD) or ((y%s)*s + x%s)*c + k (DCR) at (y/s, x/s); lanes
// past c are zero. In DCR order (the phases of a transposed conv, frontend's
// conv_transpose_as_conv) runs of v = gcd(c, block) channels stay together: both tensors seen in
// sub-blocks of v lanes ([..][block/v][v], the same bytes), each output sub-block is a vector copy
// of one input sub-block.
te::LoweredFunc depth_to_space_blocked(const std::string& name, const std::vector<int64_t>& in,
                                       int64_t block, int64_t s, bool crd) {
  const int64_t n = in.at(0), cin = in.at(1), h = in.at(2), w = in.at(3), c = cin / (s * s);
  const int64_t in_blocks = (cin + block - 1) / block, out_blocks = (c + block - 1) / block;
  const int64_t v = std::gcd(c, block);
  if (!crd && v >= 4) {
    const int64_t r = block / v;  // sub-blocks per block
    te::Tensor x = te::placeholder({n, in_blocks, h, w, r, v}, te::Float(32), "in");
    te::Tensor out = te::compute(
        {n, out_blocks, h * s, w * s, r, v},
        [&](const std::vector<te::Var>& i) {
          const te::Var &kb = i[1], &y = i[2], &xx = i[3], &j = i[4], &l = i[5];
          // The sub-block's first channel, its input sub-block u; past c (the last block's
          // padding), a clamped read made zero.
          const te::Expr k = kb * block + j * v;
          const te::Expr u = te::min(((y % s) * s + xx % s) * c + k, te::Expr(cin - v)) / v;
          return te::select(k < c, x(i[0], u / r, y / s, xx / s, u % r, l), te::Expr(0.0f));
        },
        "out");
    te::Schedule sch = te::create_schedule({out});
    te::Stage st = sch[out];
    st.vectorize(st.axis(5));
    st.parallel(st.fuse(st.axis(0), st.axis(1)));
    return te::lower(sch, {x, out}, name);
  }
  te::Tensor x = te::placeholder({n, in_blocks, h, w, block}, te::Float(32), "in");
  te::Tensor out = te::compute(
      {n, out_blocks, h * s, w * s, block},
      [&](te::Var i, te::Var kb, te::Var y, te::Var xx, te::Var l) {
        const te::Expr offset = (y % s) * s + xx % s;
        const te::Expr k = kb * block + l;
        te::Expr ch = crd ? k * (s * s) + offset : offset * c + k;
        ch = te::min(ch, te::Expr(cin - 1));  // the padding lanes read in bounds, then are zero
        return te::select(k < c, x(i, ch / block, y / s, xx / s, ch % block), te::Expr(0.0f));
      },
      "out");
  te::Schedule sch = te::create_schedule({out});
  te::Stage st = sch[out];
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
  const int64_t block = written_block(x);
  PlanStep step;
  step.layer = n.name;
  step.kind = "layout";
  step.symbol = symbol("depth_to_space");
  step.func = depth_to_space_blocked(step.symbol, in, block, s, mode == "CRD");
  step.args = {form(x, block), define(n.outputs.at(0), block)};
  plan_.steps.push_back(std::move(step));
}

}  // namespace ktune::deploy
