// The generated kernels of a model build that index across elements: elementwise operators with
// broadcasting, the per-channel affine of a BatchNormalization, LayerNorm, Softmax and LogSoftmax
// over any axis, reductions over any axes, Transpose. Each keeps the plain schedule of the others:
// the leading axes fused and run in parallel, the innermost vectorized where the reads along it
// are contiguous.
#include <algorithm>
#include <functional>
#include <numeric>
#include <string>

#include "deploy/generated_schedule.h"
#include "deploy/model_ops.h"
#include "schedule_space/templates/row_reduce.h"
#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

constexpr int64_t kTile = 16;  // a transpose's tile: 16 floats, one cache line, on each side

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

// Rows of the last axis: [product of the leading axes, last extent] (a scalar is one row of one).
std::pair<int64_t, int64_t> rows_of(const std::vector<int64_t>& shape) {
  if (shape.empty()) return {1, 1};
  return {product(shape) / shape.back(), shape.back()};
}

// The plain schedule of a stage of rank >= 1: the leading axes fused and parallel (from
// kParallelMin elements), the last split by the vector width and its inner part vectorized when
// `vector_last` (contiguous along it).
void schedule_plain(te::Schedule& s, const te::Tensor& t, bool vector_last) {
  te::Stage st = s[t];
  const int rank = t.ndim();
  if (rank >= 2 && t.num_elements() >= kParallelMin) {
    te::IterVar outer = st.axis(0);
    for (int d = 1; d + 1 < rank; ++d) outer = st.fuse(outer, st.axis(d));
    st.parallel(outer);
  }
  if (vector_last && t.shape().back() >= kLanes) {
    auto [o, lanes] = st.split(st.axis(rank - 1), kLanes);
    (void)o;
    st.vectorize(lanes);
  }
}

te::Expr binary(const std::string& op, const te::Expr& a, const te::Expr& b) {
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div") return a / b;
  if (op == "max") return te::max(a, b);
  if (op == "min") return te::min(a, b);
  if (op == "pow") return te::pow(a, b);
  if (op == "prelu") return te::select(a < f(0), a * b, a);
  throw Error(ErrorKind::kUnsupported, "no broadcasting kernel for '" + op + "'");
}

// The read of an operand of shape `s` at the output index `i` (numpy alignment: trailing axes).
te::Expr broadcast_read(const te::Tensor& t, const std::vector<int64_t>& s,
                        const std::vector<te::Var>& i) {
  std::vector<te::Expr> at;
  const size_t lead = i.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    at.push_back(s[d] == 1 ? te::Expr(0) : te::Expr(i[lead + d]));
  if (at.empty()) at.push_back(te::Expr(0));
  return t.read(at);
}

using schedule_space::templates::Combine;
using schedule_space::templates::row_reduce;
using schedule_space::templates::RowReduce;

}  // namespace

std::optional<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t x = d + a.size() >= rank ? a[d + a.size() - rank] : 1;
    const int64_t y = d + b.size() >= rank ? b[d + b.size() - rank] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[d] = std::max(x, y);
  }
  return out;
}

te::LoweredFunc broadcast_binary(const std::string& name, const std::string& op,
                                 const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                 const std::vector<int64_t>& out) {
  return broadcast_nary(name, op, {a, b}, out);
}

te::LoweredFunc broadcast_nary(const std::string& name, const std::string& op,
                               const std::vector<std::vector<int64_t>>& operands,
                               const std::vector<int64_t>& out) {
  if (operands.size() < 2)
    throw Error(ErrorKind::kInvalidArgument, "broadcast_nary: fewer than two operands");
  std::optional<std::vector<int64_t>> shape = operands[0];
  for (size_t k = 1; k < operands.size() && shape; ++k)
    shape = broadcast_shape(*shape, operands[k]);
  if (shape != out)
    throw Error(ErrorKind::kInvalidArgument,
                "broadcast_binary: operand shapes do not broadcast to the output's");
  if (out.size() > kMaxRank)
    throw Error(ErrorKind::kUnsupported, "broadcast_binary: more than 6 axes");
  // A scalar (rank 0) is stored as one element.
  const auto stored = [](const std::vector<int64_t>& s) {
    return s.empty() ? std::vector<int64_t>{1} : s;
  };
  std::vector<te::Tensor> args;
  for (size_t k = 0; k < operands.size(); ++k)
    args.push_back(te::placeholder(stored(operands[k]), te::Float(32),
                                   std::string(1, static_cast<char>('a' + k))));
  te::Tensor to = te::compute(
      stored(out),
      [&](const std::vector<te::Var>& i) {
        te::Expr acc = broadcast_read(args[0], out.empty() ? out : operands[0], i);
        for (size_t k = 1; k < args.size(); ++k)
          acc = binary(op, acc, broadcast_read(args[k], out.empty() ? out : operands[k], i));
        return acc;
      },
      "out");
  te::Schedule s = te::create_schedule({to});
  schedule_plain(s, to, true);
  args.push_back(to);
  return te::lower(s, args, name);
}

te::LoweredFunc channel_affine(const std::string& name, const std::vector<int64_t>& shape) {
  if (shape.size() < 2 || shape.size() > kMaxRank)
    throw Error(ErrorKind::kUnsupported, "channel_affine: rank below 2 or above 6");
  const int64_t channels = shape[1];
  te::Tensor x = te::placeholder(shape, te::Float(32), "x");
  te::Tensor scale = te::placeholder({channels}, te::Float(32), "scale");
  te::Tensor shift = te::placeholder({channels}, te::Float(32), "shift");
  te::Tensor out = te::compute(
      shape,
      [&](const std::vector<te::Var>& i) {
        return x.read(std::vector<te::Expr>(i.begin(), i.end())) * scale(i[1]) + shift(i[1]);
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  schedule_plain(s, out, true);
  return te::lower(s, {x, scale, shift, out}, name);
}

te::LoweredFunc layer_norm(const std::string& name, const std::vector<int64_t>& shape, float eps) {
  const auto [rows, n] = rows_of(shape);
  te::Tensor x = te::placeholder({rows, n}, te::Float(32), "x");
  te::Tensor gamma = te::placeholder({n}, te::Float(32), "gamma");
  te::Tensor beta = te::placeholder({n}, te::Float(32), "beta");
  const RowReduce sums = row_reduce(
      Combine::kSum, {rows}, n, kLanes,
      [&](const std::vector<te::Var>& r, const te::Expr& j) { return x(r[0], j); }, "sum");
  const te::Tensor sum = sums.result;
  const te::Expr inv_n = f(1.0f / static_cast<float>(n));
  // Two passes (the mean, then the squared deviations), as the decomposed graph computes it: one
  // pass of E[x^2] - E[x]^2 cancels badly when the mean is large against the spread.
  const RowReduce squares = row_reduce(
      Combine::kSum, {rows}, n, kLanes,
      [&](const std::vector<te::Var>& r, const te::Expr& j) {
        const te::Expr d = x(r[0], j) - sum(r[0]) * inv_n;
        return d * d;
      },
      "sq");
  const te::Tensor sq = squares.result;
  // One square root and one division per row, then multiplies.
  te::Tensor inverse = te::compute(
      {rows}, [&](te::Var r) { return f(1) / te::sqrt(sq(r) * inv_n + f(eps)); }, "inverse");
  te::Tensor out = te::compute(
      {rows, n},
      [&](te::Var r, te::Var j) {
        return (x(r, j) - sum(r) * inv_n) * inverse(r) * gamma(j) + beta(j);
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  sums.schedule(s);
  squares.schedule(s);
  // Row by row, as softmax_rows: a row's sums and its output at the output's row loop, so that the
  // row is read from memory once and one parallel loop runs the whole normalization (three took
  // 9.5 us for each of ViT-Tiny's [197, 192] LayerNorms at two threads).
  te::Stage o = s[out];
  const te::IterVar row = o.axis(0);
  if (rows * n >= kParallelMin) o.parallel(row);
  for (const te::Tensor& t : {sum, sq, inverse}) s[t].compute_at(o, row);
  if (n >= kLanes) {
    auto [outer, lanes] = o.split(o.axis(1), kLanes);
    (void)outer;
    o.vectorize(lanes);
  }
  return te::lower(s, {x, gamma, beta, out}, name);
}

namespace {

// x * scale, the scores a softmax takes (no multiply at a scale of 1).
te::Expr scaled(const te::Expr& x, float scale) { return scale == 1 ? x : x * f(scale); }

// Softmax (or LogSoftmax) of x * scale over the last axis of [rows, n]: the reductions in vector
// lanes (row_reduce).
te::LoweredFunc softmax_rows(const std::string& name, int64_t rows, int64_t n, bool log,
                             float scale) {
  te::Tensor x = te::placeholder({rows, n}, te::Float(32), "x");
  const RowReduce tops = row_reduce(
      Combine::kMax, {rows}, n, kLanes,
      [&](const std::vector<te::Var>& r, const te::Expr& j) { return scaled(x(r[0], j), scale); },
      "top");
  const te::Tensor top = tops.result;
  // Each exp once, in vector lanes (a stage of its own); the row sums then only add.
  te::Tensor e = te::compute(
      {rows, n}, [&](te::Var r, te::Var j) { return te::exp(scaled(x(r, j), scale) - top(r)); },
      "e");
  const RowReduce totals = row_reduce(
      Combine::kSum, {rows}, n, kLanes,
      [&](const std::vector<te::Var>& r, const te::Expr& j) { return e(r[0], j); }, "total");
  const te::Tensor total = totals.result;
  // LogSoftmax: x - (max + log(sum)), the log once per row.
  te::Tensor shift;
  if (log)
    shift = te::compute(
        {rows}, [&](te::Var r) { return top(r) + te::log(total(r)); }, "shift");
  // Softmax: one division per row, then multiplies.
  te::Tensor inverse;
  if (!log)
    inverse = te::compute(
        {rows}, [&](te::Var r) { return f(1) / total(r); }, "inverse");
  te::Tensor out = te::compute(
      {rows, n},
      [&](te::Var r, te::Var j) {
        return log ? scaled(x(r, j), scale) - shift(r) : e(r, j) * inverse(r);
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  tops.schedule(s);
  totals.schedule(s);
  // Row by row: the maximum, the exps, their sum and the output of a row are computed at the
  // output's row loop, so a row is read from memory once and its exps stay in L1 (four passes
  // over the whole tensor took 0.078 ms on ViT-Tiny's 3 x 197 x 197 scores, 0.5 MB).
  te::Stage o = s[out];
  const te::IterVar row = o.axis(0);
  if (rows * n >= kParallelMin) o.parallel(row);
  for (const te::Tensor& t : {top, e, total, log ? shift : inverse}) s[t].compute_at(o, row);
  for (const te::Tensor& t : {e, out})
    if (n >= kLanes) {
      te::Stage st = s[t];
      auto [outer, lanes] = st.split(st.axis(1), kLanes);
      (void)outer;
      st.vectorize(lanes);
    }
  return te::lower(s, {x, out}, name);
}

// The same over the middle axis of [outer, n, inner] (inner > 1): each reduction runs along the
// strided axis, the inner axis contiguous.
te::LoweredFunc softmax_middle(const std::string& name, int64_t outer, int64_t n, int64_t inner,
                               bool log, float scale) {
  te::Tensor x = te::placeholder({outer, n, inner}, te::Float(32), "x");
  const te::IterVar k = te::reduce_axis({0, n}, "k");
  te::Tensor top = te::compute(
      {outer, inner},
      [&](te::Var o, te::Var i) { return te::max(scaled(x(o, k.var, i), scale), k); }, "top");
  te::Tensor e = te::compute(
      {outer, n, inner},
      [&](te::Var o, te::Var j, te::Var i) {
        return te::exp(scaled(x(o, j, i), scale) - top(o, i));
      },
      "e");
  const te::IterVar t = te::reduce_axis({0, n}, "t");
  te::Tensor total = te::compute(
      {outer, inner}, [&](te::Var o, te::Var i) { return te::sum(e(o, t.var, i), t); }, "total");
  te::Tensor out = te::compute(
      {outer, n, inner},
      [&](te::Var o, te::Var j, te::Var i) {
        return log ? scaled(x(o, j, i), scale) - top(o, i) - te::log(total(o, i))
                   : e(o, j, i) / total(o, i);
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  schedule_plain(s, top, false);
  schedule_plain(s, e, true);
  schedule_plain(s, total, false);
  schedule_plain(s, out, true);
  return te::lower(s, {x, out}, name);
}

}  // namespace

te::LoweredFunc softmax(const std::string& name, const std::vector<int64_t>& shape, int64_t axis,
                        bool log, float scale) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) return softmax_rows(name, 1, 1, log, scale);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    throw Error(ErrorKind::kInvalidArgument, "softmax: axis out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[static_cast<size_t>(d)];
  const int64_t n = shape[static_cast<size_t>(axis)];
  return inner == 1 ? softmax_rows(name, outer, n, log, scale)
                    : softmax_middle(name, outer, n, inner, log, scale);
}

te::LoweredFunc reduce(const std::string& name, const std::string& op,
                       const std::vector<int64_t>& shape, const std::vector<int64_t>& axes) {
  if (op != "sum" && op != "mean" && op != "max" && op != "min")
    throw Error(ErrorKind::kUnsupported, "no reduction '" + op + "'");
  if (shape.size() > kMaxRank) throw Error(ErrorKind::kUnsupported, "reduce: more than 6 axes");
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= static_cast<int64_t>(shape.size()) || reduced[static_cast<size_t>(a)])
      throw Error(ErrorKind::kInvalidArgument, "reduce: a bad or repeated axis");
    reduced[static_cast<size_t>(a)] = true;
  }
  std::vector<int64_t> kept;
  std::vector<te::IterVar> over;
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) {
      kept.push_back(shape[d]);
    } else {
      over.push_back(te::reduce_axis({0, shape[d]}, "r" + std::to_string(d)));
      count *= shape[d];
    }
  }
  if (kept.empty()) kept.push_back(1);  // every axis reduced: one element
  te::Tensor x =
      te::placeholder(shape.empty() ? std::vector<int64_t>{1} : shape, te::Float(32), "x");
  te::Tensor out = te::compute(
      kept,
      [&](const std::vector<te::Var>& i) {
        std::vector<te::Expr> at;
        size_t next_kept = 0, next_over = 0;
        for (size_t d = 0; d < shape.size(); ++d)
          at.push_back(reduced[d] ? te::Expr(over[next_over++].var) : te::Expr(i[next_kept++]));
        if (shape.empty()) at.push_back(te::Expr(0));
        const te::Expr v = x.read(at);
        if (over.empty()) return v;  // nothing to reduce: a copy
        if (op == "max") return te::max(v, over);
        if (op == "min") return te::min(v, over);
        return te::sum(v, over);
      },
      op == "mean" ? "sum" : "out");
  if (op == "mean" && !over.empty()) {
    // The sum divided by the count, as ONNX Runtime computes the mean.
    const te::Tensor sum = out;
    out = te::compute(
        kept,
        [&](const std::vector<te::Var>& i) {
          return sum.read(std::vector<te::Expr>(i.begin(), i.end())) / f(static_cast<float>(count));
        },
        "out");
  }
  te::Schedule s = te::create_schedule({out});
  for (const te::Tensor& t : te::topo_order({out}))
    if (!t.is_placeholder()) schedule_plain(s, t, false);
  return te::lower(s, {x, out}, name);
}

te::LoweredFunc transpose(const std::string& name, const std::vector<int64_t>& in,
                          const std::vector<int64_t>& perm) {
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> axes(in.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (sorted != axes)
    throw Error(ErrorKind::kInvalidArgument, "transpose: perm is not a permutation of the axes");
  if (in.size() > kMaxRank) throw Error(ErrorKind::kUnsupported, "transpose: more than 6 axes");
  if (in.empty()) throw Error(ErrorKind::kInvalidArgument, "transpose: a scalar");
  std::vector<int64_t> out_shape;
  for (int64_t p : perm) out_shape.push_back(in[static_cast<size_t>(p)]);
  te::Tensor t = te::placeholder(in, te::Float(32), "in");
  te::Tensor out = te::compute(
      out_shape,
      [&](const std::vector<te::Var>& i) {
        std::vector<te::Expr> at(in.size());
        for (size_t k = 0; k < perm.size(); ++k) at[static_cast<size_t>(perm[k])] = i[k];
        return t.read(at);
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  const int rank = out.ndim();
  // q: where the input's last axis went. There, vector lanes along the last output axis read
  // contiguously.
  const int q = static_cast<int>(std::find(perm.begin(), perm.end(), rank - 1) - perm.begin());
  if (q == rank - 1 || out_shape[static_cast<size_t>(q)] < kTile || out_shape.back() < kTile) {
    schedule_plain(s, out, q == rank - 1);
    return te::lower(s, {t, out}, name);
  }
  // Otherwise the writes run along the output's last axis and the reads along axis q: tiles of
  // kTile x kTile of those two axes, so that each input line a tile reads is read whole while it
  // is in cache (the plain loop reads each input line once per output row, one element a time).
  te::Stage st = s[out];
  auto [qo, qi] = st.split(st.axis(q), kTile);
  auto [lo, li] = st.split(st.axis(rank - 1), kTile);
  st.reorder({qo, lo, qi, li});
  if (product(out_shape) >= kParallelMin) {
    // The axes before q and q's tiles, fused: batch and channels alone may be one iteration.
    te::IterVar outer = qo;
    if (q > 0) {
      outer = st.axis(0);
      for (int d = 1; d < q; ++d) outer = st.fuse(outer, st.axis(d));
      outer = st.fuse(outer, qo);
    }
    st.parallel(outer);
  }
  return te::lower(s, {t, out}, name);
}

}  // namespace ktune::deploy
