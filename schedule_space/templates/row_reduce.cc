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

RowReduce row_reduce(Combine c, int64_t rows, int64_t n, int64_t lanes,
                     const std::function<te::Expr(const te::Expr&, const te::Expr&)>& value,
                     const std::string& name) {
  RowReduce r;
  if (n < 2 * lanes) {
    const te::IterVar k = te::reduce_axis({0, n}, name + "_k");
    r.result = te::compute(
        {rows}, [&](te::Var i) { return reduce(c, value(i, k.var), k); }, name);
    return r;
  }
  const int64_t q = n / lanes, rem = n % lanes;
  const te::IterVar ko = te::reduce_axis({0, q}, name + "_ko");
  r.partial = te::compute(
      {rows, lanes},
      [&](te::Var i, te::Var l) { return reduce(c, value(i, ko.var * te::Expr(lanes) + l), ko); },
      name + "_lanes");
  te::Tensor wide = r.partial;
  for (int64_t w = lanes / 2; w >= 1; w /= 2) {
    const te::Tensor from = wide;
    wide = te::compute(
        {rows, w},
        [&](te::Var i, te::Var j) { return combine(c, from(i, j), from(i, j + te::Expr(w))); },
        name + "_half" + std::to_string(w));
    r.halves.push_back(wide);
  }
  r.over_lanes = te::compute(
      {rows}, [&](te::Var i) { return wide(i, 0); }, name + "_over_lanes");
  if (rem > 0) {
    const te::IterVar t = te::reduce_axis({0, rem}, name + "_t");
    r.rest = te::compute(
        {rows}, [&](te::Var i) { return reduce(c, value(i, te::Expr(q * lanes) + t.var), t); },
        name + "_rest");
  }
  const te::Tensor over = r.over_lanes, rest = r.rest;
  r.result = te::compute(
      {rows}, [&](te::Var i) { return rest.defined() ? combine(c, over(i), rest(i)) : over(i); },
      name);
  return r;
}

void RowReduce::schedule(te::Schedule& s) const {
  if (!partial.defined()) return;
  te::Stage ps = s[partial];
  ps.reorder({ps.axis(0), ps.reduce_axis(0), ps.axis(1)});
  ps.vectorize(ps.axis(1));
  const te::IterVar row = s[result].axis(0);
  ps.compute_at(s[result], row);
  for (const te::Tensor& h : halves) {
    te::Stage hs = s[h];
    if (h.shape().back() > 1) hs.vectorize(hs.axis(1));
    hs.compute_at(s[result], row);
  }
  s[over_lanes].compute_at(s[result], row);
  if (rest.defined()) s[rest].compute_at(s[result], row);
}

}  // namespace ktune::schedule_space::templates
