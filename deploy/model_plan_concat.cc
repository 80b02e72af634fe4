// The Planner's Concat and Split without copies: where a part of the concatenation axis is one
// contiguous range of bytes (one image, the channel axis of a blocked tensor or any axis behind
// leading dimensions of 1 in ONNX's layout), a Concat's operands are written by their producers
// into slices of its output, and a Split's outputs are views of its input. YOLO's C2f blocks
// (Split, bottlenecks, Concat), SPPF and FPN heads concatenate this way; through ONNX's layout
// each Concat cost two layout conversions and a copy.
#include <algorithm>
#include <set>

#include "deploy/model_nodes_internal.h"
#include "deploy/model_ops.h"
#include "deploy/model_planner.h"
#include "frontend/op_params.h"

namespace ktune::deploy {
namespace {

// Bytes per unit of `axis` of a tensor of `shape` in layout `block` when a range of that axis is
// one contiguous range of bytes, else 0: in ONNX's layout, when the dimensions before `axis` are
// all 1; in the channel-blocked layout, the channel axis of one image (a unit is one channel of a
// whole block: ranges start and end on block boundaries).
int64_t bytes_per_unit(const std::vector<int64_t>& shape, size_t axis, int64_t block,
                       int64_t elem_bytes) {
  for (size_t d = 0; d < axis; ++d)
    if (shape[d] != 1) return 0;
  int64_t inner = elem_bytes;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  if (block == 0) return inner;
  return shape.size() == 4 && axis == 1 ? inner : 0;  // per channel: h * w lanes of a block
}

}  // namespace

void Planner::place_in(int64_t root, int64_t onto, int64_t offset) {
  for (PlanTensor& t : plan_.tensors)
    if (t.alias_of == root) {
      t.alias_of = onto;
      t.view_offset += offset;
    }
  plan_.tensors[root].alias_of = onto;
  plan_.tensors[root].view_offset = offset;
}

bool Planner::plan_concat_in_place(const frontend::Node& n) {
  if (n.op != "Concat" || !n.domain.empty() || n.outputs.size() != 1) return false;
  const auto out_shape = g_.shape(n.outputs[0]);
  if (!out_shape || out_shape->empty()) return false;
  const size_t axis =
      static_cast<size_t>(nodes::normalized_axis(n, n.int_or("axis", 0), out_shape->size()));
  std::vector<std::string> parts;
  for (const std::string& in : n.inputs) {
    if (in.empty()) continue;
    if (!current_.count(in) || !g_.shape(in)) return false;  // a constant operand
    if (g_.shape(in)->at(axis) > 0) parts.push_back(in);
  }
  if (parts.empty()) return false;
  const te::DataType dtype = dtype_of(n.outputs[0]);
  if (dtype != te::Float(32)) return false;  // the copies below are float32 kernels
  for (const std::string& p : parts)
    if (dtype_of(p) != dtype) return false;
  // The parts' starts along the axis in `block`, and the bytes per unit; unit 0 when the parts
  // are not contiguous slices there, or a start would break the 64-byte alignment of kernel
  // arguments (codegen/model_driver), or a blocked
  // part other than the last does not fill whole blocks (its padding lanes would be the next
  // part's channels).
  std::vector<int64_t> starts;
  const auto slices = [&](int64_t block) -> int64_t {
    const int64_t unit = bytes_per_unit(*out_shape, axis, block, dtype.bytes());
    starts.clear();
    int64_t at = 0;
    for (size_t k = 0; k < parts.size() && unit > 0; ++k) {
      const int64_t extent = g_.shape(parts[k])->at(axis);
      if (at * unit % kAlign != 0 || (block > 0 && k + 1 < parts.size() && extent % block != 0))
        return 0;
      starts.push_back(at);
      at += extent;
    }
    return unit;
  };
  // The first layout the parts fit: the block the convs reading the output take (no conversion
  // after), else that of the first blocked part (the convs before are blocked), else ONNX's
  // layout. Even with a conversion after, each part is then written once instead of converted,
  // copied and converted back.
  std::vector<int64_t> blocks;
  if (out_shape->size() == 4 && axis == 1) {
    blocks.push_back(conv_data_block(n.outputs[0]));
    for (const std::string& p : parts) blocks.push_back(plan_.tensors[current_[p]].block);
  }
  blocks.push_back(0);
  int64_t block = 0, unit = 0;
  for (size_t k = 0; k < blocks.size() && unit == 0; ++k)
    if (blocks[k] > 0 || k + 1 == blocks.size()) unit = slices(block = blocks[k]);
  if (unit == 0) return false;
  const int64_t out = define(n.outputs[0], block);

  // Each part in the output's layout (converted where its producer wrote another), then where its
  // bytes come from: a tensor of its own (root) or a view of one at view_offset.
  struct Part {
    int64_t tensor, root, offset, bytes;  // offset: where the root would start in `out`
  };
  std::vector<Part> where;
  for (size_t k = 0; k < parts.size(); ++k) {
    const int64_t t = form(parts[k], block);
    const PlanTensor& pt = plan_.tensors[t];
    const int64_t root = pt.alias_of >= 0 ? pt.alias_of : t;
    where.push_back({t, root, starts[k] * unit - pt.view_offset, pt.bytes()});
  }
  // A root moves into `out` when it lives in the arena, every part it holds agrees on where it
  // starts, and those parts cover it exactly (its producer writes all of it, so none of it may
  // lie on another part's slice).
  std::set<int64_t> moved;
  for (const Part& p : where) {
    if (moved.count(p.root) || p.root == out || p.offset < 0) continue;
    if (plan_.tensors[p.root].storage != Storage::kArena) continue;
    int64_t covered = 0;
    bool agree = true;
    for (const Part& q : where)
      if (q.root == p.root) {
        agree = agree && q.offset == p.offset;
        covered += q.bytes;
      }
    if (agree && covered == plan_.tensors[p.root].bytes()) {
      place_in(p.root, out, p.offset);
      moved.insert(p.root);
    }
  }
  // The other parts are copied into their slices (a graph input, a tensor already placed in
  // another Concat's output).
  for (size_t k = 0; k < parts.size(); ++k) {
    if (moved.count(where[k].root)) continue;
    PlanTensor slice{parts[k] + "@" + n.outputs[0], plan_.tensors[where[k].tensor].shape, block};
    slice.dtype = dtype;
    slice.alias_of = out;
    slice.view_offset = starts[k] * unit;
    const int64_t to = add(std::move(slice));
    PlanStep s;
    s.layer = n.name;
    s.kind = "layout";
    s.symbol = symbol("concat_part");
    s.func = elementwise(s.symbol, ElementwiseOp{"copy"}, plan_.tensors[to].elements());
    s.args = {where[k].tensor, to};
    plan_.steps.push_back(std::move(s));
  }
  return true;
}

bool Planner::plan_split_as_views(const frontend::Node& n) {
  if (n.op != "Split" || !n.domain.empty() || !current_.count(n.inputs.at(0))) return false;
  const int64_t src = current_[n.inputs[0]];
  const PlanTensor in = plan_.tensors[src];  // a copy: add() below may move the tensors
  const int64_t root = in.alias_of >= 0 ? in.alias_of : src;
  // A view into a graph input or output would need an offset the driver does not take.
  if (plan_.tensors[root].storage != Storage::kArena) return false;
  const size_t axis =
      static_cast<size_t>(nodes::normalized_axis(n, n.int_or("axis", 0), in.shape.size()));
  const int64_t unit = bytes_per_unit(in.shape, axis, in.block, in.dtype.bytes());
  if (unit == 0) return false;
  std::vector<std::pair<std::string, int64_t>> views;  // output, its start along the axis
  int64_t at = 0;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const std::string& out = n.outputs[k];
    const auto shape = g_.shape(out);
    if (out.empty() || !shape || shape->size() != in.shape.size()) return false;
    if (at * unit % kAlign != 0 ||
        (in.block > 0 && k + 1 < n.outputs.size() && shape->at(axis) % in.block != 0))
      return false;
    views.push_back({out, at});
    at += shape->at(axis);
  }
  if (at != in.shape[axis]) return false;
  for (const auto& [out, start] : views) {
    PlanTensor t{out, known_shape(out), in.block};
    t.dtype = in.dtype;
    t.alias_of = root;
    t.view_offset = in.view_offset + start * unit;
    current_[out] = add(std::move(t));
  }
  return true;
}

bool Planner::plan_slice_as_view(const frontend::Node& n) {
  if ((n.op != "Slice" && n.op != "Gather") || !current_.count(n.inputs.at(0)) ||
      constants_.count(n.inputs[0]))
    return false;
  const auto range = frontend::single_axis_range(g_, n, frontend::lookup_in(constants_));
  if (!range) return false;
  const int64_t src = current_[n.inputs[0]];
  const PlanTensor in = plan_.tensors[src];  // a copy: add() below may move the tensors
  const int64_t root = in.alias_of >= 0 ? in.alias_of : src;
  if (plan_.tensors[root].storage != Storage::kArena || in.block > 0) return false;
  const int64_t unit = bytes_per_unit(in.shape, range->axis, 0, in.dtype.bytes());
  if (unit == 0 || range->start * unit % kAlign != 0) return false;
  PlanTensor t{n.outputs[0], known_shape(n.outputs[0]), 0};
  t.dtype = in.dtype;
  t.alias_of = root;
  t.view_offset = in.view_offset + range->start * unit;
  current_[n.outputs[0]] = add(std::move(t));
  return true;
}

}  // namespace ktune::deploy
