// input_window_sums() and input_row_sums(): int32 reductions of uint8 data, batch and rows in
// parallel.
#include "deploy/input_sums.h"

#include "deploy/model_pool.h"

#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {

te::LoweredFunc input_window_sums(const std::string& name, const InputWindowSums& p) {
  const int64_t n = p.nchw.at(0), c = p.nchw.at(1), h = p.nchw.at(2), w = p.nchw.at(3);
  const int64_t blocks = (c + p.block - 1) / p.block;
  const auto [oh, ow] =
      window_output(name + ": the window does not fit the input", h, w, p.r, p.s, p.stride, p.pad);
  const te::Expr zero(p.zero_point);
  te::Tensor in = te::placeholder({n, blocks, h, w, p.block}, te::UInt(8), "in");
  // Per input pixel: the channels' sum less c zero points (the lanes past c are not summed).
  te::IterVar cb = te::reduce_axis({0, blocks}, "cb"), l = te::reduce_axis({0, p.block}, "l");
  te::Tensor pixel = te::compute(
      {n, h, w},
      [&](te::Var i, te::Var y, te::Var x) {
        const te::Expr v = te::cast(te::Int(32), in(i, cb, y, x, l)) - zero;
        return te::sum(te::select(cb * p.block + l < te::Expr(c), v, te::Expr(0)), {cb, l});
      },
      "pixel_sum");
  // Per output position: the pixel sums of the window's taps inside the input.
  te::IterVar kr = te::reduce_axis({0, p.r}, "kr"), ks = te::reduce_axis({0, p.s}, "ks");
  te::Tensor out = te::compute(
      {n, oh, ow},
      [&](te::Var i, te::Var y, te::Var x) {
        const te::Expr iy = y * p.stride + kr - p.pad, ix = x * p.stride + ks - p.pad;
        te::Expr v = pixel(i, iy, ix);
        if (p.pad > 0) {
          const te::Expr inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
          v = te::select(inside,
                         pixel(i, te::min(te::max(iy, te::Expr(int64_t{0})), te::Expr(h - 1)),
                               te::min(te::max(ix, te::Expr(int64_t{0})), te::Expr(w - 1))),
                         te::Expr(0));
        }
        return te::sum(v, {kr, ks});
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  for (const te::Tensor& t : {pixel, out}) {
    te::Stage st = s[t];
    st.parallel(st.fuse(st.axis(0), st.axis(1)));
  }
  return te::lower(s, {in, out}, name);
}

te::LoweredFunc input_row_sums(const std::string& name, int64_t m, int64_t k, int32_t zero_point) {
  te::Tensor a = te::placeholder({m, k}, te::UInt(8), "a");
  te::IterVar j = te::reduce_axis({0, k}, "j");
  te::Tensor out = te::compute(
      {m},
      [&](te::Var i) {
        return te::sum(te::cast(te::Int(32), a(i, j)) - te::Expr(zero_point), {j});
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  s[out].parallel(s[out].axis(0));
  return te::lower(s, {a, out}, name);
}

}  // namespace ktune::deploy
