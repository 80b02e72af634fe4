// Row reductions in vector lanes (row_reduce.h).
#include "schedule_space/templates/row_reduce.h"

namespace ktune::schedule_space::templates {
namespace {

te::Expr reduce(Combine c, const te::Expr& v, const te::IterVar& k) {
  return c == Combine::kSum ? te::sum(v, k) : te::max(v, k);
}

}  // namespace

te::Expr combine(Combine c, const te::Expr& a, const te::Expr& b) {
  return c == Combine::kSum ? a + b : te::max(a, b);
}

namespace {

std::vector<int64_t> with(std::vector<int64_t> rows, int64_t last) {
  rows.push_back(last);
  return rows;
}

// The row index of a stage's index (its leading axes).
std::vector<te::Var> row_of(const std::vector<te::Var>& i, size_t rank) {
  return std::vector<te::Var>(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(rank));
}

te::Expr read(const te::Tensor& t, const std::vector<te::Var>& row, const te::Expr& last) {
  std::vector<te::Expr> at(row.begin(), row.end());
  at.push_back(last);
  return t.read(at);
}

te::Expr read(const te::Tensor& t, const std::vector<te::Var>& row) {
  return t.read(std::vector<te::Expr>(row.begin(), row.end()));
}

}  // namespace

RowReduce row_reduce(
    Combine c, const std::vector<int64_t>& rows, int64_t n, int64_t lanes,
    const std::function<te::Expr(const std::vector<te::Var>&, const te::Expr&)>& value,
    const std::string& name) {
  const size_t rank = rows.size();
  RowReduce r;
  if (n < 2 * lanes) {
    const te::IterVar k = te::reduce_axis({0, n}, name + "_k");
    r.result = te::compute(
        rows, [&](const std::vector<te::Var>& i) { return reduce(c, value(i, k.var), k); }, name);
    return r;
  }
  const int64_t q = n / lanes, rem = n % lanes;
  const te::IterVar ko = te::reduce_axis({0, q}, name + "_ko");
  r.partial = te::compute(
      with(rows, lanes),
      [&](const std::vector<te::Var>& i) {
        return reduce(c, value(row_of(i, rank), ko.var * te::Expr(lanes) + i[rank]), ko);
      },
      name + "_lanes");
  te::Tensor wide = r.partial;
  for (int64_t w = lanes / 2; w >= 1; w /= 2) {
    const te::Tensor from = wide;
    wide = te::compute(
        with(rows, w),
        [&](const std::vector<te::Var>& i) {
          const std::vector<te::Var> row = row_of(i, rank);
          return combine(c, read(from, row, i[rank]), read(from, row, i[rank] + te::Expr(w)));
        },
        name + "_half" + std::to_string(w));
    r.halves.push_back(wide);
  }
  r.over_lanes = te::compute(
      rows, [&](const std::vector<te::Var>& i) { return read(wide, i, te::Expr(0)); },
      name + "_over_lanes");
  if (rem > 0) {
    const te::IterVar t = te::reduce_axis({0, rem}, name + "_t");
    r.rest = te::compute(
        rows,
        [&](const std::vector<te::Var>& i) {
          return reduce(c, value(i, te::Expr(q * lanes) + t.var), t);
        },
        name + "_rest");
  }
  const te::Tensor over = r.over_lanes, rest = r.rest;
  r.result = te::compute(
      rows,
      [&](const std::vector<te::Var>& i) {
        return rest.defined() ? combine(c, read(over, i), read(rest, i)) : read(over, i);
      },
      name);
  return r;
}

void RowReduce::schedule(te::Schedule& s) const {
  if (!partial.defined()) return;
  const int rank = result.ndim();
  te::Stage ps = s[partial];
  std::vector<te::IterVar> order;
  for (int d = 0; d < rank; ++d) order.push_back(ps.axis(d));
  order.push_back(ps.reduce_axis(0));
  order.push_back(ps.axis(rank));
  ps.reorder(order);
  ps.vectorize(ps.axis(rank));
  const te::IterVar row = s[result].axis(rank - 1);
  ps.compute_at(s[result], row);
  for (const te::Tensor& h : halves) {
    te::Stage hs = s[h];
    if (h.shape().back() > 1) hs.vectorize(hs.axis(rank));
    hs.compute_at(s[result], row);
  }
  s[over_lanes].compute_at(s[result], row);
  if (rest.defined()) s[rest].compute_at(s[result], row);
}

}  // namespace ktune::schedule_space::templates
