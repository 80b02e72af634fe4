// pool_blocked(): a window reduction per (row, column) with the channel block as the vector lanes,
// the batch and channel blocks in parallel; uint8 max pools pad with 0, which never wins a max
// over a window holding one real element.
#include "deploy/model_pool.h"

#include <algorithm>
#include <limits>

#include "deploy/generated_schedule.h"
#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {

WindowOutput window_output(const std::string& what, int64_t h, int64_t w, int64_t r, int64_t s,
                           int64_t stride, int64_t pad) {
  if (r < 1 || s < 1 || stride < 1 || pad < 0 || h + 2 * pad < r || w + 2 * pad < s)
    throw Error(ErrorKind::kInvalidArgument, what);
  return {(h + 2 * pad - r) / stride + 1, (w + 2 * pad - s) / stride + 1};
}

te::LoweredFunc pool_blocked(const std::string& name, const BlockedPool& p) {
  const int64_t n = p.nchw.at(0), c = p.nchw.at(1), h = p.nchw.at(2), w = p.nchw.at(3);
  const int64_t blocks = (c + p.block - 1) / p.block;
  PoolWindow win;
  if (p.window) {
    win = *p.window;
    if (win.r < 1 || win.s < 1 || win.stride_h < 1 || win.stride_w < 1 || win.oh < 1 ||
        win.ow < 1 || std::min({win.pad_top, win.pad_left, win.pad_bottom, win.pad_right}) < 0)
      throw Error(ErrorKind::kInvalidArgument, name + ": a pooling window of bad extents");
  } else {
    const auto [oh, ow] = window_output(name + ": the pooling window does not fit the input", h, w,
                                        p.r, p.s, p.stride, p.pad);
    win = {p.r, p.s, p.stride, p.stride, p.pad, p.pad, p.pad, p.pad, oh, ow, true};
  }
  const bool u8 = p.dtype == te::UInt(8);
  if (!u8 && p.dtype != te::Float(32))
    throw Error(ErrorKind::kUnsupported, name + ": pooling of " + p.dtype.str() + " is not built");
  if (u8 && !p.max)
    throw Error(ErrorKind::kUnsupported, name + ": average pooling of uint8 is not built");
  te::Tensor in = te::placeholder({n, blocks, h, w, p.block}, p.dtype, "in");
  te::IterVar kr = te::reduce_axis({0, win.r}, "kr"), ks = te::reduce_axis({0, win.s}, "ks");
  // Taps in the padding (or past the input under ceil_mode) read a clamped element and are
  // replaced: -inf never wins a max, 0 adds nothing to a sum.
  const te::Expr pad_value = u8 ? te::cast(te::UInt(8), te::Expr(0))
                                : te::Expr(p.max ? -std::numeric_limits<float>::infinity() : 0.0f);
  const bool guarded = win.pad_top > 0 || win.pad_left > 0 ||
                       (win.oh - 1) * win.stride_h + win.r > h + win.pad_top ||
                       (win.ow - 1) * win.stride_w + win.s > w + win.pad_left;
  const te::Expr zero(int64_t{0});
  te::Tensor acc = te::compute(
      {n, blocks, win.oh, win.ow, p.block},
      [&](te::Var i, te::Var cb, te::Var y, te::Var x, te::Var l) {
        te::Expr iy = y * win.stride_h + kr - win.pad_top,
                 ix = x * win.stride_w + ks - win.pad_left;
        te::Expr v = in(i, cb, iy, ix, l);
        if (guarded) {
          te::Expr inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
          v = te::select(inside,
                         in(i, cb, te::min(te::max(iy, zero), te::Expr(h - 1)),
                            te::min(te::max(ix, zero), te::Expr(w - 1)), l),
                         pad_value);
        }
        return p.max ? te::max(v, {kr, ks}) : te::sum(v, {kr, ks});
      },
      p.max ? "out" : "sum");
  te::Tensor out = acc;
  if (!p.max) {
    out = te::compute(
        {n, blocks, win.oh, win.ow, p.block},
        [&](te::Var i, te::Var cb, te::Var y, te::Var x, te::Var l) {
          // ONNX Runtime's divisor: the window clipped to the padded input, then (without
          // count_include_pad) to the input.
          te::Expr y0 = y * win.stride_h - win.pad_top, x0 = x * win.stride_w - win.pad_left;
          te::Expr y1 = te::min(y0 + win.r, te::Expr(h + win.pad_bottom));
          te::Expr x1 = te::min(x0 + win.s, te::Expr(w + win.pad_right));
          if (!win.count_include_pad) {
            y0 = te::max(y0, zero);
            x0 = te::max(x0, zero);
            y1 = te::min(y1, te::Expr(h));
            x1 = te::min(x1, te::Expr(w));
          }
          return acc(i, cb, y, x, l) / te::cast(te::Float(32), (y1 - y0) * (x1 - x0));
        },
        "out");
  }
  te::Schedule s = te::create_schedule({out});
  // The lanes innermost (after the window), vectorized; batch x channel blocks in parallel.
  const auto schedule = [&](const te::Tensor& t, bool reduce) {
    te::Stage st = s[t];
    if (reduce) st.reorder({st.reduce_axis(0), st.reduce_axis(1), st.axis(4)});
    st.vectorize(st.axis(4));
    parallel_leading(st, 3);
  };
  schedule(acc, true);
  if (!p.max) schedule(out, false);
  return te::lower(s, {in, out}, name);
}

te::LoweredFunc global_average_pool_u8(const std::string& name, const QuantizedGlobalPool& p) {
  const int64_t n = p.nchw.at(0), c = p.nchw.at(1), h = p.nchw.at(2), w = p.nchw.at(3);
  const int64_t blocks = (c + p.block - 1) / p.block;
  te::Tensor in = te::placeholder({n, blocks, h, w, p.block}, te::UInt(8), "in");
  te::IterVar ky = te::reduce_axis({0, h}, "ky"), kx = te::reduce_axis({0, w}, "kx");
  te::Tensor sum = te::compute(
      {n, blocks, 1, 1, p.block},
      [&](te::Var i, te::Var cb, te::Var, te::Var, te::Var l) {
        return te::sum(te::cast(te::Int(32), in(i, cb, ky, kx, l)), {ky, kx});
      },
      "sum");
  const float factor = p.x_scale / (static_cast<float>(h * w) * p.y_scale);
  const int32_t offset = static_cast<int32_t>(h * w) * p.x_zero;
  te::Tensor out = te::compute(
      {n, blocks, 1, 1, p.block},
      [&](te::Var i, te::Var cb, te::Var y, te::Var x, te::Var l) {
        const te::Expr centered = te::cast(te::Float(32), sum(i, cb, y, x, l) - te::Expr(offset));
        const te::Expr v =
            te::round_even(centered * te::Expr(factor)) + te::Expr(static_cast<float>(p.y_zero));
        const te::Expr clamped = te::min(te::max(v, te::Expr(0.0f)), te::Expr(255.0f));
        return te::cast(te::UInt(8), te::cast(te::Int(32), clamped));
      },
      "out");
  // As pool_blocked schedules an average: the lanes innermost, batch x channel blocks in parallel.
  te::Schedule s = te::create_schedule({out});
  for (const te::Tensor& t : {sum, out}) {
    te::Stage st = s[t];
    if (t.same_as(sum)) st.reorder({st.reduce_axis(0), st.reduce_axis(1), st.axis(4)});
    st.vectorize(st.axis(4));
    parallel_leading(st, 3);
  }
  return te::lower(s, {in, out}, name);
}

}  // namespace ktune::deploy
