// The Planner's windows that the templates do not take as ONNX writes them: pools of any window
// (per-axis strides, padding at each end, ceil_mode, averages without the padding) as generated
// blocked pools, and a conv's input padded by a generated kernel where its padding differs
// between the ends (the conv then pads nothing).
#include <algorithm>

#include "deploy/model_planner.h"
#include "deploy/model_pool.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

// The lanes of the channel-blocked layout a generated kernel takes when its input has none.
constexpr int64_t kBlock = 16;

// NCHWc [n][ceil(c/b)][h][w][b] -> the same with pads rows and columns of zeros around (`pads`:
// top, left, bottom, right).
te::LoweredFunc pad_blocked(const std::string& name, const std::vector<int64_t>& nchw,
                            int64_t block, const std::vector<int64_t>& pads) {
  const int64_t n = nchw.at(0), blocks = (nchw.at(1) + block - 1) / block, h = nchw.at(2),
                w = nchw.at(3);
  const int64_t top = pads.at(0), left = pads.at(1);
  te::Tensor in = te::placeholder({n, blocks, h, w, block}, te::Float(32), "in");
  const te::Expr zero(int64_t{0});
  te::Tensor out = te::compute(
      {n, blocks, h + top + pads.at(2), w + left + pads.at(3), block},
      [&](te::Var i, te::Var cb, te::Var y, te::Var x, te::Var l) {
        te::Expr iy = y - top, ix = x - left;
        return te::select(iy >= 0 && iy < h && ix >= 0 && ix < w,
                          in(i, cb, te::min(te::max(iy, zero), te::Expr(h - 1)),
                             te::min(te::max(ix, zero), te::Expr(w - 1)), l),
                          te::Expr(0.0f));
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  s[out].vectorize(s[out].axis(4));
  s[out].parallel(s[out].fuse(s[out].axis(0), s[out].axis(1)));
  return te::lower(s, {in, out}, name);
}

// ONNX's padding of a window of `kernel` taps at `stride` over `in`: the pads attribute, or
// auto_pad's SAME split (the odd one at the end for SAME_UPPER, at the start for SAME_LOWER).
std::vector<int64_t> window_pads(const frontend::Node& n, const std::vector<int64_t>& in,
                                 const std::vector<int64_t>& kernel,
                                 const std::vector<int64_t>& strides) {
  const std::string auto_pad = n.text_or("auto_pad", "NOTSET");
  if (auto_pad == "VALID") return {0, 0, 0, 0};
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") return n.ints("pads", {0, 0, 0, 0});
  std::vector<int64_t> pads(4);
  for (size_t a = 0; a < 2; ++a) {
    const int64_t extent = in[2 + a], s = strides[a];
    const int64_t total = std::max<int64_t>(((extent + s - 1) / s - 1) * s + kernel[a] - extent, 0);
    pads[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pads[a + 2] = total - pads[a];
  }
  return pads;
}

}  // namespace

void Planner::plan_pool(const frontend::Node& n) {
  const std::string& x = n.inputs.at(0);
  const std::vector<int64_t> in = known_shape(x), out = known_shape(n.outputs.at(0));
  const std::vector<int64_t> kernel = n.ints("kernel_shape");
  const std::vector<int64_t> strides = n.ints("strides", {1, 1});
  if (in.size() != 4 || kernel.size() != 2 || strides.size() != 2)
    throw unsupported(n, "a pool that is not 2-D");
  if (n.ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1})
    throw unsupported(n, "dilated pooling");
  const std::vector<int64_t> pads = window_pads(n, in, kernel, strides);
  BlockedPool pool;
  pool.max = n.op == "MaxPool";
  pool.nchw = in;
  auto cur = current_.find(x);
  pool.block = cur != current_.end() && plan_.tensors[cur->second].block > 0
                   ? plan_.tensors[cur->second].block
                   : kBlock;
  // The output extent is the one shape inference gave (ceil_mode included).
  pool.window = PoolWindow{kernel[0],
                           kernel[1],
                           strides[0],
                           strides[1],
                           pads[0],
                           pads[1],
                           pads[2],
                           pads[3],
                           out[2],
                           out[3],
                           n.int_or("count_include_pad", 0) != 0};
  PlanStep s;
  s.layer = n.name;
  s.kind = "pool";
  s.symbol = symbol(pool.max ? "max_pool_nchwc" : "avg_pool_nchwc");
  s.func = pool_blocked(s.symbol, pool);
  s.args = {form(x, pool.block), define(n.outputs.at(0), pool.block)};
  plan_.steps.push_back(std::move(s));
}

int64_t Planner::padded_input(const frontend::Node& conv, const std::vector<int64_t>& pads,
                              int64_t block) {
  const std::string& x = conv.inputs.at(0);
  const int64_t from = form(x, block);
  const std::vector<int64_t> in = plan_.tensors[from].shape;
  PlanTensor t{x + "@pad",
               {in[0], in[1], in[2] + pads.at(0) + pads.at(2), in[3] + pads.at(1) + pads.at(3)},
               block};
  const int64_t to = add(std::move(t));
  PlanStep s;
  s.layer = "pad " + x;
  s.kind = "layout";
  s.symbol = symbol("pad_nchw" + std::to_string(block) + "c");
  s.func = pad_blocked(s.symbol, in, block, pads);
  s.args = {from, to};
  plan_.steps.push_back(std::move(s));
  return to;
}

}  // namespace ktune::deploy
