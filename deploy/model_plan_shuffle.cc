// The Planner's shuffles of channel-blocked data: DepthToSpace as one generated kernel from the
// channel-blocked input to the channel-blocked output, so that a ConvTranspose rewritten as a 1x1
// conv and a DepthToSpace (frontend's conv_transpose_as_conv) stays in the blocked layout between
// convs; and a Transpose of a conv's blocked output (through a Reshape) as one kernel that reads
// the blocked layout, instead of a conversion to ONNX's layout and then the transpose.
#include <algorithm>
#include <numeric>

#include "deploy/generated_schedule.h"
#include "deploy/model_planner.h"
#include "frontend/op_params.h"
#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

// In NCHWc of [n, c*s*s, h, w] (blocks of `ib` lanes) -> out NCHWc of [n, c, h*s, w*s] (blocks of
// `ob`; 0: NCHW): output channel k at (y, x) is input channel k*s*s + (y%s)*s + x%s (CRD) or
// ((y%s)*s + x%s)*c + k (DCR) at (y/s, x/s); lanes past c are zero. In DCR order (the phases of a
// transposed conv, frontend's conv_transpose_as_conv) runs of v = gcd(c, ib, ob) channels stay
// together: both tensors seen in sub-blocks of v lanes ([..][block/v][v], the same bytes), each
// output sub-block is a vector copy of one input sub-block.
te::LoweredFunc depth_to_space_blocked(const std::string& name, const std::vector<int64_t>& in,
                                       int64_t ib, int64_t ob, int64_t s, bool crd) {
  const int64_t n = in.at(0), cin = in.at(1), h = in.at(2), w = in.at(3), c = cin / (s * s);
  const int64_t in_blocks = (cin + ib - 1) / ib;
  if (ob == 0) {
    // Out in ONNX's layout (a map of fewer channels than a block that no conv reads: a
    // segmentation head's one-channel output, which blocks of ib lanes would pad ib-fold).
    te::Tensor x = te::placeholder({n, in_blocks, h, w, ib}, te::Float(32), "in");
    te::Tensor out = te::compute(
        {n, c, h * s, w * s},
        [&](te::Var i, te::Var k, te::Var y, te::Var xx) {
          const te::Expr offset = (y % s) * s + xx % s;
          const te::Expr ch = crd ? k * (s * s) + offset : offset * c + k;
          return x(i, ch / ib, y / s, xx / s, ch % ib);
        },
        "out");
    te::Schedule sch = te::create_schedule({out});
    parallel_leading(sch[out], 3);
    return te::lower(sch, {x, out}, name);
  }
  const int64_t out_blocks = (c + ob - 1) / ob;
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

// The axes of `from` and of `to` (one element count) in groups whose extents multiply to the same
// count: an axis split (one of `from`, several of `to`), merged (the reverse), or kept. A
// Reshape's index map goes group by group.
struct AxisGroup {
  std::vector<size_t> from, to;
};
std::vector<AxisGroup> reshape_groups(const std::vector<int64_t>& from,
                                      const std::vector<int64_t>& to) {
  std::vector<AxisGroup> groups;
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    AxisGroup g;
    int64_t a = 1, b = 1;
    if (i < from.size()) a *= from[i], g.from.push_back(i++);
    if (j < to.size()) b *= to[j], g.to.push_back(j++);
    while (a != b) {
      if (a < b && i < from.size())
        a *= from[i], g.from.push_back(i++);
      else if (b < a && j < to.size())
        b *= to[j], g.to.push_back(j++);
      else
        return {};  // not one element count
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

// out = Transpose(Reshape(x, view), perm) for x, [n, c, h, w], held in channel blocks of `block`
// lanes ([n, c/block, h, w, block]): each output element reads its blocked input element once.
// Per group of reshaped axes, the group's offset from the view's index, then the input's
// coordinates from it: a division only where the view merged input axes (ViT's patches, [c, h*w]).
te::LoweredFunc transpose_from_blocked(const std::string& name, const std::vector<int64_t>& nchw,
                                       int64_t block, const std::vector<int64_t>& view,
                                       const std::vector<int64_t>& perm) {
  const std::vector<AxisGroup> groups = reshape_groups(nchw, view);
  if (groups.empty() || nchw.size() != 4 || view.size() > kMaxRank || perm.size() != view.size())
    throw Error(ErrorKind::kInvalidArgument, "transpose_from_blocked: shapes do not match");
  const int64_t blocks = (nchw[1] + block - 1) / block;
  te::Tensor x = te::placeholder({nchw[0], blocks, nchw[2], nchw[3], block}, te::Float(32), "in");
  std::vector<int64_t> out_shape;
  for (int64_t p : perm) out_shape.push_back(view.at(static_cast<size_t>(p)));
  te::Tensor out = te::compute(
      out_shape,
      [&](const std::vector<te::Var>& i) {
        std::vector<te::Expr> v(view.size()), at(4);
        for (size_t k = 0; k < perm.size(); ++k) v[static_cast<size_t>(perm[k])] = i[k];
        for (const AxisGroup& g : groups) {
          te::Expr offset(int64_t{0});
          for (size_t d : g.to) offset = offset * view[d] + v[d];
          for (size_t k = g.from.size(); k-- > 1;) {
            at[g.from[k]] = offset % nchw[g.from[k]];
            offset = offset / nchw[g.from[k]];
          }
          if (!g.from.empty()) at[g.from[0]] = offset;
        }
        return x(at[0], at[1] / block, at[2], at[3], at[1] % block);
      },
      "out");
  te::Schedule sch = te::create_schedule({out});
  te::Stage st = sch[out];
  const int rank = out.ndim();
  const int64_t elements =
      std::accumulate(out_shape.begin(), out_shape.end(), int64_t{1}, std::multiplies<>());
  if (rank >= 2 && elements >= kParallelMin) {
    te::IterVar outer = st.axis(0);
    for (int d = 1; d + 1 < rank; ++d) outer = st.fuse(outer, st.axis(d));
    st.parallel(outer);
  }
  if (out_shape.back() >= kLanes) {
    auto [o, lanes] = st.split(st.axis(rank - 1), kLanes);
    (void)o;
    st.vectorize(lanes);
  }
  return te::lower(sch, {x, out}, name);
}

// The views that only reshape (the same elements in the same order, another shape).
bool is_reshape(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

}  // namespace

bool Planner::defer_blocked_view(const frontend::Node& n) {
  if (!is_reshape(n.op) || !n.domain.empty() || n.outputs.size() != 1) return false;
  auto cur = current_.find(n.inputs.at(0));
  if (cur == current_.end()) return false;
  const PlanTensor& in = plan_.tensors[cur->second];
  if (in.block <= 0 || in.shape.size() != 4 || in.dtype != te::Float(32)) return false;
  // Only a Transpose of it may read it (a kernel of its own), nothing else, no graph output.
  const std::string& out = n.outputs[0];
  if (std::count(g_.outputs.begin(), g_.outputs.end(), out) > 0) return false;
  int readers = 0;
  bool transposed = true;
  for (const frontend::Node& r : g_.nodes)
    for (const std::string& in_name : r.inputs)
      if (in_name == out) {
        ++readers;
        transposed = transposed && r.op == "Transpose" && r.domain.empty() &&
                     !frontend::transpose_is_view(g_, r);
      }
  if (readers != 1 || !transposed || !g_.shape(out)) return false;
  deferred_views_[out] = {n.inputs[0], n.name};
  return true;
}

bool Planner::plan_blocked_transpose(const frontend::Node& n) {
  if (n.op != "Transpose" || !n.domain.empty() || n.outputs.size() != 1) return false;
  // What the Transpose reads: a blocked tensor itself, or a deferred Reshape of one.
  const std::string& x = n.inputs.at(0);
  auto deferred = deferred_views_.find(x);
  const bool deferred_view = deferred != deferred_views_.end();
  const std::string source = deferred_view ? deferred->second.source : x;
  auto cur = current_.find(source);
  if (cur == current_.end()) return false;
  const PlanTensor& in = plan_.tensors[cur->second];
  if (in.block <= 0 || in.shape.size() != 4 || in.dtype != te::Float(32)) return false;
  const std::vector<int64_t> nchw = in.shape, view = known_shape(x);
  const int64_t block = in.block, from = cur->second;
  std::vector<int64_t> perm;
  try {
    perm = frontend::read_perm(n, view.size());
  } catch (const Error& e) {
    throw unsupported(n, e.what());
  }
  PlanStep step;
  step.layer = deferred_view ? deferred->second.node + "+" + n.name : n.name;
  step.kind = "elementwise";
  step.symbol = symbol("transpose_blocked");
  step.func = transpose_from_blocked(step.symbol, nchw, block, view, perm);
  step.args = {from, define(n.outputs[0], 0)};
  plan_.steps.push_back(std::move(step));
  return true;
}

void Planner::plan_depth_to_space(const frontend::Node& n) {
  const std::string& x = n.inputs.at(0);
  const std::vector<int64_t> in = known_shape(x);
  const int64_t s = n.int_or("blocksize", 0);
  const std::string mode = n.text_or("mode", "DCR");
  if (in.size() != 4 || s < 1 || in[1] % (s * s) != 0 || (mode != "DCR" && mode != "CRD"))
    throw unsupported(n, "a DepthToSpace of another form than 4-D DCR or CRD");
  // Read as the producer wrote it; written as the convs that read the result take it (no
  // conversion after), else in the same block, or in ONNX's layout when it has fewer channels
  // than a block (blocked, most of its lanes would be padding).
  const int64_t block = written_block(x);
  const int64_t wanted = conv_data_block(n.outputs.at(0));
  const int64_t out_block = wanted > 0 ? wanted : (in[1] / (s * s) < block ? 0 : block);
  PlanStep step;
  step.layer = n.name;
  step.kind = "layout";
  step.symbol = symbol("depth_to_space");
  step.func = depth_to_space_blocked(step.symbol, in, block, out_block, s, mode == "CRD");
  step.args = {form(x, block), define(n.outputs.at(0), out_block)};
  plan_.steps.push_back(std::move(step));
}

}  // namespace ktune::deploy
