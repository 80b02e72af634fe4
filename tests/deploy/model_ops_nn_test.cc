// Tests of the generated kernels that model builds run for exporters' operators: the ONNX
// activations, Max / Min / PRelu / Pow with broadcasting, the per-channel affine of a standalone
// BatchNormalization, Softmax and LogSoftmax on any axis, reductions on any axes, Concat, Slice,
// Gather, Pad and Resize. Each kernel is compiled for the host, its output NaN-filled before the
// run, and compared with a plain C++ reference written here from ONNX's definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "deploy/model_ops.h"
#include "frontend/operators.h"
#include "support/error.h"
#include "tests/deploy/model_ops_util.h"

namespace ktune::deploy {
namespace {

using Shape = std::vector<int64_t>;

// Calls fn(index) for every index of `shape` in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& fn) {
  Shape i(shape.size(), 0);
  for (int64_t flat = 0; flat < count_of(shape); ++flat) {
    fn(i);
    for (size_t k = shape.size(); k-- > 0;) {
      if (++i[k] < shape[k]) break;
      i[k] = 0;
    }
  }
}

// The row-major offset of `i` in `shape`.
int64_t offset(const Shape& shape, const Shape& i) {
  int64_t at = 0;
  for (size_t d = 0; d < shape.size(); ++d) at = at * shape[d] + i[d];
  return at;
}

// The element of an operand of shape `s` at output index `i` under numpy broadcasting.
float broadcast_at(const std::vector<float>& v, const Shape& s, const Shape& i) {
  int64_t at = 0;
  for (size_t d = 0; d < s.size(); ++d)
    at = at * s[d] + (s[d] == 1 ? 0 : i[i.size() - s.size() + d]);
  return v[static_cast<size_t>(at)];
}

double softplus(double x) { return std::log1p(std::exp(x)); }

TEST(ModelOpsNn, ActivationsMatchOnnxDefinitions) {
  const int64_t n = 1000;  // not a multiple of the vector width
  const std::vector<float> x = random(n, 11, -6.0f, 6.0f);
  struct Case {
    ElementwiseOp op;
    std::function<double(double)> ref;
  };
  ElementwiseOp hardsigmoid{"hardsigmoid"}, leaky{"leaky_relu"}, elu{"elu"}, selu{"selu"};
  hardsigmoid.alpha = 0.2f;
  hardsigmoid.beta = 0.5f;
  leaky.alpha = 0.01f;
  elu.alpha = 0.7f;
  selu.alpha = 1.67326319217681884765625f;
  selu.beta = 1.05070102214813232421875f;
  const std::vector<Case> cases = {
      {hardsigmoid, [](double v) { return std::max(0.0, std::min(1.0, 0.2 * v + 0.5)); }},
      {leaky, [](double v) { return v < 0 ? 0.01 * v : v; }},
      {elu, [](double v) { return v < 0 ? 0.7 * (std::exp(v) - 1) : v; }},
      {selu,
       [](double v) {
         const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
         return v <= 0 ? g * (a * std::exp(v) - a) : g * v;
       }},
      {{"tanh"}, [](double v) { return std::tanh(v); }},
      {{"softplus"}, softplus},
      {{"mish"}, [](double v) { return v * std::tanh(softplus(v)); }},
      {{"exp"}, [](double v) { return std::exp(v); }},
      {{"abs"}, [](double v) { return std::fabs(v); }},
      {{"neg"}, [](double v) { return -v; }},
      {{"gelu_tanh"},
       [](double v) {
         return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
       }},
  };
  for (const Case& c : cases) {
    std::vector<double> want;
    for (float v : x) want.push_back(c.ref(v));
    EXPECT_LE(worst(run(elementwise("act", c.op, n), {x}), want), 2e-6) << c.op.op;
  }
  // Tanh near 0 to 1e-6 of its value (not only of 1): x + x^3 ... where 1 - 2 / (e^2x + 1) cancels.
  std::vector<float> near_zero;
  for (float v = 1e-6f; v < 2.0f; v *= 1.37f) near_zero.insert(near_zero.end(), {v, -v});
  const std::vector<float> tanh_got =
      run(elementwise("tanh", ElementwiseOp{"tanh"}, static_cast<int64_t>(near_zero.size())),
          {near_zero});
  double tanh_relative = 0;
  for (size_t i = 0; i < near_zero.size(); ++i) {
    const double want = std::tanh(static_cast<double>(near_zero[i]));
    tanh_relative = std::max(tanh_relative, std::fabs(tanh_got[i] - want) / std::fabs(want));
  }
  EXPECT_LE(tanh_relative, 1e-6);
  // Softplus far out: no overflow to inf above, no underflow to a wrong 0 below.
  const std::vector<float> far = {-100.0f, -30.0f, 30.0f, 100.0f};
  std::vector<double> far_want;
  for (float v : far) far_want.push_back(softplus(v));
  EXPECT_LE(worst(run(elementwise("sp", ElementwiseOp{"softplus"}, 4), {far}), far_want), 1e-6);
  // Log and Reciprocal on positive inputs away from 0.
  const std::vector<float> positive = random(n, 12, 0.05f, 20.0f);
  std::vector<double> logs, reciprocals;
  for (float v : positive) logs.push_back(std::log(static_cast<double>(v)));
  for (float v : positive) reciprocals.push_back(1.0 / v);
  EXPECT_LE(worst(run(elementwise("log", ElementwiseOp{"log"}, n), {positive}), logs), 1e-6);
  EXPECT_LE(worst(run(elementwise("rcp", ElementwiseOp{"reciprocal"}, n), {positive}), reciprocals),
            1e-6);
  // The two-operand max and min of one shape.
  const std::vector<float> y = random(n, 13, -6.0f, 6.0f);
  for (const std::string op : {"max", "min"}) {
    std::vector<double> want;
    for (size_t i = 0; i < x.size(); ++i)
      want.push_back(op == "max" ? std::max(x[i], y[i]) : std::min(x[i], y[i]));
    EXPECT_EQ(worst(run(elementwise(op, ElementwiseOp{op}, n), {x, y}), want), 0.0) << op;
  }
}

// The operator table's elementwise rows name kernels that exist: each unary one an elementwise
// kernel's op, each binary one a broadcasting kernel's (which lowers).
TEST(ModelOpsNn, EveryElementwiseOperatorOfTheTableHasItsKernel) {
  int unary = 0, binary = 0;
  for (const frontend::OperatorInfo& info : frontend::operator_table()) {
    if (info.family == frontend::OpFamily::kUnary) {
      EXPECT_TRUE(is_elementwise(info.kernel)) << info.op << " -> " << info.kernel;
      ++unary;
    } else if (info.family == frontend::OpFamily::kBinary) {
      EXPECT_NO_THROW(broadcast_binary("k", info.kernel, {2, 3}, {3}, {2, 3})) << info.op;
      ++binary;
    }
  }
  EXPECT_EQ(unary, 19);
  EXPECT_EQ(binary, 9);
}

TEST(ModelOpsNn, MaxMinPreluPowBroadcast) {
  struct Case {
    std::string op;
    Shape a, b;
  };
  const std::vector<Case> cases = {{"max", {2, 3, 4, 5}, {3, 1, 1}},
                                   {"min", {2, 3, 4, 5}, {}},
                                   {"prelu", {1, 3, 4, 17}, {3, 1, 1}},  // PyTorch's slope
                                   {"prelu", {2, 6, 5}, {5}},
                                   {"pow", {2, 3, 18}, {2, 3, 18}}};
  for (const Case& c : cases) {
    const Shape out = *broadcast_shape(c.a, c.b);
    std::vector<float> a = random(count_of(c.a), 21, -2.0f, 2.0f);
    const std::vector<float> b = random(std::max<int64_t>(count_of(c.b), 1), 22, -2.0f, 2.0f);
    if (c.op == "pow")
      for (float& v : a) v = std::fabs(v) + 0.1f;  // a positive base
    std::vector<double> want;
    for_each_index(out, [&](const Shape& i) {
      const double p = broadcast_at(a, c.a, i), q = broadcast_at(b, c.b, i);
      want.push_back(c.op == "max"   ? std::max(p, q)
                     : c.op == "min" ? std::min(p, q)
                     : c.op == "pow" ? std::pow(p, q)
                                     : (p < 0 ? p * q : p));
    });
    EXPECT_LE(worst(run(broadcast_binary("bc", c.op, c.a, c.b, out), {a, b}), want), 1e-6)
        << c.op << " rank " << out.size();
  }
  // Max of three operands of different shapes.
  const std::vector<Shape> shapes = {{2, 1, 5}, {3, 1}, {5}};
  const Shape out = {2, 3, 5};
  std::vector<std::vector<float>> in;
  for (size_t k = 0; k < shapes.size(); ++k) in.push_back(random(count_of(shapes[k]), 30 + k));
  std::vector<double> want;
  for_each_index(out, [&](const Shape& i) {
    double m = -INFINITY;
    for (size_t k = 0; k < shapes.size(); ++k)
      m = std::max<double>(m, broadcast_at(in[k], shapes[k], i));
    want.push_back(m);
  });
  EXPECT_EQ(worst(run(broadcast_nary("max3", "max", shapes, out), in), want), 0.0);
  EXPECT_THROW(broadcast_nary("bad", "max", {{2, 3}, {4, 3}}, {4, 3}), Error);
}

TEST(ModelOpsNn, ChannelAffineScalesEachChannel) {
  for (const Shape& shape : {Shape{2, 3, 5, 7}, Shape{1, 20, 33}, Shape{4, 6}}) {
    const int64_t c = shape[1];
    int64_t inner = 1;
    for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
    const std::vector<float> x = random(count_of(shape), 41), s = random(c, 42), t = random(c, 43);
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t ch = i / static_cast<size_t>(inner) % static_cast<size_t>(c);
      want[i] = static_cast<double>(x[i]) * s[ch] + t[ch];
    }
    EXPECT_LE(worst(run(channel_affine("bn", shape), {x, s, t}), want), 1e-6) << shape.size();
  }
}

// Softmax(x * scale) on each axis: scale 1 (a plain Softmax), attention's 1/8, and a negative one
// (the maximum of the scaled scores is then at the input's minimum).
TEST(ModelOpsNn, SoftmaxAndLogSoftmaxOfScaledScoresOnEveryAxis) {
  const Shape shape = {2, 5, 3, 20};
  const std::vector<float> x = random(count_of(shape), 51, -30.0f, 30.0f);
  for (const float scale : {1.0f, 0.125f, -3.0f})
    for (int64_t axis = 0; axis < 4; ++axis) {
      for (const bool log : {false, true}) {
        std::vector<double> want(x.size());
        // Along `axis` through every index whose axis coordinate is 0.
        Shape lines = shape;
        lines[static_cast<size_t>(axis)] = 1;
        for_each_index(lines, [&](const Shape& i) {
          Shape j = i;
          double top = -INFINITY, total = 0;
          const auto y = [&] { return double{scale} * x[static_cast<size_t>(offset(shape, j))]; };
          for (j[axis] = 0; j[axis] < shape[axis]; ++j[axis]) top = std::max<double>(top, y());
          for (j[axis] = 0; j[axis] < shape[axis]; ++j[axis]) total += std::exp(y() - top);
          for (j[axis] = 0; j[axis] < shape[axis]; ++j[axis]) {
            const double v = y() - top;
            want[static_cast<size_t>(offset(shape, j))] =
                log ? v - std::log(total) : std::exp(v) / total;
          }
        });
        // The kernel rounds x * scale to float32 (up to 90 here), the reference does not.
        EXPECT_LE(worst(run(softmax("sm", shape, axis, log, scale), {x}), want),
                  scale == 1 ? 2e-6 : 1e-5)
            << "axis " << axis << " log " << log << " scale " << scale;
      }
    }
  // A negative axis counts from the end.
  const std::vector<float> got = run(softmax("sm", shape, -1, false), {x});
  const std::vector<float> same = run(softmax("sm", shape, 3, false), {x});
  EXPECT_EQ(got, same);
}

TEST(ModelOpsNn, ReductionsOnAnyAxes) {
  const Shape shape = {2, 3, 4, 18};
  const std::vector<float> x = random(count_of(shape), 61, -3.0f, 3.0f);
  for (const std::string op : {"sum", "mean", "max", "min"}) {
    for (const Shape& axes : {Shape{1}, Shape{0, 2}, Shape{3}, Shape{0, 1, 2, 3}, Shape{}}) {
      std::vector<bool> reduced(shape.size(), false);
      for (int64_t a : axes) reduced[static_cast<size_t>(a)] = true;
      Shape kept;
      for (size_t d = 0; d < shape.size(); ++d)
        if (!reduced[d]) kept.push_back(shape[d]);
      if (kept.empty()) kept.push_back(1);
      std::vector<double> acc(static_cast<size_t>(count_of(kept)), op == "max"   ? -INFINITY
                                                                   : op == "min" ? INFINITY
                                                                                 : 0.0);
      for_each_index(shape, [&](const Shape& i) {
        Shape k;
        for (size_t d = 0; d < shape.size(); ++d)
          if (!reduced[d]) k.push_back(i[d]);
        if (k.empty()) k.push_back(0);
        double& a = acc[static_cast<size_t>(offset(kept, k))];
        const double v = x[static_cast<size_t>(offset(shape, i))];
        a = op == "max" ? std::max(a, v) : op == "min" ? std::min(a, v) : a + v;
      });
      if (op == "mean")
        for (double& a : acc) a /= static_cast<double>(count_of(shape)) / count_of(kept);
      EXPECT_LE(worst(run(reduce("r", op, shape, axes), {x}), acc), 2e-6)
          << op << " over " << axes.size() << " axes";
    }
  }
  EXPECT_THROW(reduce("r", "sum", shape, {4}), Error);
  EXPECT_THROW(reduce("r", "prod", shape, {1}), Error);
}

TEST(ModelOpsNn, ConcatAlongEachAxis) {
  struct Case {
    std::vector<Shape> inputs;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{{2, 3, 4}, {2, 1, 4}, {2, 2, 4}}, 1},
                                   {{{2, 3, 5}, {2, 3, 20}}, 2},
                                   {{{1, 4, 3, 3}, {2, 4, 3, 3}}, 0},
                                   {{{3, 7}}, 1}};
  for (const Case& c : cases) {
    std::vector<std::vector<float>> in;
    for (size_t k = 0; k < c.inputs.size(); ++k)
      in.push_back(random(count_of(c.inputs[k]), 70 + k));
    Shape out = c.inputs[0];
    out[static_cast<size_t>(c.axis)] = 0;
    for (const Shape& s : c.inputs)
      out[static_cast<size_t>(c.axis)] += s[static_cast<size_t>(c.axis)];
    std::vector<double> want;
    for_each_index(out, [&](const Shape& i) {
      Shape j = i;
      size_t k = 0;
      while (j[c.axis] >= c.inputs[k][c.axis]) j[c.axis] -= c.inputs[k++][c.axis];
      want.push_back(in[k][static_cast<size_t>(offset(c.inputs[k], j))]);
    });
    EXPECT_EQ(worst(run(concat("cat", c.inputs, c.axis), in), want), 0.0) << "axis " << c.axis;
  }
}

TEST(ModelOpsNn, StridedSliceAndGather) {
  const Shape in = {4, 6, 20};
  const std::vector<float> x = random(count_of(in), 81);
  struct Slice {
    Shape start, step, out;
  };
  for (const Slice& s :
       {Slice{{1, 5, 2}, {2, -1, 3}, {2, 3, 6}}, Slice{{0, 1, 3}, {1, 1, 1}, {4, 5, 17}},
        Slice{{3, 0, 19}, {-3, 2, -1}, {2, 3, 20}}}) {
    std::vector<double> want;
    for_each_index(s.out, [&](const Shape& i) {
      Shape j(3);
      for (size_t d = 0; d < 3; ++d) j[d] = s.start[d] + i[d] * s.step[d];
      want.push_back(x[static_cast<size_t>(offset(in, j))]);
    });
    EXPECT_EQ(worst(run(strided_slice("slice", in, s.start, s.step, s.out), {x}), want), 0.0);
  }
  EXPECT_THROW(strided_slice("slice", in, {0, 0, 0}, {1, 1, 2}, {4, 6, 11}), Error);
  struct Take {
    int64_t axis;
    Shape indices;
  };
  for (const Take& t : {Take{0, {2}}, Take{1, {3, 0, 3}}, Take{2, {4, 2, 0}}, Take{2, {0, 2, 4, 6}},
                        Take{2, {19, 3, 7, 0, 11}}}) {
    Shape out = in;
    out[static_cast<size_t>(t.axis)] = static_cast<int64_t>(t.indices.size());
    std::vector<double> want;
    for_each_index(out, [&](const Shape& i) {
      Shape j = i;
      j[t.axis] = t.indices[static_cast<size_t>(i[t.axis])];
      want.push_back(x[static_cast<size_t>(offset(in, j))]);
    });
    EXPECT_EQ(worst(run(gather("gather", in, t.axis, t.indices), {x}), want), 0.0)
        << "axis " << t.axis << " first " << t.indices[0];
  }
  EXPECT_THROW(gather("gather", in, 1, {6}), Error);
}

// Gather from a table at indices read at run time (an embedding's token ids), along the first,
// a middle and the last axis, with a 2-D index tensor: a negative index counts from the end, one
// past either end reads the nearest row. The indices go in as int32 bits (the kernel's int64 form
// runs in op_embedding against ONNX Runtime).
TEST(ModelOpsNn, GatherRowsOfATableAtIndicesReadAtRunTime) {
  const Shape table = {5, 3, 4};
  const std::vector<float> x = random(count_of(table), 83);
  const Shape ids_shape = {2, 3};
  const std::vector<int32_t> ids = {0, 4, -1, 2, 7, -9};  // -1: the last; 7, -9: clamped
  std::vector<float> bits(ids.size());
  std::memcpy(bits.data(), ids.data(), ids.size() * sizeof(int32_t));
  for (int64_t axis = 0; axis < 3; ++axis) {
    const int64_t rows = table[static_cast<size_t>(axis)];
    Shape out(table.begin(), table.begin() + axis);
    out.insert(out.end(), ids_shape.begin(), ids_shape.end());
    out.insert(out.end(), table.begin() + axis + 1, table.end());
    std::vector<double> want;
    for_each_index(out, [&](const Shape& i) {
      int64_t k = ids[static_cast<size_t>(i[static_cast<size_t>(axis)] * 3 +
                                          i[static_cast<size_t>(axis) + 1])];
      if (k < 0) k += rows;
      k = std::clamp<int64_t>(k, 0, rows - 1);
      Shape j(i.begin(), i.begin() + axis);
      j.push_back(k);
      j.insert(j.end(), i.begin() + axis + 2, i.end());
      want.push_back(x[static_cast<size_t>(offset(table, j))]);
    });
    EXPECT_EQ(worst(run(gather_rows("rows", table, axis, ids_shape, te::Int(32)), {x, bits}), want),
              0.0)
        << "axis " << axis;
  }
  EXPECT_THROW(gather_rows("rows", table, 3, ids_shape, te::Int(64)), Error);
  EXPECT_THROW(gather_rows("rows", table, 0, ids_shape, te::Float(32)), Error);
}

TEST(ModelOpsNn, PadConstantReflectEdge) {
  const Shape in = {2, 3, 4, 5};
  const std::vector<float> x = random(count_of(in), 91);
  struct Case {
    std::string mode;
    Shape begin, end;
  };
  const std::vector<Case> cases = {{"constant", {0, 1, 2, 1}, {1, 0, 1, 2}},
                                   {"constant", {0, 0, -1, 1}, {0, 0, 1, -2}},  // crops
                                   {"reflect", {0, 0, 2, 3}, {0, 0, 3, 1}},
                                   {"edge", {0, 1, 5, 6}, {0, 2, 4, 12}}};
  for (const Case& c : cases) {
    Shape out(4);
    for (size_t d = 0; d < 4; ++d) out[d] = in[d] + c.begin[d] + c.end[d];
    std::vector<double> want;
    for_each_index(out, [&](const Shape& i) {
      Shape j(4);
      bool inside = true;
      for (size_t d = 0; d < 4; ++d) {
        int64_t v = i[d] - c.begin[d];
        if (c.mode == "reflect") v = v < 0 ? -v : v >= in[d] ? 2 * (in[d] - 1) - v : v;
        if (c.mode == "edge") v = std::clamp<int64_t>(v, 0, in[d] - 1);
        inside = inside && v >= 0 && v < in[d];
        j[d] = v;
      }
      want.push_back(inside ? x[static_cast<size_t>(offset(in, j))] : 0.5);
    });
    EXPECT_EQ(worst(run(pad("pad", in, c.begin, c.end, c.mode, 0.5f), {x}), want), 0.0) << c.mode;
  }
  EXPECT_THROW(pad("pad", in, {0, 0, 4, 0}, {0, 0, 0, 0}, "reflect", 0), Error);
}

// ONNX's Resize of one axis written from the operator's definition: the input coordinate of an
// output index, then the nearest index or the two neighbours and their weights.
double resize_reference(const std::vector<float>& x, const Shape& in, int64_t oh, int64_t ow,
                        float sh, float sw, const std::string& mode, const std::string& coords,
                        const std::string& nearest, int64_t n, int64_t c, int64_t y, int64_t xo) {
  const auto original = [&](int64_t o, int64_t length_in, int64_t length_out, float scale) {
    const float v = static_cast<float>(o);
    if (coords == "asymmetric") return v / scale;
    if (coords == "align_corners")
      return length_out == 1
                 ? 0.0f
                 : v * static_cast<float>(length_in - 1) / static_cast<float>(length_out - 1);
    if (coords == "pytorch_half_pixel") return length_out > 1 ? (v + 0.5f) / scale - 0.5f : 0.0f;
    return (v + 0.5f) / scale - 0.5f;  // half_pixel
  };
  const float cy = original(y, in[2], oh, sh), cx = original(xo, in[3], ow, sw);
  const auto at = [&](int64_t r, int64_t q) {
    return static_cast<double>(x[static_cast<size_t>(((n * in[1] + c) * in[2] + r) * in[3] + q)]);
  };
  if (mode == "nearest") {
    const auto pick = [&](float v, int64_t length) {
      const double fl = std::floor(v);
      int64_t i;
      if (nearest == "floor")
        i = static_cast<int64_t>(fl);
      else if (nearest == "ceil")
        i = static_cast<int64_t>(std::ceil(v));
      else if (v - fl == 0.5)
        i = static_cast<int64_t>(nearest == "round_prefer_ceil" ? fl + 1 : fl);
      else
        i = static_cast<int64_t>(std::round(v));
      return std::clamp<int64_t>(i, 0, length - 1);
    };
    return at(pick(cy, in[2]), pick(cx, in[3]));
  }
  const auto neighbours = [](float v, int64_t length) {
    const double p = std::clamp<double>(v, 0, static_cast<double>(length - 1));
    const int64_t lo = static_cast<int64_t>(std::floor(p)), hi = std::min(lo + 1, length - 1);
    return std::tuple{lo, hi, p - static_cast<double>(lo)};
  };
  const auto [y0, y1, ly] = neighbours(cy, in[2]);
  const auto [x0, x1, lx] = neighbours(cx, in[3]);
  return (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) +
         ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
}

TEST(ModelOpsNn, ResizeNearestAndLinearInEveryCoordinateMode) {
  const Shape in = {1, 2, 5, 7};
  const std::vector<float> x = random(count_of(in), 101);
  struct Case {
    std::string mode, coords, nearest;
    int64_t oh, ow;
    float sh, sw;  // 0: out / in (sizes given)
  };
  const std::vector<Case> cases = {
      {"nearest", "half_pixel", "round_prefer_floor", 10, 14, 2, 2},
      {"nearest", "asymmetric", "round_prefer_floor", 10, 21, 2, 3},
      {"nearest", "asymmetric", "round_prefer_ceil", 10, 21, 2, 3},
      {"nearest", "asymmetric", "floor", 3, 4, 0.6f, 0.6f},
      {"nearest", "align_corners", "ceil", 9, 13, 0, 0},
      {"linear", "half_pixel", "", 10, 14, 2, 2},
      {"linear", "align_corners", "", 9, 13, 0, 0},
      {"linear", "asymmetric", "", 3, 20, 0, 0},
      {"linear", "pytorch_half_pixel", "", 1, 13, 0, 0},
  };
  for (const Case& c : cases) {
    const float sh = c.sh > 0 ? c.sh : static_cast<float>(c.oh) / static_cast<float>(in[2]);
    const float sw = c.sw > 0 ? c.sw : static_cast<float>(c.ow) / static_cast<float>(in[3]);
    const std::string nearest = c.nearest.empty() ? "round_prefer_floor" : c.nearest;
    const std::vector<float> ht =
        resize_table(frontend::resize_axis(in[2], c.oh, sh, c.mode, c.coords, nearest));
    const std::vector<float> wt =
        resize_table(frontend::resize_axis(in[3], c.ow, sw, c.mode, c.coords, nearest));
    std::vector<double> want;
    for_each_index({in[0], in[1], c.oh, c.ow}, [&](const Shape& i) {
      want.push_back(resize_reference(x, in, c.oh, c.ow, sh, sw, c.mode, c.coords, nearest, i[0],
                                      i[1], i[2], i[3]));
    });
    EXPECT_LE(worst(run(resize("resize", in, c.oh, c.ow, c.mode == "linear"), {x, ht, wt}), want),
              1e-6)
        << c.mode << " " << c.coords << " " << c.nearest;
  }
  EXPECT_THROW(frontend::resize_axis(5, 10, 2, "cubic", "half_pixel", "floor"), Error);
  EXPECT_THROW(frontend::resize_axis(5, 10, 2, "linear", "tf_crop_and_resize", "floor"), Error);
}

}  // namespace
}  // namespace ktune::deploy
