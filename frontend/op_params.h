// Defines the readers of the operator parameters ONNX moved from attributes to inputs across
// opsets (Clip 11, Slice 10, Pad 11, Squeeze/Unsqueeze/ReduceSum 13, the other reductions 18,
// Resize 10 and 11, Softmax's axis 13): one reader per operator, for every form it has from opset
// 9 on, used by the graph passes, the epilogue fuser, constant folding and a model build alike;
// and how Resize reads its axes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// The element count of a shape (1 for a scalar's []).
int64_t count_of(const std::vector<int64_t>& shape);

// A model's float constant as a template argument takes it (a Clip bound, an activation's
// parameter, a softmax's scale): the shortest text that reads back as the same float32, so one
// value has one workload key.
std::string float32_text(double v);

// Where a reader finds a node's constant inputs: the value of `tensor`, or nullopt when it is no
// constant the caller knows. A model build knows every constant (lookup_in(Constants)); the graph
// passes and the fuser know the small ones (Graph::values); constant folding, what it folded.
using ConstantLookup = std::function<std::optional<ConstantValue>(const std::string& tensor)>;
ConstantLookup lookup_in(const Constants& constants);
// Graph::values: integer-typed tensors come as i64 (INT64_MAX, a "to the end", as 2^62), the
// others as f32.
ConstantLookup lookup_in(const Graph& g);

// Every reader throws Error(kUnsupported) with the reason (no node name: the caller adds it) when
// a parameter the node gives is no constant the lookup knows, or is malformed.

// Clip: min and max as attributes before opset 11, as optional scalar inputs from 11 on. An
// absent bound, or opset 6's float extremes, is infinite.
struct ClipBounds {
  double lo, hi;
};
ClipBounds read_clip(const Graph& g, const Node& n, const ConstantLookup& constants);

// Slice: starts, ends, axes as attributes before opset 10; starts, ends, axes, steps as inputs
// from 10 on. `axes` defaults to 0..k-1 and `steps` to 1s; all four have one length. The values
// are ONNX's (negative from the end, not clamped).
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};
SliceParams read_slice(const Graph& g, const Node& n, const ConstantLookup& constants);

// A Slice resolved against its input's shape: per input axis the first index, the step and the
// output's extent (ONNX's rules: negative starts and ends count from the end and are clamped into
// the axis, so INT64_MAX means "to the end"; a negative step runs backwards). Throws
// Error(kUnsupported) for an axis out of range or a step of 0.
struct SliceWindow {
  std::vector<int64_t> start, step, extents;
};
SliceWindow slice_window(const SliceParams& p, const std::vector<int64_t>& shape);

// Pad: pads and the fill value as attributes before opset 11, as inputs from 11 on (the axes
// they apply to from 18); pads = [begin of each axis..., end of each axis...]. `axes` empty = every
// axis of the input in order; `mode` "constant", "reflect", "edge" or "wrap".
struct PadParams {
  std::vector<int64_t> pads, axes;
  double value = 0;
  std::string mode;
};
PadParams read_pad(const Graph& g, const Node& n, const ConstantLookup& constants);

// Reduce*, Squeeze, Unsqueeze: the axes attribute (before opset 13; the reductions other than
// ReduceSum before 18), else the second input, else empty (every axis, or noop_with_empty_axes).
std::vector<int64_t> read_axes(const Node& n, const ConstantLookup& constants);

// Resize (opset 10: X, scales; 11 on: X, roi, scales, sizes) and Upsample (X, scales; its
// attribute in opset 7 to 8): scales, else sizes; before opset 11 the coordinates are asymmetric
// and nearest rounds as "simple" (floor).
struct ResizeParams {
  std::vector<double> scales;  // one per axis, empty when sizes are given instead
  std::vector<int64_t> sizes;
  std::string mode;         // "nearest", "linear", "cubic"
  std::string coordinates;  // coordinate_transformation_mode
  std::string nearest;      // nearest_mode
};
ResizeParams read_resize(const Graph& g, const Node& n, const ConstantLookup& constants);

// How Resize reads one axis: for each output index, the two input indices and their weights
// (linear; nearest reads index0 with weight 1), computed as ONNX Runtime does in float32.
struct ResizeAxis {
  std::vector<int64_t> index0, index1;
  std::vector<float> weight0, weight1;
};
// The axis of extent `in` resized to `out` at `scale` (ONNX's scale: out / in when sizes are
// given): mode "nearest" or "linear"; coordinate_transformation_mode half_pixel, asymmetric,
// align_corners, pytorch_half_pixel or tf_half_pixel_for_nn; nearest_mode round_prefer_floor,
// round_prefer_ceil, floor, ceil, or "simple" (opset 10: ceil when downsampling, else truncation).
// Throws Error(kUnsupported) for another mode.
ResizeAxis resize_axis(int64_t in, int64_t out, float scale, const std::string& mode,
                       const std::string& coordinates, const std::string& nearest_mode);
// The two spatial axes of a 4-D Resize of `in` to `out` (its scales, else out / in where it gives
// sizes), as resize_axis reads them. Throws Error(kUnsupported) for scales or sizes of another
// rank, and what resize_axis throws.
std::array<ResizeAxis, 2> resize_spatial_axes(const ResizeParams& p, const std::vector<int64_t>& in,
                                              const std::vector<int64_t>& out);

// Softmax and LogSoftmax: from opset 13 one axis (default the last); before, the input flattened
// to 2-D at `axis` (default 1), normalized over its second dimension.
struct SoftmaxAxis {
  int64_t axis;
  bool flattened;  // before opset 13
};
SoftmaxAxis read_softmax_axis(const Graph& g, const Node& n);

// Transpose: `perm` as given, negative entries counted from the end, or the axes of a rank-`rank`
// input reversed when it is absent (ONNX's default). Throws Error(kUnsupported) when it is no
// permutation of the axes.
std::vector<int64_t> read_perm(const Node& n, size_t rank);

// Whether Transpose `n` moves only axes of extent 1 (tf2onnx's NWC -> NCW of one channel): its
// output holds its input's bytes in the same order, a view. False when the input's shape is
// unknown or the perm is none.
bool transpose_is_view(const Graph& g, const Node& n);

// The part of its input a Slice with steps of 1 or a Gather of one constant index takes when it
// is one range of a single axis, every other axis whole (q, k or v out of an attention's packed
// projection): a model build makes it a view when that range is contiguous in memory, and
// read_heads_in_place reads the heads it selects in place. nullopt for any other node, one whose
// input shape is unknown, or whose parameters are no constants `constants` knows.
struct AxisRange {
  size_t axis = 0;
  int64_t start = 0, length = 0;
};
std::optional<AxisRange> single_axis_range(const Graph& g, const Node& n,
                                           const ConstantLookup& constants);

}  // namespace ktune::frontend
