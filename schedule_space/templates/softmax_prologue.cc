// batch_matmul's softmax prologue (softmax_prologue.h).
#include "schedule_space/templates/softmax_prologue.h"

#include <charconv>
#include <cmath>
#include <string>

#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

// float32 lanes of the reductions and of e (a wider vector than the target's is split by LLVM).
constexpr int64_t kLanes = 16;

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, "batch_matmul: " + message);
}

double parse_scale(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v))
    invalid("a_scale=" + text + " is not a finite number");
  return v;
}

}  // namespace

SoftmaxPrologue softmax_prologue(const te::Tensor& scores, double scale) {
  const te::Tensor s = scores;
  const int64_t batch = s.shape()[0], M = s.shape()[1], K = s.shape()[2];
  const te::Expr c = te::cast(s.dtype(), te::Expr(scale));
  const auto scaled = [&](const te::Expr& q, const te::Expr& i, const te::Expr& k) {
    return scale == 1 ? s(q, i, k) : s(q, i, k) * c;
  };
  SoftmaxPrologue p;
  p.top = row_reduce(
      Combine::kMax, {batch, M}, K, kLanes,
      [&](const std::vector<te::Var>& r, const te::Expr& k) { return scaled(r[0], r[1], k); },
      "top");
  const te::Tensor top = p.top.result;
  p.e = te::compute(
      {batch, M, K},
      [&](te::Var q, te::Var i, te::Var k) { return te::exp(scaled(q, i, k) - top(q, i)); }, "e");
  const te::Tensor e = p.e;
  p.total = row_reduce(
      Combine::kSum, {batch, M}, K, kLanes,
      [&](const std::vector<te::Var>& r, const te::Expr& k) { return e(r[0], r[1], k); }, "total");
  const te::Tensor total = p.total.result;
  p.inverse = te::compute(
      {batch, M},
      [&](te::Var q, te::Var i) { return te::cast(s.dtype(), te::Expr(1.0)) / total(q, i); },
      "inverse");
  return p;
}

void SoftmaxPrologue::schedule(te::Schedule& s, const te::Stage& out, const te::IterVar& at) const {
  for (const RowReduce* r : {&top, &total}) {
    r->schedule(s);
    s[r->result].compute_at(out, at);
  }
  te::Stage es = s[e];
  es.compute_at(out, at);
  if (e.shape()[2] >= kLanes) {
    auto [outer, lanes] = es.split(es.axis(2), kLanes);
    (void)outer;
    es.vectorize(lanes);
  }
  s[inverse].compute_at(out, at);
}

std::vector<ArgSpec> softmax_prologue_args() {
  return {{.name = "a_softmax",
           .default_value = "0",
           .doc = "1: A holds attention's scores S and the product reads softmax(a_scale * S) "
                  "over K (each row's probabilities computed where the product reads them)",
           .min_value = 0,
           .max_value = 1,
           .key_omits_default = true},
          {.name = "a_scale",
           .type = ArgSpec::Type::kString,
           .default_value = "1",
           .doc = "with a_softmax: the factor of the scores",
           .key_omits_default = true}};
}

void resolve_softmax_prologue(WorkloadArgs& w) {
  char buf[64];
  const float v = static_cast<float>(parse_scale(w.get("a_scale")));
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip float32
  if (ec != std::errc()) invalid("a_scale cannot be printed");
  w.set_string("a_scale", std::string(buf, ptr));
}

void check_softmax_prologue(const WorkloadArgs& w) {
  const double scale = parse_scale(w.get("a_scale"));
  if (w.get_int("a_softmax") == 0) {
    if (scale != 1) invalid("a_scale applies to a_softmax=1");
    return;
  }
  if (scale == 0) invalid("a_scale must not be 0");
  if (w.get_int("a_heads") != 0) invalid("a_softmax reads A as [batch,M,K], not from a_heads");
  if (w.get("dtype") != "float32") invalid("a_softmax takes float32 scores");
}

double softmax_scale(const WorkloadArgs& w) { return parse_scale(w.get("a_scale")); }

}  // namespace ktune::schedule_space::templates
