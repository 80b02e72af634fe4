// The generated kernels of a model build that index across elements: elementwise operators with
// broadcasting, LayerNorm and Softmax over the last axis, Transpose. Each keeps the plain schedule
// of the others: the leading axes fused and run in parallel, the innermost vectorized where the
// reads along it are contiguous.
#include <algorithm>
#include <functional>
#include <numeric>
#include <string>

#include "deploy/model_ops.h"
#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

constexpr int64_t kLanes = 16;
// Below this many elements a kernel runs on one thread: waking the pool costs more than the work.
constexpr int64_t kParallelMin = 4096;
constexpr size_t kMaxRank = 6;  // ONNX models stay within it; the kernels are tested up to it

te::Expr f(float v) { return te::Expr(v); }

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

// A reduction over the last axis of [rows, n], per row: sum or max of value(r, j) over j.
enum class Combine { kSum, kMax };

te::Expr combine(Combine c, const te::Expr& a, const te::Expr& b) {
  return c == Combine::kSum ? a + b : te::max(a, b);
}

te::Expr reduce(Combine c, const te::Expr& v, const te::IterVar& k) {
  return c == Combine::kSum ? te::sum(v, k) : te::max(v, k);
}

// The row reduction in kLanes partial results per row, kept in vector lanes, then over the lanes
// and the remainder: a plain reduction is one chain of n dependent adds per row (768 of them per
// LayerNorm row, a quarter of BERT's generated-kernel time), the lanes are kLanes independent
// chains of n / kLanes. The partial stages are computed at the row of the result, so the
// result's row loop is the only loop over rows (parallel from kParallelMin elements).
// `later` receives the scheduling of the partial stages, to run once the schedule exists.
using Later = std::vector<std::function<void(te::Schedule&)>>;
te::Tensor row_reduce(Later* later, Combine c, int64_t rows, int64_t n,
                      const std::function<te::Expr(const te::Expr&, const te::Expr&)>& value,
                      const std::string& name) {
  if (n < 2 * kLanes) {
    const te::IterVar k = te::reduce_axis({0, n}, name + "_k");
    return te::compute(
        {rows}, [&](te::Var r) { return reduce(c, value(r, k.var), k); }, name);
  }
  const int64_t q = n / kLanes, rem = n % kLanes;
  const te::IterVar ko = te::reduce_axis({0, q}, name + "_ko");
  const te::Tensor partial = te::compute(
      {rows, kLanes},
      [&](te::Var r, te::Var l) { return reduce(c, value(r, ko.var * te::Expr(kLanes) + l), ko); },
      name + "_lanes");
  const te::IterVar l = te::reduce_axis({0, kLanes}, name + "_l");
  const te::Tensor lanes = te::compute(
      {rows}, [&](te::Var r) { return reduce(c, partial(r, l.var), l); }, name + "_over_lanes");
  te::Tensor rest;
  if (rem > 0) {
    const te::IterVar t = te::reduce_axis({0, rem}, name + "_t");
    rest = te::compute(
        {rows}, [&](te::Var r) { return reduce(c, value(r, te::Expr(q * kLanes) + t.var), t); },
        name + "_rest");
  }
  const te::Tensor result = te::compute(
      {rows}, [&](te::Var r) { return rest.defined() ? combine(c, lanes(r), rest(r)) : lanes(r); },
      name);
  later->push_back([partial, lanes, rest, result](te::Schedule& s) {
    te::Stage ps = s[partial];
    ps.reorder({ps.axis(0), ps.reduce_axis(0), ps.axis(1)});
    ps.vectorize(ps.axis(1));
    const te::IterVar row = s[result].axis(0);
    ps.compute_at(s[result], row);
    s[lanes].compute_at(s[result], row);
    if (rest.defined()) s[rest].compute_at(s[result], row);
  });
  return result;
}

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
  if (broadcast_shape(a, b) != out)
    throw Error(ErrorKind::kInvalidArgument,
                "broadcast_binary: operand shapes do not broadcast to the output's");
  if (out.size() > kMaxRank)
    throw Error(ErrorKind::kUnsupported, "broadcast_binary: more than 6 axes");
  // A scalar (rank 0) is stored as one element.
  const auto stored = [](const std::vector<int64_t>& s) {
    return s.empty() ? std::vector<int64_t>{1} : s;
  };
  te::Tensor ta = te::placeholder(stored(a), te::Float(32), "a");
  te::Tensor tb = te::placeholder(stored(b), te::Float(32), "b");
  te::Tensor to = te::compute(
      stored(out),
      [&](const std::vector<te::Var>& i) {
        return binary(op, broadcast_read(ta, out.empty() ? out : a, i),
                      broadcast_read(tb, out.empty() ? out : b, i));
      },
      "out");
  te::Schedule s = te::create_schedule({to});
  schedule_plain(s, to, true);
  return te::lower(s, {ta, tb, to}, name);
}

te::LoweredFunc layer_norm(const std::string& name, const std::vector<int64_t>& shape, float eps) {
  const auto [rows, n] = rows_of(shape);
  te::Tensor x = te::placeholder({rows, n}, te::Float(32), "x");
  te::Tensor gamma = te::placeholder({n}, te::Float(32), "gamma");
  te::Tensor beta = te::placeholder({n}, te::Float(32), "beta");
  Later later;
  te::Tensor sum = row_reduce(
      &later, Combine::kSum, rows, n, [&](const te::Expr& r, const te::Expr& j) { return x(r, j); },
      "sum");
  const te::Expr inv_n = f(1.0f / static_cast<float>(n));
  // Two passes (the mean, then the squared deviations), as the decomposed graph computes it: one
  // pass of E[x^2] - E[x]^2 cancels badly when the mean is large against the spread.
  te::Tensor sq = row_reduce(
      &later, Combine::kSum, rows, n,
      [&](const te::Expr& r, const te::Expr& j) {
        const te::Expr d = x(r, j) - sum(r) * inv_n;
        return d * d;
      },
      "sq");
  te::Tensor out = te::compute(
      {rows, n},
      [&](te::Var r, te::Var j) {
        const te::Expr stddev = te::sqrt(sq(r) * inv_n + f(eps));
        return (x(r, j) - sum(r) * inv_n) / stddev * gamma(j) + beta(j);
      },
      "out");
  te::Schedule s = te::create_schedule({out});
  for (const auto& step : later) step(s);
  if (rows * n >= kParallelMin) {
    s[sum].parallel(s[sum].axis(0));
    s[sq].parallel(s[sq].axis(0));
  }
  schedule_plain(s, out, true);
  return te::lower(s, {x, gamma, beta, out}, name);
}

te::LoweredFunc softmax(const std::string& name, const std::vector<int64_t>& shape) {
  const auto [rows, n] = rows_of(shape);
  te::Tensor x = te::placeholder({rows, n}, te::Float(32), "x");
  Later later;
  te::Tensor top = row_reduce(
      &later, Combine::kMax, rows, n, [&](const te::Expr& r, const te::Expr& j) { return x(r, j); },
      "top");
  // Each exp once, in vector lanes (a stage of its own); the row sums then only add.
  te::Tensor e = te::compute(
      {rows, n}, [&](te::Var r, te::Var j) { return te::exp(x(r, j) - top(r)); }, "e");
  te::Tensor total = row_reduce(
      &later, Combine::kSum, rows, n, [&](const te::Expr& r, const te::Expr& j) { return e(r, j); },
      "total");
  te::Tensor out = te::compute(
      {rows, n}, [&](te::Var r, te::Var j) { return e(r, j) / total(r); }, "out");
  te::Schedule s = te::create_schedule({out});
  for (const auto& step : later) step(s);
  if (rows * n >= kParallelMin) {
    s[top].parallel(s[top].axis(0));
    s[total].parallel(s[total].axis(0));
  }
  schedule_plain(s, e, true);
  schedule_plain(s, out, true);
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
  // Vector lanes along the last output axis read contiguously only when it is the input's last.
  schedule_plain(s, out, perm.back() == static_cast<int64_t>(in.size()) - 1);
  return te::lower(s, {t, out}, name);
}

}  // namespace ktune::deploy
