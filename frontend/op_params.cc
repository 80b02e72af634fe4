// The readers of operator parameters in every opset's form (op_params.h).
#include "frontend/op_params.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "support/error.h"

namespace ktune::frontend {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Error unsupported(const std::string& why) { return Error(ErrorKind::kUnsupported, why); }

bool is_integer_type(const std::string& type) {
  return type.rfind("int", 0) == 0 || type.rfind("uint", 0) == 0;
}

// Input `index` of `n`, or nullptr when the node omits it ("" or past its inputs).
const std::string* input_at(const Node& n, size_t index) {
  return index < n.inputs.size() && !n.inputs[index].empty() ? &n.inputs[index] : nullptr;
}

// The integer values of input `index` (`what` names it in the error); nullopt when omitted.
std::optional<std::vector<int64_t>> ints_at(const Node& n, size_t index, const char* what,
                                            const ConstantLookup& constants) {
  const std::string* tensor = input_at(n, index);
  if (!tensor) return std::nullopt;
  const auto c = constants(*tensor);
  if (!c || static_cast<int64_t>(c->i64.size()) != count_of(c->shape))
    throw unsupported(std::string(what) + " input '" + *tensor + "' is no integer constant");
  return c->i64;
}

// The real values of input `index`; nullopt when omitted.
std::optional<std::vector<double>> reals_at(const Node& n, size_t index, const char* what,
                                            const ConstantLookup& constants) {
  const std::string* tensor = input_at(n, index);
  if (!tensor) return std::nullopt;
  const auto c = constants(*tensor);
  if (!c) throw unsupported(std::string(what) + " input '" + *tensor + "' is no constant");
  if (!c->f32.empty()) return std::vector<double>(c->f32.begin(), c->f32.end());
  return std::vector<double>(c->i64.begin(), c->i64.end());
}

// One scalar input (Clip's bounds, Pad's fill value); nullopt when omitted.
std::optional<double> scalar_at(const Node& n, size_t index, const char* what,
                                const ConstantLookup& constants) {
  const auto v = reals_at(n, index, what, constants);
  if (v && v->size() != 1) throw unsupported(std::string(what) + " that is no scalar");
  return v ? std::optional<double>(v->front()) : std::nullopt;
}

}  // namespace

int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ConstantLookup lookup_in(const Constants& constants) {
  return [&constants](const std::string& tensor) -> std::optional<ConstantValue> {
    const auto c = constants.find(tensor);
    if (c == constants.end()) return std::nullopt;
    return c->second;
  };
}

ConstantLookup lookup_in(const Graph& g) {
  return [&g](const std::string& tensor) -> std::optional<ConstantValue> {
    const auto v = g.values.find(tensor);
    if (v == g.values.end()) return std::nullopt;
    ConstantValue c;
    c.shape =
        g.shape(tensor).value_or(std::vector<int64_t>{static_cast<int64_t>(v->second.size())});
    if (is_integer_type(g.type(tensor))) {
      constexpr double kLimit = 4611686018427387904.0;  // 2^62: a sentinel such as INT64_MAX
      for (double x : v->second)
        c.i64.push_back(static_cast<int64_t>(std::clamp(std::trunc(x), -kLimit, kLimit)));
    } else {
      c.f32.assign(v->second.begin(), v->second.end());
    }
    return c;
  };
}

ClipBounds read_clip(const Graph& g, const Node& n, const ConstantLookup& constants) {
  ClipBounds b{-kInf, kInf};
  if (g.opset < 11) {
    b.lo = n.float_or("min", -kInf);
    b.hi = n.float_or("max", kInf);
  } else {
    b.lo = scalar_at(n, 1, "a min", constants).value_or(-kInf);
    b.hi = scalar_at(n, 2, "a max", constants).value_or(kInf);
  }
  // Opset 6's defaults are float's extremes: no bound.
  if (b.lo <= std::numeric_limits<float>::lowest()) b.lo = -kInf;
  if (b.hi >= std::numeric_limits<float>::max()) b.hi = kInf;
  if (std::isnan(b.lo) || std::isnan(b.hi)) throw unsupported("a bound that is NaN");
  return b;
}

SliceParams read_slice(const Graph& g, const Node& n, const ConstantLookup& constants) {
  SliceParams p;
  if (g.opset < 10) {
    p.starts = n.ints("starts");
    p.ends = n.ints("ends");
    p.axes = n.ints("axes");
  } else {
    p.starts = ints_at(n, 1, "a starts", constants).value_or(std::vector<int64_t>{});
    p.ends = ints_at(n, 2, "an ends", constants).value_or(std::vector<int64_t>{});
    p.axes = ints_at(n, 3, "an axes", constants).value_or(std::vector<int64_t>{});
    p.steps = ints_at(n, 4, "a steps", constants).value_or(std::vector<int64_t>{});
  }
  if (p.axes.empty())
    for (size_t d = 0; d < p.starts.size(); ++d) p.axes.push_back(static_cast<int64_t>(d));
  if (p.steps.empty()) p.steps.assign(p.starts.size(), 1);
  const size_t k = p.starts.size();
  if (p.ends.size() != k || p.axes.size() != k || p.steps.size() != k)
    throw unsupported("starts, ends, axes and steps of different lengths");
  return p;
}

SliceWindow slice_window(const SliceParams& p, const std::vector<int64_t>& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  SliceWindow w{std::vector<int64_t>(shape.size(), 0), std::vector<int64_t>(shape.size(), 1),
                shape};
  for (size_t k = 0; k < p.starts.size(); ++k) {
    const int64_t axis = p.axes[k] < 0 ? p.axes[k] + rank : p.axes[k];
    if (axis < 0 || axis >= rank) throw unsupported("an axis out of range");
    const size_t d = static_cast<size_t>(axis);
    const int64_t dim = shape[d], st = p.steps[k];
    if (st == 0) throw unsupported("a step of 0");
    int64_t b = p.starts[k] < 0 ? p.starts[k] + dim : p.starts[k];
    int64_t e = p.ends[k] < 0 ? p.ends[k] + dim : p.ends[k];
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    // ceil((e - b) / st), 0 when the range is empty.
    w.extents[d] = st > 0 ? std::max<int64_t>(0, (e - b + st - 1) / st)
                          : std::max<int64_t>(0, (b - e - st - 1) / -st);
    w.start[d] = b;
    w.step[d] = st;
  }
  return w;
}

PadParams read_pad(const Graph& g, const Node& n, const ConstantLookup& constants) {
  PadParams p;
  p.mode = n.text_or("mode", "constant");
  if (g.opset < 11) {
    p.pads = n.ints("pads");
    p.value = n.float_or("value", 0.0);
  } else {
    p.pads = ints_at(n, 1, "a pads", constants).value_or(std::vector<int64_t>{});
    p.value = scalar_at(n, 2, "a fill value", constants).value_or(0.0);
    p.axes = ints_at(n, 3, "an axes", constants).value_or(std::vector<int64_t>{});
  }
  if (!p.axes.empty() && p.pads.size() != 2 * p.axes.size())
    throw unsupported("pads of another length than 2 x axes");
  if (p.pads.size() % 2 != 0) throw unsupported("an odd number of pads");
  return p;
}

std::vector<int64_t> read_axes(const Node& n, const ConstantLookup& constants) {
  if (n.attrs.count("axes")) return n.ints("axes");
  return ints_at(n, 1, "an axes", constants).value_or(std::vector<int64_t>{});
}

std::string float32_text(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return ec == std::errc() ? std::string(buf, ptr) : std::to_string(v);
}

ResizeParams read_resize(const Graph& g, const Node& n, const ConstantLookup& constants) {
  ResizeParams p;
  const bool v11 = n.op == "Resize" && g.opset >= 11;
  if (n.attrs.count("scales")) {  // Upsample before opset 9
    const auto& s = n.attrs.at("scales").floats;
    p.scales.assign(s.begin(), s.end());
  }
  if (auto s = reals_at(n, v11 ? 2 : 1, "a scales", constants); s && !s->empty()) p.scales = *s;
  if (p.scales.empty() && v11)
    p.sizes = ints_at(n, 3, "a sizes", constants).value_or(std::vector<int64_t>{});
  if (p.scales.empty() && p.sizes.empty()) throw unsupported("neither scales nor sizes");
  if (n.attrs.count("axes")) throw unsupported("the axes attribute (opset 18)");
  p.mode = n.text_or("mode", "nearest");
  p.coordinates = v11 ? n.text_or("coordinate_transformation_mode", "half_pixel") : "asymmetric";
  p.nearest = v11 ? n.text_or("nearest_mode", "round_prefer_floor") : "simple";
  return p;
}

ResizeAxis resize_axis(int64_t in, int64_t out, float scale, const std::string& mode,
                       const std::string& coordinates, const std::string& nearest_mode) {
  if (mode != "nearest" && mode != "linear")
    throw Error(ErrorKind::kUnsupported, "resize: mode '" + mode + "' is not built");
  // The input coordinate of output index y, in ONNX Runtime's float32 arithmetic.
  std::function<float(float)> original;
  const float length_in = static_cast<float>(in), length_out = static_cast<float>(out);
  if (coordinates == "half_pixel") {
    original = [scale](float y) { return ((y + 0.5f) / scale) - 0.5f; };
  } else if (coordinates == "asymmetric") {
    original = [scale](float y) { return y / scale; };
  } else if (coordinates == "pytorch_half_pixel") {
    original = [scale, length_out](float y) {
      return length_out > 1 ? (y + 0.5f) / scale - 0.5f : 0.0f;
    };
  } else if (coordinates == "align_corners") {
    original = [length_in, length_out](float y) {
      return length_out == 1 ? 0.0f : y * (length_in - 1) / (length_out - 1);
    };
  } else if (coordinates == "tf_half_pixel_for_nn") {
    original = [scale](float y) { return (y + 0.5f) / scale; };
  } else {
    throw Error(ErrorKind::kUnsupported,
                "resize: coordinate_transformation_mode '" + coordinates + "' is not built");
  }
  std::function<int64_t(float)> nearest;
  if (nearest_mode == "round_prefer_floor") {
    nearest = [](float x) {
      if (x == static_cast<float>(static_cast<int64_t>(x)) + 0.5f)
        return static_cast<int64_t>(std::floor(x));
      return static_cast<int64_t>(std::round(x));
    };
  } else if (nearest_mode == "round_prefer_ceil") {
    nearest = [](float x) { return static_cast<int64_t>(std::round(x)); };
  } else if (nearest_mode == "floor") {
    nearest = [](float x) { return static_cast<int64_t>(std::floor(x)); };
  } else if (nearest_mode == "ceil") {
    nearest = [](float x) { return static_cast<int64_t>(std::ceil(x)); };
  } else if (nearest_mode == "simple") {
    nearest = [down = scale < 1](float x) {
      return down ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(x);
    };
  } else {
    throw Error(ErrorKind::kUnsupported,
                "resize: nearest_mode '" + nearest_mode + "' is not built");
  }
  ResizeAxis r;
  for (int64_t y = 0; y < out; ++y) {
    const float x = original(static_cast<float>(y));
    if (mode == "nearest") {
      const int64_t i = std::clamp<int64_t>(nearest(x), 0, in - 1);
      r.index0.push_back(i);
      r.index1.push_back(i);
      r.weight0.push_back(1.0f);
      r.weight1.push_back(0.0f);
      continue;
    }
    // Linear: the coordinate clamped into the input, its two neighbours weighted by distance;
    // one neighbour at the last index weighs half twice.
    const float c = std::max(0.0f, std::min(x, static_cast<float>(in - 1)));
    const int64_t i0 = std::min(static_cast<int64_t>(c), in - 1);
    const int64_t i1 = std::min(i0 + 1, in - 1);
    float d0 = std::fabs(c - static_cast<float>(i0)), d1 = std::fabs(c - static_cast<float>(i1));
    if (i0 == i1) d0 = d1 = 0.5f;
    r.index0.push_back(i0);
    r.index1.push_back(i1);
    r.weight0.push_back(d1);  // the nearer index0 is, the more it weighs
    r.weight1.push_back(d0);
  }
  return r;
}

std::array<ResizeAxis, 2> resize_spatial_axes(const ResizeParams& p, const std::vector<int64_t>& in,
                                              const std::vector<int64_t>& out) {
  std::vector<float> scales(p.scales.begin(), p.scales.end());
  if (scales.empty()) {
    if (p.sizes.size() != 4 || in.size() != 4) throw unsupported("sizes of another rank");
    for (size_t d = 0; d < 4; ++d)
      scales.push_back(static_cast<float>(p.sizes[d]) / static_cast<float>(in[d]));
  }
  if (scales.size() != 4 || in.size() != 4 || out.size() != 4)
    throw unsupported("scales of another rank");
  return {resize_axis(in[2], out[2], scales[2], p.mode, p.coordinates, p.nearest),
          resize_axis(in[3], out[3], scales[3], p.mode, p.coordinates, p.nearest)};
}

SoftmaxAxis read_softmax_axis(const Graph& g, const Node& n) {
  if (g.opset >= 13) return {n.int_or("axis", -1), false};
  return {n.int_or("axis", 1), true};
}

std::vector<int64_t> read_perm(const Node& n, size_t rank) {
  std::vector<int64_t> reversed(rank);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  std::vector<int64_t> perm = n.ints("perm", reversed);
  const auto refuse = [&] {
    return Error(ErrorKind::kUnsupported,
                 "perm is no permutation of the " + std::to_string(rank) + " axes");
  };
  if (perm.size() != rank) throw refuse();
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    if (p < 0) p += static_cast<int64_t>(rank);
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) throw refuse();
    seen[p] = true;
  }
  return perm;
}

bool transpose_is_view(const Graph& g, const Node& n) {
  if (n.op != "Transpose" || !n.domain.empty() || n.inputs.empty()) return false;
  const std::optional<std::vector<int64_t>> shape = g.shape(n.inputs[0]);
  if (!shape) return false;
  std::vector<int64_t> perm;
  try {
    perm = read_perm(n, shape->size());
  } catch (const Error&) {
    return false;
  }
  // The axes of extent > 1 must keep their order.
  int64_t last = -1;
  for (int64_t p : perm) {
    if ((*shape)[static_cast<size_t>(p)] == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

std::optional<AxisRange> single_axis_range(const Graph& g, const Node& n,
                                           const ConstantLookup& constants) {
  if (!n.domain.empty() || n.inputs.empty() || n.outputs.size() != 1) return std::nullopt;
  const auto in = g.shape(n.inputs[0]);
  if (!in) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(in->size());
  if (n.op == "Gather" && n.inputs.size() == 2) {
    const auto index = constants(n.inputs[1]);
    if (!index || index->i64.size() != 1 || count_of(index->shape) != 1) return std::nullopt;
    int64_t axis = n.int_or("axis", 0);
    if (axis < -rank || axis >= rank) return std::nullopt;
    if (axis < 0) axis += rank;
    const int64_t dim = (*in)[static_cast<size_t>(axis)];
    const int64_t i = index->i64.front() < 0 ? index->i64.front() + dim : index->i64.front();
    if (i < 0 || i >= dim) return std::nullopt;
    return AxisRange{static_cast<size_t>(axis), i, 1};
  }
  if (n.op != "Slice") return std::nullopt;
  SliceWindow w;
  try {
    w = slice_window(read_slice(g, n, constants), *in);
  } catch (const Error&) {
    return std::nullopt;
  }
  std::optional<AxisRange> range;
  for (size_t d = 0; d < in->size(); ++d) {
    if (w.extents[d] == (*in)[d] && w.start[d] == 0 && w.step[d] == 1) continue;  // whole
    if (range || w.step[d] != 1) return std::nullopt;
    range = AxisRange{d, w.start[d], w.extents[d]};
  }
  return range;
}

}  // namespace ktune::frontend
