// conv_blocked(): one sum per output element over its group's input channels and the dilated
// window, with the output block's lanes innermost; the batch and output blocks in parallel. An
// output lane may belong to another group than its neighbours (a group of fewer channels than a
// block), so each lane finds its input channels itself: the kernel serves any group count.
#include "deploy/model_conv.h"

#include <algorithm>

#include "deploy/generated_schedule.h"
#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

int64_t blocks_of(int64_t channels, int64_t block) { return (channels + block - 1) / block; }

void check(const std::string& name, const BlockedConv& c) {
  const auto bad = [&](const std::string& what) {
    throw Error(ErrorKind::kInvalidArgument, name + ": " + what);
  };
  if (c.nchw.size() != 4 || *std::min_element(c.nchw.begin(), c.nchw.end()) < 1)
    bad("the input is not a non-empty [n, c, h, w]");
  if (c.group < 1 || c.nchw[1] % c.group != 0 || c.k < 1 || c.k % c.group != 0)
    bad("the group count does not divide the input and output channels");
  if (std::min({c.r, c.s, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w, c.in_block,
                c.out_block, c.oh, c.ow}) < 1 ||
      std::min(c.pad_top, c.pad_left) < 0)
    bad("a window of bad extents");
}

}  // namespace

te::LoweredFunc conv_blocked(const std::string& name, const BlockedConv& c) {
  check(name, c);
  const int64_t n = c.nchw[0], channels = c.nchw[1], h = c.nchw[2], w = c.nchw[3];
  const int64_t cg = channels / c.group, kg = c.k / c.group;
  const int64_t ib = c.in_block, ob = c.out_block;
  const int64_t out_blocks = blocks_of(c.k, ob);
  const bool lanes_past_k = out_blocks * ob > c.k;
  te::Tensor in = te::placeholder({n, blocks_of(channels, ib), h, w, ib}, te::Float(32), "in");
  te::Tensor weights = te::placeholder({out_blocks, cg, c.r, c.s, ob}, te::Float(32), "weights");
  te::IterVar rc = te::reduce_axis({0, cg}, "rc"), kr = te::reduce_axis({0, c.r}, "kr"),
              ks = te::reduce_axis({0, c.s}, "ks");
  // Taps outside the input (padding at either end) read a clamped element and are replaced by 0.
  const bool guarded = c.pad_top > 0 || c.pad_left > 0 ||
                       (c.oh - 1) * c.stride_h + (c.r - 1) * c.dilation_h >= h + c.pad_top ||
                       (c.ow - 1) * c.stride_w + (c.s - 1) * c.dilation_w >= w + c.pad_left;
  const te::Expr zero(int64_t{0});
  const std::vector<int64_t> out_shape = {n, out_blocks, c.oh, c.ow, ob};
  te::Tensor acc = te::compute(
      out_shape,
      [&](te::Var i, te::Var kb, te::Var y, te::Var x, te::Var l) {
        // The lane's output channel, its group (a lane past k reads the last group: its weights
        // are zero), the input channel of tap rc.
        te::Expr group = (kb * ob + l) / kg;
        if (lanes_past_k) group = te::min(group, te::Expr(c.group - 1));
        const te::Expr ci = group * cg + rc;
        const te::Expr iy = y * c.stride_h + kr * c.dilation_h - c.pad_top;
        const te::Expr ix = x * c.stride_w + ks * c.dilation_w - c.pad_left;
        te::Expr v = in(i, ci / ib, iy, ix, ci % ib);
        if (guarded)
          v = te::select(iy >= 0 && iy < h && ix >= 0 && ix < w,
                         in(i, ci / ib, te::min(te::max(iy, zero), te::Expr(h - 1)),
                            te::min(te::max(ix, zero), te::Expr(w - 1)), ci % ib),
                         te::Expr(0.0f));
        return te::sum(v * weights(kb, rc, kr, ks, l), {rc, kr, ks});
      },
      "acc");
  std::vector<te::Tensor> args = {in, weights};
  te::Tensor bias, residual;
  if (c.epilogue.bias) {
    bias = te::placeholder({out_blocks * ob}, te::Float(32), "bias");
    args.push_back(bias);
  }
  if (c.epilogue.residual) {
    residual = te::placeholder(out_shape, te::Float(32), "residual");
    args.push_back(residual);
  }
  te::Tensor out = te::compute(
      out_shape,
      [&](te::Var i, te::Var kb, te::Var y, te::Var x, te::Var l) {
        const te::Expr k = kb * ob + l;
        te::Expr v = c.epilogue.apply(
            acc(i, kb, y, x, l), c.epilogue.bias ? bias(k) : te::Expr(0.0f),
            c.epilogue.residual ? residual(i, kb, y, x, l) : te::Expr(0.0f), te::Float(32));
        // An activation of 0 need not be 0 (a clip above 0): the lanes past k are set.
        if (lanes_past_k) v = te::select(k < c.k, v, te::Expr(0.0f));
        return v;
      },
      "out");
  args.push_back(out);
  te::Schedule s = te::create_schedule({out});
  // The window innermost but for the lanes, whose weights are contiguous; the epilogue's lanes
  // vectorized (the sum's input index depends on the lane, a gather).
  te::Stage sum = s[acc];
  sum.reorder({sum.reduce_axis(0), sum.reduce_axis(1), sum.reduce_axis(2), sum.axis(4)});
  parallel_leading(sum, 3);
  te::Stage epilogue = s[out];
  epilogue.vectorize(epilogue.axis(4));
  parallel_leading(epilogue, 3);
  return te::lower(s, args, name);
}

std::vector<float> pack_conv_blocked_weights(const BlockedConv& c, const std::vector<float>& w,
                                             const std::vector<float>& scale) {
  check("conv_blocked weights", c);
  const int64_t cg = c.nchw[1] / c.group, ob = c.out_block, taps = c.r * c.s;
  if (static_cast<int64_t>(w.size()) != c.k * cg * taps ||
      (!scale.empty() && static_cast<int64_t>(scale.size()) != c.k))
    throw Error(ErrorKind::kInvalidArgument,
                "conv_blocked weights: not [k][c/group][r][s] with one scale per output channel");
  std::vector<float> packed(static_cast<size_t>(blocks_of(c.k, ob) * cg * taps * ob), 0.0f);
  for (int64_t k = 0; k < c.k; ++k)
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t t = 0; t < taps; ++t)
        packed[static_cast<size_t>(((k / ob * cg + ci) * taps + t) * ob + k % ob)] =
            w[static_cast<size_t>((k * cg + ci) * taps + t)] *
            (scale.empty() ? 1.0f : scale[static_cast<size_t>(k)]);
  return packed;
}

}  // namespace ktune::deploy
