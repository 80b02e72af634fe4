// The Planner's DepthToSpace: one generated kernel from the channel-blocked input to the
// channel-blocked output, so that a ConvTranspose rewritten as a 1x1 conv and a DepthToSpace
// (frontend's conv_transpose_as_conv) stays in the blocked layout between convs.
#include <numeric>

#include "deploy/generated_schedule.h"
#include "deploy/model_planner.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

// In NCHWc of [n, c*s*s, h, w] (blocks of `ib` lanes) -> out NCHWc of [n, c, h*s, w*s] (blocks of
// `ob`): output channel k at (y, x) is input channel k*s*s + (y%s)*s + x%s (CRD) or
// ((y%s)*s + x%s)*c + k (DCR) at (y/s, x/s); lanes past c are zero. In DCR order (the phases of a
// transposed conv, frontend's conv_transpose_as_conv) runs of v = gcd(c, ib, ob) channels stay
// together: both tensors seen in sub-blocks of v lanes ([..][block/v][v], the same bytes), each
// output sub-block is a vector copy of one input sub-block.
te::LoweredFunc depth_to_space_blocked(const std::string& name, const std::vector<int64_t>& in,
                                       int64_t ib, int64_t ob, int64_t s, bool crd) {
  const int64_t n = in.at(0), cin = in.at(1), h = in.at(2), w = in.at(3), c = cin / (s * s);
  const int64_t in_blocks = (cin + ib - 1) / ib, out_blocks = (c + ob - 1) / ob;
  const int64_t v = std::gcd(std::gcd(c, ib), ob);
  if (!crd && v >= 4) {
    const int64_t ri = ib / v, ro = ob / v;  // sub-blocks per input and output block
    te::Tensor x = te::placeholder({n, in_blocks, h, w, ri, v}, te::Float(32), "in");
    te::Tensor out = te::compute(
        {n, out_blocks, h * s, w * s, ro, v},
        [&](const std::vector<te::Var>& i) {
          const te::Var &kb = i[1], &y = i[2], &xx = i[3], &j = i[4], &l = i[5];
          // The sub-block's first channel, its input sub-block u; past c (the last block's
          // padding), a clamped read made zero.
          const te::Expr k = kb * ob + j * v;
          const te::Expr u = te::min(((y % s) * s + xx % s) * c + k, te::Expr(cin - v)) / v;
          return te::select(k < c, x(i[0], u / ri, y / s, xx / s, u % ri, l), te::Expr(0.0f));
        },
        "out");
    te::Schedule sch = te::create_schedule({out});
    te::Stage st = sch[out];
    st.vectorize(st.axis(5));
    parallel_leading(st, 3);
    return te::lower(sch, {x, out}, name);
  }
  te::Tensor x = te::placeholder({n, in_blocks, h, w, ib}, te::Float(32), "in");
  te::Tensor out = te::compute(
      {n, out_blocks, h * s, w * s, ob},
      [&](te::Var i, te::Var kb, te::Var y, te::Var xx, te::Var l) {
        const te::Expr offset = (y % s) * s + xx % s;
        const te::Expr k = kb * ob + l;
        te::Expr ch = crd ? k * (s * s) + offset : offset * c + k;
        ch = te::min(ch, te::Expr(cin - 1));  // the padding lanes read in bounds, then are zero
        return te::select(k < c, x(i, ch / ib, y / s, xx / s, ch % ib), te::Expr(0.0f));
      },
      "out");
  te::Schedule sch = te::create_schedule({out});
  parallel_leading(sch[out], 3);
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
  // Read as the producer wrote it; written as the convs that read the result take it (no
  // conversion after), else in the same block.
  const int64_t block = written_block(x);
  const int64_t wanted = conv_data_block(n.outputs.at(0));
  const int64_t out_block = wanted > 0 ? wanted : block;
  PlanStep step;
  step.layer = n.name;
  step.kind = "layout";
  step.symbol = symbol("depth_to_space");
  step.func = depth_to_space_blocked(step.symbol, in, block, out_block, s, mode == "CRD");
  step.args = {form(x, block), define(n.outputs.at(0), out_block)};
  plan_.steps.push_back(std::move(step));
}

}  // namespace ktune::deploy
