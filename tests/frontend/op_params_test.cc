// Tests of the operator parameter readers (frontend/op_params.h): each operator's older form
// (attributes) and newer form (constant inputs) read into the same parameters, from a build's
// constants and from the graph's small values; a parameter that is no constant is refused by kind.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "frontend/op_params.h"
#include "support/error.h"

namespace ktune::frontend {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();  // Slice's "to the end"

Node node(const std::string& op, std::vector<std::string> inputs,
          std::map<std::string, Attribute> attrs = {}) {
  Node n;
  n.op = op;
  n.name = op + "_1";
  n.inputs = std::move(inputs);
  n.outputs = {"y"};
  n.attrs = std::move(attrs);
  return n;
}

Attribute ints(std::vector<int64_t> v) { return Attribute{std::move(v), {}, {}, {}}; }
Attribute real(float v) { return Attribute{{}, {v}, {}, {}}; }
Attribute text(std::string v) { return Attribute{{}, {}, std::move(v), {}}; }

Graph at_opset(int64_t opset) {
  Graph g;
  g.opset = opset;
  return g;
}

// A build's constants: int64 parameters and float scalars.
const Constants kConstants = {{"starts", {{2}, {}, {1, -3}}},
                              {"ends", {{2}, {}, {kEnd, -1}}},
                              {"axes", {{2}, {}, {2, 3}}},
                              {"steps", {{2}, {}, {1, 2}}},
                              {"pads", {{4}, {}, {0, 1, 2, 3}}},
                              {"fill", {{}, {0.5f}, {}}},
                              {"lo", {{}, {0.0f}, {}}},
                              {"hi", {{}, {6.0f}, {}}},
                              {"scales", {{4}, {1, 1, 2, 2}, {}}},
                              {"sizes", {{4}, {}, {1, 8, 32, 32}}},
                              {"wide", {{2}, {0, 6}, {}}}};

int64_t error_kind_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const Error& e) {
    return static_cast<int64_t>(e.kind());
  }
  return -1;
}

TEST(OpParams, ClipBoundsAreTheSameAsAttributesAndAsInputs) {
  const ClipBounds six =
      read_clip(at_opset(6), node("Clip", {"x"}, {{"min", real(0)}, {"max", real(6)}}),
                lookup_in(kConstants));
  EXPECT_EQ(six.lo, 0);
  EXPECT_EQ(six.hi, 6);
  const ClipBounds eleven =
      read_clip(at_opset(11), node("Clip", {"x", "lo", "hi"}), lookup_in(kConstants));
  EXPECT_EQ(eleven.lo, six.lo);
  EXPECT_EQ(eleven.hi, six.hi);
  // An omitted bound, and opset 6's float extremes, are none.
  const ClipBounds low_only =
      read_clip(at_opset(13), node("Clip", {"x", "lo"}), lookup_in(kConstants));
  EXPECT_EQ(low_only.lo, 0);
  EXPECT_EQ(low_only.hi, kInf);
  const ClipBounds extremes = read_clip(at_opset(6), node("Clip", {"x"}), lookup_in(kConstants));
  EXPECT_EQ(extremes.lo, -kInf);
  EXPECT_EQ(extremes.hi, kInf);
  const ClipBounds skipped =
      read_clip(at_opset(12), node("Clip", {"x", "", "hi"}), lookup_in(kConstants));
  EXPECT_EQ(skipped.lo, -kInf);
  EXPECT_EQ(skipped.hi, 6);
  // A bound that is an activation, or no scalar, is refused.
  EXPECT_EQ(error_kind_of([] {
              read_clip(at_opset(11), node("Clip", {"x", "x"}), lookup_in(kConstants));
            }),
            static_cast<int64_t>(ErrorKind::kUnsupported));
  EXPECT_EQ(error_kind_of([] {
              read_clip(at_opset(11), node("Clip", {"x", "wide"}), lookup_in(kConstants));
            }),
            static_cast<int64_t>(ErrorKind::kUnsupported));
}

TEST(OpParams, SliceIsTheSameAsAttributesAndAsInputsAndResolvesAsOnnxSays) {
  const SliceParams nine = read_slice(
      at_opset(9),
      node("Slice", {"x"},
           {{"starts", ints({1, -3})}, {"ends", ints({kEnd, -1})}, {"axes", ints({2, 3})}}),
      lookup_in(kConstants));
  const SliceParams thirteen = read_slice(
      at_opset(13), node("Slice", {"x", "starts", "ends", "axes"}), lookup_in(kConstants));
  EXPECT_EQ(nine.starts, thirteen.starts);
  EXPECT_EQ(nine.ends, thirteen.ends);
  EXPECT_EQ(nine.axes, thirteen.axes);
  EXPECT_EQ(nine.steps, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(thirteen.steps, nine.steps);
  // Axes default to the first ones.
  EXPECT_EQ(
      read_slice(at_opset(13), node("Slice", {"x", "starts", "ends"}), lookup_in(kConstants)).axes,
      (std::vector<int64_t>{0, 1}));
  // On [1, 8, 16, 16] with steps 1 and 2: rows 1.. (15), columns 13, 15 (one: 13 up to 15).
  const SliceWindow w =
      slice_window(read_slice(at_opset(13), node("Slice", {"x", "starts", "ends", "axes", "steps"}),
                              lookup_in(kConstants)),
                   {1, 8, 16, 16});
  EXPECT_EQ(w.start, (std::vector<int64_t>{0, 0, 1, 13}));
  EXPECT_EQ(w.step, (std::vector<int64_t>{1, 1, 1, 2}));
  EXPECT_EQ(w.extents, (std::vector<int64_t>{1, 8, 15, 1}));
  // A negative step runs backwards from the clamped start: 15, 13, ..., 1.
  SliceParams back{{kEnd}, {0}, {3}, {-2}};
  const SliceWindow r = slice_window(back, {1, 8, 16, 16});
  EXPECT_EQ(r.start[3], 15);
  EXPECT_EQ(r.extents[3], 8);
  // Refused: a step of 0, an axis past the rank, parameters of different lengths, a parameter
  // that is an activation.
  const auto unsupported = static_cast<int64_t>(ErrorKind::kUnsupported);
  EXPECT_EQ(error_kind_of([] { slice_window(SliceParams{{0}, {1}, {0}, {0}}, {4}); }), unsupported);
  EXPECT_EQ(error_kind_of([] { slice_window(SliceParams{{0}, {1}, {1}, {1}}, {4}); }), unsupported);
  EXPECT_EQ(error_kind_of([] {
              read_slice(at_opset(9),
                         node("Slice", {"x"}, {{"starts", ints({0, 1})}, {"ends", ints({1})}}),
                         lookup_in(kConstants));
            }),
            unsupported);
  EXPECT_EQ(error_kind_of([] {
              read_slice(at_opset(13), node("Slice", {"x", "x", "ends"}), lookup_in(kConstants));
            }),
            unsupported);
}

TEST(OpParams, PadIsTheSameAsAttributesAndAsInputs) {
  const PadParams two = read_pad(
      at_opset(2),
      node("Pad", {"x"},
           {{"pads", ints({0, 1, 2, 3})}, {"value", real(0.5f)}, {"mode", text("reflect")}}),
      lookup_in(kConstants));
  const PadParams eleven =
      read_pad(at_opset(11), node("Pad", {"x", "pads", "fill"}, {{"mode", text("reflect")}}),
               lookup_in(kConstants));
  EXPECT_EQ(two.pads, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(eleven.pads, two.pads);
  EXPECT_EQ(two.value, 0.5);
  EXPECT_EQ(eleven.value, two.value);
  EXPECT_EQ(two.mode, "reflect");
  EXPECT_EQ(eleven.mode, two.mode);
  EXPECT_TRUE(eleven.axes.empty());
  // Opset 18's axes: pads for those axes only.
  const PadParams eighteen =
      read_pad(at_opset(18), node("Pad", {"x", "pads", "", "axes"}), lookup_in(kConstants));
  EXPECT_EQ(eighteen.axes, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(eighteen.value, 0);
  EXPECT_EQ(eighteen.mode, "constant");
  EXPECT_EQ(
      error_kind_of([] {
        read_pad(at_opset(18), node("Pad", {"x", "starts", "", "axes"}), lookup_in(kConstants));
      }),
      static_cast<int64_t>(ErrorKind::kUnsupported));  // 2 pads for 2 axes
}

TEST(OpParams, AxesAreTheAttributeElseTheSecondInput) {
  EXPECT_EQ(read_axes(node("ReduceSum", {"x"}, {{"axes", ints({2, 3})}}), lookup_in(kConstants)),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read_axes(node("ReduceSum", {"x", "axes"}), lookup_in(kConstants)),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read_axes(node("Squeeze", {"x", "axes"}), lookup_in(kConstants)),
            (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(read_axes(node("ReduceMean", {"x"}), lookup_in(kConstants)).empty());
  EXPECT_EQ(error_kind_of([] {
              read_axes(node("ReduceMax", {"x", "x"}), lookup_in(kConstants));
            }),
            static_cast<int64_t>(ErrorKind::kUnsupported));
}

TEST(OpParams, ResizeReadsScalesOrSizesWithEachOpsetsCoordinates) {
  // Upsample (opset 7's attribute, 9's input) and Resize 10: scales, asymmetric, floor rounding.
  const ResizeParams seven = read_resize(
      at_opset(7), node("Upsample", {"x"}, {{"scales", Attribute{{}, {1, 1, 2, 2}, {}, {}}}}),
      lookup_in(kConstants));
  const ResizeParams nine =
      read_resize(at_opset(9), node("Upsample", {"x", "scales"}), lookup_in(kConstants));
  const ResizeParams ten =
      read_resize(at_opset(10), node("Resize", {"x", "scales"}), lookup_in(kConstants));
  for (const ResizeParams* p : {&seven, &nine, &ten}) {
    EXPECT_EQ(p->scales, (std::vector<double>{1, 1, 2, 2}));
    EXPECT_EQ(p->coordinates, "asymmetric");
    EXPECT_EQ(p->nearest, "simple");
    EXPECT_EQ(p->mode, "nearest");
  }
  // Resize 11 on: X, roi, scales, sizes, with its attributes' defaults.
  const ResizeParams thirteen =
      read_resize(at_opset(13), node("Resize", {"x", "", "", "sizes"}, {{"mode", text("linear")}}),
                  lookup_in(kConstants));
  EXPECT_TRUE(thirteen.scales.empty());
  EXPECT_EQ(thirteen.sizes, (std::vector<int64_t>{1, 8, 32, 32}));
  EXPECT_EQ(thirteen.mode, "linear");
  EXPECT_EQ(thirteen.coordinates, "half_pixel");
  EXPECT_EQ(thirteen.nearest, "round_prefer_floor");
  EXPECT_EQ(
      read_resize(at_opset(11), node("Resize", {"x", "", "scales"}), lookup_in(kConstants)).scales,
      seven.scales);
  EXPECT_EQ(error_kind_of([] {
              read_resize(at_opset(13), node("Resize", {"x", "", ""}), lookup_in(kConstants));
            }),
            static_cast<int64_t>(ErrorKind::kUnsupported));  // neither scales nor sizes
}

TEST(OpParams, SoftmaxAxisDefaultsByOpset) {
  EXPECT_EQ(read_softmax_axis(at_opset(11), node("Softmax", {"x"})).axis, 1);
  EXPECT_TRUE(read_softmax_axis(at_opset(11), node("Softmax", {"x"})).flattened);
  EXPECT_EQ(read_softmax_axis(at_opset(13), node("Softmax", {"x"})).axis, -1);
  EXPECT_FALSE(read_softmax_axis(at_opset(13), node("Softmax", {"x"})).flattened);
  EXPECT_EQ(read_softmax_axis(at_opset(13), node("Softmax", {"x"}, {{"axis", ints({1})}})).axis, 1);
}

TEST(OpParams, TransposePermDefaultsToTheAxesReversed) {
  EXPECT_EQ(read_perm(node("Transpose", {"x"}), 3), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(read_perm(node("Transpose", {"x"}, {{"perm", ints({0, -1, 1})}}), 3),
            (std::vector<int64_t>{0, 2, 1}));
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{0, 1}, {0, 0, 1}, {0, 1, 3}})
    EXPECT_EQ(error_kind_of([&] {
                read_perm(node("Transpose", {"x"}, {{"perm", ints(bad)}}), 3);
              }),
              static_cast<int64_t>(ErrorKind::kUnsupported));
}

// A Transpose that moves only axes of extent 1 keeps its input's bytes in order (a view); one
// that reorders two longer axes, or of an unknown shape, does not.
TEST(OpParams, ATransposeOfUnitAxesIsAView) {
  Graph g = at_opset(13);
  g.shapes = {{"nwc", {1, 16000, 1}}, {"nchw", {1, 3, 1, 5}}, {"map", {1, 4, 5, 1}}};
  const auto transpose = [](const std::string& x, std::vector<int64_t> perm) {
    return node("Transpose", {x}, {{"perm", ints(std::move(perm))}});
  };
  EXPECT_TRUE(transpose_is_view(g, transpose("nwc", {0, 2, 1})));       // tf2onnx's NWC -> NCW
  EXPECT_TRUE(transpose_is_view(g, transpose("nchw", {0, 2, 1, 3})));   // the row moved
  EXPECT_TRUE(transpose_is_view(g, transpose("map", {3, 0, 1, 2})));    // ones moved to the front
  EXPECT_FALSE(transpose_is_view(g, transpose("nchw", {0, 3, 2, 1})));  // columns before channels
  EXPECT_FALSE(transpose_is_view(g, transpose("map", {0, 2, 1, 3})));   // rows before channels
  EXPECT_FALSE(transpose_is_view(g, transpose("unknown", {0, 2, 1})));  // no shape
  EXPECT_FALSE(transpose_is_view(g, transpose("nwc", {0, 0, 1})));      // no permutation
}

// The graph's small values (what the passes and the fuser see) read like a build's constants:
// integer types as i64 (INT64_MAX as 2^62, still "to the end"), others as f32.
TEST(OpParams, TheGraphsSmallValuesReadLikeABuildsConstants) {
  Graph g = at_opset(13);
  g.values = {{"starts", {1, -3}}, {"ends", {9223372036854775807.0, -1}}, {"lo", {0}}, {"hi", {6}}};
  g.types = {{"starts", "int64"}, {"ends", "int64"}, {"lo", "float32"}, {"hi", "float32"}};
  g.shapes = {{"starts", {2}}, {"ends", {2}}, {"lo", {}}, {"hi", {}}};
  const SliceParams p = read_slice(g, node("Slice", {"x", "starts", "ends"}), lookup_in(g));
  EXPECT_EQ(p.starts, (std::vector<int64_t>{1, -3}));
  EXPECT_EQ(p.ends, (std::vector<int64_t>{int64_t{1} << 62, -1}));
  EXPECT_EQ(slice_window(p, {16, 16}).extents, (std::vector<int64_t>{15, 2}));
  const ClipBounds b = read_clip(g, node("Clip", {"x", "lo", "hi"}), lookup_in(g));
  EXPECT_EQ(b.lo, 0);
  EXPECT_EQ(b.hi, 6);
  // A float tensor is no integer parameter.
  EXPECT_EQ(error_kind_of([&] {
              read_slice(g, node("Slice", {"x", "lo", "hi"}), lookup_in(g));
            }),
            static_cast<int64_t>(ErrorKind::kUnsupported));
}

}  // namespace
}  // namespace ktune::frontend
