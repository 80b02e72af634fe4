// Built-in Winograd conv2d F(m x m, 3 x 3) on channel-blocked tensors (NCHWc): the input and
// output layouts of conv2d_nchwc, with the weights already transformed (U = G g G^T, see
// winograd.h) so a model can swap one template for the other. Stages, per tile of m x m outputs
// (tiles step by m over the input padded to whole tiles):
//   pad   the input padded by `pad` and rounded up to whole tiles
//   bd    B^T d: the tile's rows combined, one icb-lane vector per entry
//   v     V = (B^T d) B, stored [alpha][alpha][C/icb][tiles][icb]
//   m     M[eps][nu][k][tile] = sum_c U[eps][nu][k][c] V[eps][nu][tile][c]: alpha^2 batched
//         products, register-tiled like conv2d_nchwc's 1x1 case (weight vectors along ocb,
//         broadcast inputs)
//   am    A^T M, per tile
//   conv  Y = (A^T M) A and the epilogue, written into O
// The transforms multiply by constant matrices: each entry is built from the nonzero
// coefficients of its row only, selected by the row index, so unrolling the alpha loops folds
// every select and leaves plain adds and multiplies by constants.
#include <algorithm>
#include <cmath>
#include <functional>

#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/epilogue.h"
#include "schedule_space/templates/winograd.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "conv2d_winograd_nchwc";
constexpr int64_t kMaxTileK = 4;
constexpr int64_t kMaxTileP = 16;

struct Shape : Window {
  int64_t k, icb, ocb, m, alpha;
  Epilogue epilogue;
  int64_t cblocks() const { return ceil_div(c, icb); }
  int64_t kblocks() const { return ceil_div(k, ocb); }
  int64_t tiles_h() const { return ceil_div(oh, m); }
  int64_t tiles_w() const { return ceil_div(ow, m); }
  int64_t tiles() const { return n * tiles_h() * tiles_w(); }
};

// The shape of a workload (blocks resolved); throws Error(kInvalidArgument) for a window other
// than 3 x 3 at stride 1 and dilation 1, a bad m, or an input smaller than the window.
Shape shape_of(const WorkloadArgs& a) {
  Shape s{};
  static_cast<Window&>(s) = window_of(kName, a);
  if (s.r != 3 || s.s != 3 || s.stride != 1 || s.dilation != 1)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(kName) + ": only a 3x3 window at stride 1 and dilation 1");
  s.k = a.get_int("K");
  s.icb = a.get_int("ic_block");
  s.ocb = a.get_int("oc_block");
  if (s.icb == 0) s.icb = auto_channel_block(s.c);
  if (s.ocb == 0) s.ocb = auto_channel_block(s.k);
  s.m = a.get_int("m");
  s.alpha = winograd_matrices(s.m).alpha;
  s.epilogue = epilogue_of(a);
  return s;
}

// sum_t coef[t * stride] * term(t) over the nonzero coefficients (a coefficient of +-1 adds or
// subtracts the term itself; a negative first one multiplies, as 0 - x would not fold).
te::Expr combination(const double* coef, int64_t count, int64_t stride,
                     const std::function<te::Expr(int64_t)>& term) {
  te::Expr acc;
  for (int64_t t = 0; t < count; ++t) {
    const double c = coef[t * stride];
    if (c == 0) continue;
    const te::Expr x = term(t);
    if (!acc.defined()) {
      acc = c == 1 ? x : te::Expr(c) * x;
      continue;
    }
    const te::Expr mag = std::abs(c) == 1 ? x : te::Expr(std::abs(c)) * x;
    acc = c > 0 ? acc + mag : acc - mag;
  }
  return acc;
}

// row(r) for the r that `index` (in [0, rows)) names: a select chain that folds to one row when
// `index` is a constant.
te::Expr by_row(const te::Expr& index, int64_t rows, const std::function<te::Expr(int64_t)>& row) {
  te::Expr e = row(rows - 1);
  for (int64_t r = rows - 2; r >= 0; --r) e = te::select(index == te::Expr(r), row(r), e);
  return e;
}

struct Tensors {
  te::Tensor in, u, padded, bd, v, prod, am, out;  // padded: undefined when none is needed
  EpilogueInputs epilogue;
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> a = {in, u};
    epilogue.append_to(a);
    a.push_back(out);
    return a;
  }
};

// I[N][C/icb][H][W][icb], U[alpha][alpha][K/ub][C/icb][icb][ub] (winograd_weight_shape),
// bias[K/ocb][ocb], residual
// and O [N][K/ocb][OH][OW][ocb] (blocks rounded up as in conv2d_nchwc: the reduction runs over
// exactly C channels, output lanes past K are zeros). Tile t = (n * tiles_h + ty) * tiles_w + tx.
Tensors make_tensors(const WorkloadArgs& a) {
  const Shape sh = shape_of(a);
  const WinogradMatrices& wm = winograd_matrices(sh.m);
  const te::DataType dt = dtype_of(a.get("dtype"));
  const int64_t al = sh.alpha, th = sh.tiles_h(), tw = sh.tiles_w(), tiles = sh.tiles();
  const te::Expr m(sh.m), etw(tw), eth(th);
  Tensors t;
  t.in = te::placeholder({sh.n, sh.cblocks(), sh.h, sh.w, sh.icb}, dt, "I");
  t.u = te::placeholder(winograd_weight_shape(sh.k, sh.c, sh.m, sh.icb, sh.ocb), dt, "U");
  const std::vector<int64_t> out_shape = {sh.n, sh.kblocks(), sh.oh, sh.ow, sh.ocb};
  t.epilogue = epilogue_inputs(sh.epilogue, {sh.kblocks(), sh.ocb}, out_shape, dt);

  // Whole tiles need th * m + 2 rows and tw * m + 2 columns.
  const int64_t extra_h = th * sh.m - sh.oh, extra_w = tw * sh.m - sh.ow;
  te::Tensor padded = t.in;
  if (sh.pad > 0 || extra_h > 0 || extra_w > 0) {
    padded = pad_blocked_input(t.in, sh.n, sh.cblocks(), sh.h, sh.w, sh.icb, sh.pad, dt, extra_h,
                               extra_w);
    t.padded = padded;
  }
  t.bd = te::compute(
      {sh.cblocks(), tiles, al, al, sh.icb},
      [&](te::Var cb, te::Var p, te::Var e, te::Var j, te::Var l) {
        const te::Expr n = p / te::Expr(th * tw), y0 = p / etw % eth * m, x0 = p % etw * m;
        return by_row(e, al, [&](int64_t r) {
          return combination(&wm.bt[r * al], al, 1,
                             [&](int64_t i) { return padded(n, cb, y0 + i, x0 + j, l); });
        });
      },
      "winograd_bd");
  const te::Tensor bd = t.bd;
  t.v = te::compute(
      {al, al, sh.cblocks(), tiles, sh.icb},
      [&](te::Var e, te::Var nu, te::Var cb, te::Var p, te::Var l) {
        return by_row(nu, al, [&](int64_t r) {
          return combination(&wm.bt[r * al], al, 1, [&](int64_t j) { return bd(cb, p, e, j, l); });
        });
      },
      "winograd_v");
  const te::Tensor v = t.v, u = t.u;
  const te::IterVar rc = te::reduce_axis({0, sh.c}, "rc");
  const te::Expr icb(sh.icb);
  // Oc block kb's lanes in U's rows of ub = pair * ocb lanes (winograd_u_block).
  const int64_t pair = winograd_u_block(sh.k, sh.ocb) / sh.ocb;
  t.prod = te::compute(
      {al, al, sh.kblocks(), tiles, sh.ocb},
      [&](te::Var e, te::Var nu, te::Var kb, te::Var p, te::Var l) {
        const te::Expr row = pair == 1 ? te::Expr(kb) : kb / te::Expr(pair);
        const te::Expr lane = pair == 1 ? te::Expr(l) : kb % te::Expr(pair) * te::Expr(sh.ocb) + l;
        return te::sum(u(e, nu, row, rc.var / icb, rc.var % icb, lane) *
                           v(e, nu, rc.var / icb, p, rc.var % icb),
                       {rc});
      },
      "winograd_m");
  const te::Tensor prod = t.prod;
  t.am = te::compute(
      {sh.kblocks(), tiles, sh.m, al, sh.ocb},
      [&](te::Var kb, te::Var p, te::Var i, te::Var nu, te::Var l) {
        return by_row(i, sh.m, [&](int64_t r) {
          return combination(&wm.at[r * al], al, 1,
                             [&](int64_t e) { return prod(e, nu, kb, p, l); });
        });
      },
      "winograd_am");
  const te::Tensor am = t.am, bias = t.epilogue.bias, res = t.epilogue.residual;
  const te::Expr zero = te::cast(dt, te::Expr(0.0));
  t.out = te::compute(
      out_shape,
      [&](te::Var n, te::Var kb, te::Var y, te::Var x, te::Var l) {
        const te::Expr p = (n * eth + y / m) * etw + x / m;
        te::Expr val = by_row(x % m, sh.m, [&](int64_t r) {
          return combination(&wm.at[r * al], al, 1,
                             [&](int64_t nu) { return am(kb, p, y % m, nu, l); });
        });
        val = sh.epilogue.apply(val, bias.defined() ? bias(kb, l) : te::Expr(),
                                res.defined() ? res(n, kb, y, x, l) : te::Expr(), dt);
        if (sh.k % sh.ocb != 0)
          val = te::select(kb * te::Expr(sh.ocb) + l < te::Expr(sh.k), val, zero);
        return val;
      },
      "conv");
  return t;
}

int64_t vectors_per_block(int64_t ocb, int64_t lanes) { return (ocb + lanes - 1) / lanes; }

// Knobs (stable names):
//   tile_k   split of the output channel blocks (K/oc_block) in 2 [outer, register blocks <= 4]
//   tile_p   split of the tiles in 2 [outer, register tiles <= 16]
//   tile_c   split of the input channel blocks (C/ic_block) in 2 [outer, inner]
//   gemm_order 0: k blocks outside the tiles, 1: tiles outside the k blocks
//   unroll_cb 0/1: unroll the ic_block-long lane loop of the product's reduction
//   in_order  0: input transform over (channel block, tile), 1: over (tile, channel block)
//   pad_inline 0/1 (with a pad stage only): pad inside the input transform, or once
//   parallel 0/1 (only 0 on one core): each stage's outer loop (input transform: its outer
//     loop; product: the alpha^2 fused; output transform: batch, k blocks and tile rows fused)
// Constraint: the product's accumulators (tile_k inner x vectors per oc block x tile_p inner)
// fit TargetTraits::accumulator_budget, as in conv2d_nchwc.
void define_space(const Shape& sh, int dtype_bits, const TargetTraits& target, ConfigSpace& space) {
  const int64_t vectors = vectors_per_block(sh.ocb, target.vector_lanes(dtype_bits));
  space.define_split("tile_k",
                     {.extent = sh.kblocks(), .num_outputs = 2, .max_innermost = kMaxTileK});
  space.define_split("tile_p",
                     {.extent = sh.tiles(), .num_outputs = 2, .max_innermost = kMaxTileP});
  space.define_split("tile_c", {.extent = sh.cblocks(), .num_outputs = 2});
  space.define_knob("gemm_order", std::vector<int64_t>{0, 1});
  space.define_knob("unroll_cb", std::vector<int64_t>{0, 1});
  space.define_knob("in_order", std::vector<int64_t>{0, 1});
  const bool padded = sh.pad > 0 || sh.oh % sh.m != 0 || sh.ow % sh.m != 0;
  space.define_knob("pad_inline", padded ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  define_parallel(space);
  space.add_constraint(
      "register tile fits the vector registers", [vectors, target](const EntityView& v) {
        const int64_t weights = v["tile_k"].values.back() * vectors;
        return weights * v["tile_p"].values.back() <= target.accumulator_budget(weights);
      });
}

// Two k blocks (each broadcast feeds two FMAs; a row of U when they pair up) and as many tiles
// as the accumulator budget leaves (the widest split within it: the closest one may exceed it), all
// input channels in one pass, padding done once, k blocks outside the tiles.
Config fallback(const Shape& sh, int dtype_bits, const TargetTraits& target,
                const ConfigSpace& space) {
  const int64_t vectors = vectors_per_block(sh.ocb, target.vector_lanes(dtype_bits));
  const int64_t ki = largest_divisor_at_most(sh.kblocks(), 2);
  const int64_t budget = target.accumulator_budget(ki * vectors) / (ki * vectors);
  const int64_t pi = std::clamp<int64_t>(budget, 1, kMaxTileP);
  std::vector<uint64_t> d(space.num_knobs(), 0);
  d[0] = closest_split(space.knob(0), {ki});
  d[1] = widest_split_at_most(space.knob(1), std::min(pi, sh.tiles()));
  d[2] = closest_split(space.knob(2), {sh.cblocks()});
  d[3] = closest_int(space.knob(3), 0);
  d[4] = closest_int(space.knob(4), 0);
  d[5] = closest_int(space.knob(5), 0);
  d[6] = closest_int(space.knob(6), 0);
  d[7] = closest_int(space.knob(7), target.cores > 1 ? 1 : 0);
  return pick_fallback(space, d);
}

std::vector<te::IterVar> split2(te::Stage st, const te::IterVar& axis, const Entity& e,
                                int64_t extent, const char* knob) {
  std::vector<te::IterVar> s = apply_split(st, axis, e, extent);
  if (s.size() != 2)
    throw Error(ErrorKind::kInstantiation, std::string(kName) + ": " + knob + " splits in 2");
  return s;
}

Instantiated apply(const WorkloadArgs& a, const Config& cfg) {
  const Shape sh = shape_of(a);
  Tensors t = make_tensors(a);
  te::Schedule s = te::create_schedule({t.out});
  const bool par = cfg["parallel"].as_int() != 0;

  // Input transform: per (channel block, tile), B^T d then (B^T d) B, all alpha loops unrolled
  // and the icb lanes as vectors.
  te::Stage v = s[t.v];
  const te::IterVar cb = v.axis(2), p = v.axis(3);
  const bool tile_outer = cfg["in_order"].as_int() != 0;
  v.reorder({tile_outer ? p : cb, tile_outer ? cb : p, v.axis(0), v.axis(1), v.axis(4)});
  v.unroll(v.axis(0));
  v.unroll(v.axis(1));
  v.vectorize(v.axis(4));
  if (par) v.parallel(tile_outer ? p : cb);
  te::Stage bd = s[t.bd];
  bd.compute_at(v, tile_outer ? cb : p);
  bd.unroll(bd.axis(2));
  bd.unroll(bd.axis(3));
  bd.vectorize(bd.axis(4));
  if (t.padded.defined()) schedule_blocked_pad(s[t.padded], cfg["pad_inline"].as_int() != 0, par);

  // The batched product: per (eps, nu) a register tile of tile_k oc blocks x tile_p tiles.
  const te::Tensor acc_t = s.cache_write(t.prod, "local");
  te::Stage prod = s[t.prod];
  const auto ks = split2(prod, prod.axis(2), cfg["tile_k"], sh.kblocks(), "tile_k");
  const auto ps = split2(prod, prod.axis(3), cfg["tile_p"], sh.tiles(), "tile_p");
  const bool k_outer = cfg["gemm_order"].as_int() == 0;
  prod.reorder({prod.axis(0), prod.axis(1), k_outer ? ks[0] : ps[0], k_outer ? ps[0] : ks[0], ks[1],
                ps[1], prod.axis(4)});
  const te::IterVar en = prod.fuse(prod.axis(0), prod.axis(1));
  if (par) prod.parallel(en);
  prod.vectorize(prod.axis(4));
  te::Stage acc = s[acc_t];
  acc.compute_at(prod, k_outer ? ps[0] : ks[0]);
  auto [ci, lane] = acc.split(acc.reduce_axis(0), sh.icb);
  const auto cs = split2(acc, ci, cfg["tile_c"], sh.cblocks(), "tile_c");
  // Tiles outside the k blocks in the tile: each broadcast input feeds tile_k FMAs back to back.
  acc.reorder(
      {acc.axis(0), acc.axis(1), cs[0], cs[1], lane, acc.axis(3), acc.axis(2), acc.axis(4)});
  acc.unroll(acc.axis(2));
  acc.unroll(acc.axis(3));
  acc.vectorize(acc.axis(4));
  unroll_if(acc, lane, cfg["unroll_cb"].as_int() != 0);

  // Output transform: per output tile, A^T M then (A^T M) A with the epilogue, rows and
  // columns of the tile unrolled, the ocb lanes as vectors.
  te::Stage out = s[t.out];
  auto [yo, yi] = out.split(out.axis(2), sh.m);
  auto [xo, xi] = out.split(out.axis(3), sh.m);
  out.reorder({out.axis(0), out.axis(1), yo, xo, yi, xi, out.axis(4)});
  const te::IterVar outer = out.fuse(out.fuse(out.axis(0), out.axis(1)), yo);
  if (par) out.parallel(outer);
  out.unroll(yi);
  out.unroll(xi);
  out.vectorize(out.axis(4));
  te::Stage am = s[t.am];
  am.compute_at(out, xo);
  am.unroll(am.axis(2));
  am.unroll(am.axis(3));
  am.vectorize(am.axis(4));
  return Instantiated{s, t.args()};
}

}  // namespace

void register_conv_winograd_nchwc_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = kName;
  // Its flop counts the direct conv's products; F(6x6, 3x3) computes 5.06x fewer.
  d.peak_multiple = 6;
  d.doc =
      "Winograd F(m x m, 3 x 3) conv2d on conv2d_nchwc's layouts: O[N,K/ocb,OH,OW,ocb] from "
      "I[N,C/icb,H,W,icb] and transformed weights U[alpha,alpha,K/ub,C/icb,icb,ub] "
      "(alpha = m + 2, ub = 2 ocb for an even number of oc blocks else ocb, U = G g G^T from "
      "winograd_transform_weights); 3x3, stride 1, dilation 1; "
      "epilogue as conv2d_nchwc; FLOPs are the direct convolution's. m is a workload argument, "
      "not a knob (U's shape depends on it): a model tries one task per m and keeps the fastest";
  d.args = {
      int_arg("N", "1", "batch"),
      int_arg("C", "", "input channels"),
      int_arg("H", "", "input height"),
      int_arg("W", "", "input width"),
      int_arg("K", "", "output channels"),
      int_arg("R", "3", "kernel height (3 only)"),
      int_arg("S", "3", "kernel width (3 only)"),
      int_arg("stride", "1", "stride (1 only)"),
      int_arg("pad", "0", "zero padding (both sides, both axes)", 0),
      int_arg("dilation", "1", "dilation (1 only)"),
      int_arg("m", "4", "output tile m x m: 2, 4 or 6 (larger: fewer FLOPs, more error)"),
      int_arg("ic_block", "0", "input channels per block (innermost of I); 0 as conv2d_nchwc", 0),
      int_arg("oc_block", "0",
              "output channels per block (innermost of U and O); 0 as conv2d_nchwc", 0)};
  for (ArgSpec& e :
       epilogue_args({.bias_doc = "bias[K/ocb,ocb]", .residual_doc = "residual like O"}))
    d.args.push_back(std::move(e));
  d.args.push_back(dtype_arg());
  d.resolve = [](WorkloadArgs& a) {
    resolve_channel_blocks(a);
    resolve_epilogue(a);
  };
  d.check = [](const WorkloadArgs& a) {
    check_epilogue(kName, a);
    shape_of(a);
  };
  d.compute = [](const WorkloadArgs& a) {
    Tensors t = make_tensors(a);
    return ComputeDef{t.args(), {t.out}};
  };
  d.flop = [](const WorkloadArgs& a) {
    const Shape sh = shape_of(a);
    return direct_conv_flop(sh.n, sh.k, sh.oh, sh.ow, sh.c, 9, sh.epilogue.flop());
  };
  d.define = [](const WorkloadArgs& a, const TargetTraits& target, ConfigSpace& space) {
    define_space(shape_of(a), dtype_of(a.get("dtype")).bits, target, space);
  };
  d.fallback = [](const WorkloadArgs& a, const TargetTraits& target, const ConfigSpace& space) {
    return fallback(shape_of(a), dtype_of(a.get("dtype")).bits, target, space);
  };
  d.apply = [](const WorkloadArgs& a, const TargetTraits&, const Config& cfg) {
    return apply(a, cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
