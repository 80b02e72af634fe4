// ONNX operators on constants, computed in double precision (every int64 a shape holds is exact
// below 2^53; larger ones are clamped sentinels such as Slice's INT64_MAX end) and converted to
// the output's element type.
#include "frontend/constant_eval.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "frontend/op_params.h"
#include "support/error.h"

namespace ktune::frontend {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 24;

struct Val {
  std::vector<int64_t> shape;
  std::vector<double> v;
};

// A double that stands for an int64 (a sentinel such as INT64_MAX becomes +-2^62).
int64_t to_i64(double x) {
  constexpr double kLimit = 4611686018427387904.0;  // 2^62
  return static_cast<int64_t>(std::clamp(std::trunc(x), -kLimit, kLimit));
}

Val val_of(const ConstantValue& c) {
  Val v{c.shape, {}};
  if (!c.f32.empty())
    v.v.assign(c.f32.begin(), c.f32.end());
  else
    v.v.assign(c.i64.begin(), c.i64.end());
  return v;
}

bool is_float_type(const std::string& t) {
  return t == "float32" || t == "float64" || t == "float16" || t == "bfloat16";
}

ConstantValue constant_of(const Val& v, bool as_float) {
  ConstantValue c;
  c.shape = v.shape;
  if (as_float)
    c.f32.assign(v.v.begin(), v.v.end());
  else
    for (double x : v.v) c.i64.push_back(to_i64(x));
  return c;
}

std::vector<int64_t> ints_of(const Val& v) {
  std::vector<int64_t> out;
  for (double x : v.v) out.push_back(to_i64(x));
  return out;
}

int64_t axis_in(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// The element of `v` that output index `flat` of shape `out` reads under broadcasting.
double broadcast_at(const Val& v, const std::vector<int64_t>& out, int64_t flat) {
  int64_t offset = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t i = flat % out[d];
    flat /= out[d];
    const size_t vd = d + v.shape.size();
    if (vd < out.size()) continue;  // a leading axis v does not have
    const int64_t extent = v.shape[vd - out.size()];
    if (extent != 1) offset += i * stride;
    stride *= extent;
  }
  return v.v[static_cast<size_t>(offset)];
}

std::optional<Val> elementwise(const std::vector<Val>& in,
                               const std::function<double(const std::vector<double>&)>& f) {
  std::vector<int64_t> out = in.front().shape;
  for (const Val& v : in) {
    auto b = broadcast(out, v.shape);
    if (!b) return std::nullopt;
    out = *b;
  }
  if (count_of(out) > kMaxElements) return std::nullopt;
  Val r{out, std::vector<double>(static_cast<size_t>(count_of(out)))};
  std::vector<double> args(in.size());
  for (int64_t i = 0; i < count_of(out); ++i) {
    for (size_t k = 0; k < in.size(); ++k) args[k] = broadcast_at(in[k], out, i);
    r.v[static_cast<size_t>(i)] = f(args);
  }
  return r;
}

using Unary = std::function<double(double)>;
using Binary = std::function<double(double, double)>;

const std::map<std::string, Unary>& unary_ops() {
  static const std::map<std::string, Unary> kOps = {
      {"Neg", [](double x) { return -x; }},
      {"Abs", [](double x) { return std::fabs(x); }},
      {"Floor", [](double x) { return std::floor(x); }},
      {"Ceil", [](double x) { return std::ceil(x); }},
      {"Sqrt", [](double x) { return std::sqrt(x); }},
      {"Reciprocal", [](double x) { return 1 / x; }},
      {"Exp", [](double x) { return std::exp(x); }},
      {"Log", [](double x) { return std::log(x); }},
      {"Not", [](double x) { return x == 0 ? 1.0 : 0.0; }},
      {"Identity", [](double x) { return x; }},
  };
  return kOps;
}

const std::map<std::string, Binary>& binary_ops() {
  static const std::map<std::string, Binary> kOps = {
      {"Add", [](double a, double b) { return a + b; }},
      {"Sub", [](double a, double b) { return a - b; }},
      {"Mul", [](double a, double b) { return a * b; }},
      {"Div", [](double a, double b) { return a / b; }},
      {"Pow", [](double a, double b) { return std::pow(a, b); }},
      {"Max", [](double a, double b) { return std::max(a, b); }},
      {"Min", [](double a, double b) { return std::min(a, b); }},
      {"Equal", [](double a, double b) { return a == b ? 1.0 : 0.0; }},
      {"Less", [](double a, double b) { return a < b ? 1.0 : 0.0; }},
      {"LessOrEqual", [](double a, double b) { return a <= b ? 1.0 : 0.0; }},
      {"Greater", [](double a, double b) { return a > b ? 1.0 : 0.0; }},
      {"GreaterOrEqual", [](double a, double b) { return a >= b ? 1.0 : 0.0; }},
      {"And", [](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; }},
      {"Or", [](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; }},
      {"Xor", [](double a, double b) { return (a != 0) != (b != 0) ? 1.0 : 0.0; }},
  };
  return kOps;
}

// Ops that keep their input's elements in order and only give them another shape.
bool is_reshape(const std::string& op) {
  static const std::set<std::string> kOps = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};
  return kOps.count(op) > 0;
}

std::optional<Val> gather(const Val& data, const Val& indices, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  axis = axis_in(axis, rank);
  if (axis < 0 || axis >= rank) return std::nullopt;
  const int64_t extent = data.shape[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= data.shape[static_cast<size_t>(d)];
  Val r;
  r.shape.assign(data.shape.begin(), data.shape.begin() + axis);
  r.shape.insert(r.shape.end(), indices.shape.begin(), indices.shape.end());
  r.shape.insert(r.shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  for (int64_t o = 0; o < outer; ++o)
    for (double id : indices.v) {
      int64_t k = to_i64(id);
      if (k < 0) k += extent;
      if (k < 0 || k >= extent) return std::nullopt;
      for (int64_t i = 0; i < inner; ++i)
        r.v.push_back(data.v[static_cast<size_t>((o * extent + k) * inner + i)]);
    }
  return r;
}

std::optional<Val> concat(const std::vector<Val>& in, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(in.front().shape.size());
  axis = axis_in(axis, rank);
  if (axis < 0 || axis >= rank) return std::nullopt;
  Val r{in.front().shape, {}};
  r.shape[static_cast<size_t>(axis)] = 0;
  for (const Val& v : in) {
    if (static_cast<int64_t>(v.shape.size()) != rank) return std::nullopt;
    r.shape[static_cast<size_t>(axis)] += v.shape[static_cast<size_t>(axis)];
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= r.shape[static_cast<size_t>(d)];
  for (int64_t o = 0; o < outer; ++o)
    for (const Val& v : in) {
      const int64_t chunk = count_of(v.shape) / std::max<int64_t>(outer, 1);
      r.v.insert(r.v.end(), v.v.begin() + o * chunk, v.v.begin() + (o + 1) * chunk);
    }
  return r;
}

// ONNX Slice of `data` through its resolved window (op_params.h).
Val slice(const Val& data, const SliceWindow& w) {
  const std::vector<int64_t>&start = w.start, &step = w.step, &extent = w.extents;
  Val r{extent, {}};
  const std::vector<int64_t> in_strides = strides_of(data.shape);
  for (int64_t i = 0; i < count_of(extent); ++i) {
    int64_t rest = i, offset = 0;
    for (size_t d = extent.size(); d-- > 0;) {
      offset += (start[d] + rest % extent[d] * step[d]) * in_strides[d];
      rest /= extent[d];
    }
    r.v.push_back(data.v[static_cast<size_t>(offset)]);
  }
  return r;
}

// `perm` as read_perm gives it (a permutation of the axes).
Val transpose(const Val& data, const std::vector<int64_t>& perm) {
  const size_t rank = data.shape.size();
  Val r;
  for (int64_t p : perm) r.shape.push_back(data.shape[static_cast<size_t>(p)]);
  const std::vector<int64_t> in_strides = strides_of(data.shape);
  for (int64_t i = 0; i < count_of(r.shape); ++i) {
    int64_t rest = i, offset = 0;
    for (size_t d = rank; d-- > 0;) {
      offset += rest % r.shape[d] * in_strides[static_cast<size_t>(perm[d])];
      rest /= r.shape[d];
    }
    r.v.push_back(data.v[static_cast<size_t>(offset)]);
  }
  return r;
}

// The node's value, or nullopt; `in` holds the inputs' values (empty Val for an omitted one).
std::optional<Val> evaluate(const Node& n, const std::vector<std::optional<Val>>& in,
                            const Graph& g, bool float_out) {
  const auto input = [&](size_t i) -> const Val* {
    return i < in.size() && in[i] ? &*in[i] : nullptr;
  };
  const Val* x = input(0);
  if (n.op == "Shape" || n.op == "Size") {
    const auto shape = g.shape(n.inputs.at(0));
    if (!shape) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(shape->size());
    if (n.op == "Size") return Val{{}, {static_cast<double>(count_of(*shape))}};
    const int64_t start = std::clamp<int64_t>(axis_in(n.int_or("start", 0), rank), 0, rank);
    const int64_t end = std::clamp<int64_t>(axis_in(n.int_or("end", rank), rank), 0, rank);
    Val r{{std::max<int64_t>(end - start, 0)}, {}};
    for (int64_t d = start; d < end; ++d) r.v.push_back(static_cast<double>((*shape)[d]));
    return r;
  }
  if (n.op == "Constant") return std::nullopt;  // its value is read, not computed
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!n.inputs[i].empty() && !input(i)) return std::nullopt;
  if (n.op == "ConstantOfShape") {
    Val r{ints_of(*x), {}};
    if (count_of(r.shape) > kMaxElements) return std::nullopt;
    double fill = 0;
    if (auto it = n.attrs.find("value"); it != n.attrs.end() && it->second.tensor) {
      const Val v = val_of(*it->second.tensor);
      if (v.v.size() != 1) return std::nullopt;
      fill = v.v[0];
    }
    r.v.assign(static_cast<size_t>(count_of(r.shape)), fill);
    return r;
  }
  if (auto u = unary_ops().find(n.op); u != unary_ops().end()) {
    Val r = *x;
    for (double& e : r.v) e = u->second(e);
    return r;
  }
  if (auto b = binary_ops().find(n.op); b != binary_ops().end()) {
    std::vector<Val> operands;
    for (size_t i = 0; i < n.inputs.size(); ++i) operands.push_back(*input(i));
    if (operands.empty()) return std::nullopt;
    // An integer Div truncates (as ONNX Runtime's integer division does).
    const bool int_div = n.op == "Div" && !float_out;
    const Binary f = b->second;
    return elementwise(operands, [&](const std::vector<double>& a) {
      double acc = a[0];
      for (size_t k = 1; k < a.size(); ++k) acc = int_div ? std::trunc(acc / a[k]) : f(acc, a[k]);
      return acc;
    });
  }
  if (n.op == "Where")
    return elementwise({*input(0), *input(1), *input(2)},
                       [](const std::vector<double>& a) { return a[0] != 0 ? a[1] : a[2]; });
  if (n.op == "Expand") {
    auto out = broadcast(x->shape, ints_of(*input(1)));
    if (!out) return std::nullopt;
    Val shape_only{*out, std::vector<double>(static_cast<size_t>(count_of(*out)), 0)};
    return elementwise({*x, shape_only}, [](const std::vector<double>& a) { return a[0]; });
  }
  if (n.op == "Cast") {
    Val r = *x;
    const int64_t to = n.int_or("to", 0);
    if (to == 9)  // BOOL
      for (double& e : r.v) e = e != 0 ? 1 : 0;
    else if (!float_out)
      for (double& e : r.v) e = std::trunc(e);
    return r;
  }
  if (is_reshape(n.op)) {
    // The elements stay in order; the shape is the one inference gave the output.
    const auto out = g.shape(n.outputs.at(0));
    if (!out || count_of(*out) != count_of(x->shape)) return std::nullopt;
    return Val{*out, x->v};
  }
  if (n.op == "Gather") return gather(*x, *input(1), n.int_or("axis", 0));
  if (n.op == "Concat") {
    std::vector<Val> operands;
    for (size_t i = 0; i < n.inputs.size(); ++i) operands.push_back(*input(i));
    return concat(operands, n.int_or("axis", 0));
  }
  if (n.op == "Slice") {
    // Its parameters as the values folded so far (op_params.h reads every opset's form).
    const ConstantLookup folded = [&](const std::string& tensor) -> std::optional<ConstantValue> {
      for (size_t i = 1; i < n.inputs.size(); ++i)
        if (n.inputs[i] == tensor && input(i)) return constant_of(*input(i), false);
      return std::nullopt;
    };
    try {
      return slice(*x, slice_window(read_slice(g, n, folded), x->shape));
    } catch (const Error&) {
      return std::nullopt;  // a parameter not folded (yet), or out of range
    }
  }
  if (n.op == "Range") {
    const double start = x->v.at(0), limit = input(1)->v.at(0), delta = input(2)->v.at(0);
    if (delta == 0) return std::nullopt;
    const int64_t count =
        std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
    if (count > kMaxElements) return std::nullopt;
    Val r{{count}, {}};
    for (int64_t i = 0; i < count; ++i) r.v.push_back(start + static_cast<double>(i) * delta);
    return r;
  }
  if (n.op == "Transpose") {
    try {
      return transpose(*x, read_perm(n, x->shape.size()));
    } catch (const Error&) {
      return std::nullopt;  // no permutation: left for the model build to refuse
    }
  }
  return std::nullopt;
}

}  // namespace

bool is_foldable_op(const std::string& op) {
  static const std::set<std::string> kOps = {
      "Shape",   "Size",      "ConstantOfShape", "Where",  "Expand", "Cast",  "Reshape",  "Flatten",
      "Squeeze", "Unsqueeze", "Gather",          "Concat", "Slice",  "Range", "Transpose"};
  return kOps.count(op) || unary_ops().count(op) || binary_ops().count(op);
}

std::optional<std::vector<ConstantValue>> evaluate_constant(
    const Node& n, const std::vector<const ConstantValue*>& inputs, const Graph& graph) {
  if (!n.domain.empty() || !is_foldable_op(n.op) || n.outputs.size() != 1) return std::nullopt;
  std::vector<std::optional<Val>> in;
  int64_t elements = 0;
  for (const ConstantValue* c : inputs) {
    in.push_back(c ? std::optional<Val>(val_of(*c)) : std::nullopt);
    if (c) elements += count_of(c->shape);
  }
  if (elements > kMaxElements) return std::nullopt;
  const std::string type = graph.type(n.outputs[0]);
  // Without a known type: a float result when a float input made it.
  bool float_out = is_float_type(type);
  if (type.empty())
    for (const ConstantValue* c : inputs) float_out = float_out || (c && !c->f32.empty());
  std::optional<Val> r = evaluate(n, in, graph, float_out);
  if (!r || static_cast<int64_t>(r->v.size()) != count_of(r->shape)) return std::nullopt;
  return std::vector<ConstantValue>{constant_of(*r, float_out)};
}

}  // namespace ktune::frontend
