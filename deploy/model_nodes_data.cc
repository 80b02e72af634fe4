// The data family's generated kernels (Transpose, Concat, Split, Slice, Pad, Gather, Resize,
// Upsample): their parameters as frontend/op_params.h reads them in every opset's form,
// resolved at build time into model_ops_data.cc's kernels.
#include <algorithm>

#include "deploy/model_nodes_internal.h"
#include "deploy/model_ops.h"
#include "frontend/op_params.h"

namespace ktune::deploy::nodes {
namespace {

StepOperand activation(const frontend::Graph& g, const frontend::Node& n,
                       const std::string& tensor) {
  return StepOperand{tensor, false, shape_of(g, n, tensor), {}};
}

GeneratedStep describe_concat(const frontend::Graph& g, const frontend::Node& n,
                              const Constants& constants) {
  const std::vector<int64_t> out = shape_of(g, n, n.outputs.at(0));
  const int64_t axis = normalized_axis(n, n.int_or("axis", 0), out.size());
  GeneratedStep s{n.name, "concat", {}, n.outputs.at(0), {}};
  std::vector<std::vector<int64_t>> shapes;
  for (const std::string& in : n.inputs) {
    StepOperand o = operand(g, n, in, constants);
    if (o.shape.size() != out.size()) throw unsupported(n, "operands of another rank");
    if (o.shape[static_cast<size_t>(axis)] == 0) continue;  // an empty operand adds nothing
    shapes.push_back(o.shape);
    s.inputs.push_back(std::move(o));
  }
  s.kernel = [shapes, axis](const std::string& symbol) { return concat(symbol, shapes, axis); };
  return s;
}

// A strided slice of `input` into `output` (start and step per axis, the extents the output's).
GeneratedStep slice_step(const frontend::Graph& g, const frontend::Node& n,
                         const std::string& input, const std::string& output,
                         const std::vector<int64_t>& start, const std::vector<int64_t>& step,
                         const std::vector<int64_t>& extents) {
  const std::vector<int64_t> in = shape_of(g, n, input);
  GeneratedStep s{n.name, "slice", {activation(g, n, input)}, output, {}};
  s.kernel = [in, start, step, extents](const std::string& symbol) {
    return strided_slice(symbol, in, start, step, extents);
  };
  return s;
}

// Split: each output a slice along the axis, its extent the output's inferred shape (which
// encodes the split sizes of every opset: attribute, input, equal parts).
std::vector<GeneratedStep> describe_split(const frontend::Graph& g, const frontend::Node& n) {
  const std::vector<int64_t> in = shape_of(g, n, n.inputs.at(0));
  const int64_t axis = normalized_axis(n, n.int_or("axis", 0), in.size());
  const size_t a = static_cast<size_t>(axis);
  std::vector<GeneratedStep> steps;
  int64_t offset = 0;
  for (const std::string& out : n.outputs) {
    if (out.empty()) continue;
    const std::vector<int64_t> extents = shape_of(g, n, out);
    if (extents.size() != in.size()) throw unsupported(n, "an output of another rank");
    std::vector<int64_t> start(in.size(), 0), step(in.size(), 1);
    start[a] = offset;
    offset += extents[a];
    if (offset > in[a]) throw unsupported(n, "outputs longer than the input");
    steps.push_back(slice_step(g, n, n.inputs[0], out, start, step, extents));
  }
  return steps;
}

// Slice: its parameters in every opset's form (frontend/op_params.h), resolved against the input;
// the extents must be the inferred shape's and none empty.
frontend::SliceWindow slice_window(const frontend::Graph& g, const frontend::Node& n,
                                   const Constants& constants) {
  const std::vector<int64_t> in = shape_of(g, n, n.inputs.at(0));
  const std::vector<int64_t> out = shape_of(g, n, n.outputs.at(0));
  frontend::SliceWindow w;
  try {
    w = frontend::slice_window(frontend::read_slice(g, n, frontend::lookup_in(constants)), in);
  } catch (const Error& e) {
    throw unsupported(n, e.what());
  }
  if (w.extents != out) throw unsupported(n, "the slice's extents differ from the inferred shape");
  for (int64_t e : w.extents)
    if (e == 0) throw unsupported(n, "an empty slice");
  return w;
}

GeneratedStep describe_slice(const frontend::Graph& g, const frontend::Node& n,
                             const Constants& constants) {
  const frontend::SliceWindow w = slice_window(g, n, constants);
  return slice_step(g, n, n.inputs[0], n.outputs[0], w.start, w.step, w.extents);
}

// Pad: its parameters in every opset's form (frontend/op_params.h) as begin and end per axis.
GeneratedStep describe_pad(const frontend::Graph& g, const frontend::Node& n,
                           const Constants& constants) {
  const std::vector<int64_t> in = shape_of(g, n, n.inputs.at(0));
  frontend::PadParams p;
  try {
    p = frontend::read_pad(g, n, frontend::lookup_in(constants));
  } catch (const Error& e) {
    throw unsupported(n, e.what());
  }
  const std::vector<int64_t>& pads = p.pads;
  const std::string mode = p.mode;
  const float value = static_cast<float>(p.value);
  std::vector<int64_t> axes = p.axes;
  if (axes.empty())
    for (size_t d = 0; d < in.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  if (pads.size() != 2 * axes.size()) throw unsupported(n, "pads of another length than 2 x axes");
  std::vector<int64_t> begin(in.size(), 0), end(in.size(), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const size_t d = static_cast<size_t>(normalized_axis(n, axes[k], in.size()));
    begin[d] = pads[k];
    end[d] = pads[k + axes.size()];
  }
  GeneratedStep s{n.name, "pad", {activation(g, n, n.inputs[0])}, n.outputs.at(0), {}};
  s.kernel = [in, begin, end, mode, value](const std::string& symbol) {
    return pad(symbol, in, begin, end, mode, value);
  };
  return s;
}

// Gather of an activation at constant indices (any shape: the output holds them in order along
// the axis), e.g. ViT's q, k, v from one tensor, or the class token.
// Gather from a float32 constant table (an embedding) at indices the model reads at run time.
GeneratedStep describe_table_gather(const frontend::Graph& g, const frontend::Node& n,
                                    const Constants& constants) {
  const StepOperand table = operand(g, n, n.inputs.at(0), constants);
  const std::vector<int64_t> indices = shape_of(g, n, n.inputs.at(1));
  const std::string type = g.type(n.inputs[1]);
  if (type != "int64" && type != "int32")
    throw unsupported(n, "indices of type " + type + " (int64 or int32)");
  const int64_t axis = normalized_axis(n, n.int_or("axis", 0), table.shape.size());
  const te::DataType index_type = type == "int64" ? te::Int(64) : te::Int(32);
  GeneratedStep s{n.name,
                  "gather_rows",
                  {table, StepOperand{n.inputs[1], false, indices, {}}},
                  n.outputs.at(0),
                  {}};
  s.kernel = [shape = table.shape, axis, indices, index_type](const std::string& symbol) {
    return gather_rows(symbol, shape, axis, indices, index_type);
  };
  s.index_rows = table.shape[static_cast<size_t>(axis)];
  return s;
}

GeneratedStep describe_gather(const frontend::Graph& g, const frontend::Node& n,
                              const Constants& constants) {
  if (constants.count(n.inputs.at(0))) return describe_table_gather(g, n, constants);
  const std::vector<int64_t> in = shape_of(g, n, n.inputs[0]);
  const int64_t axis = normalized_axis(n, n.int_or("axis", 0), in.size());
  std::vector<int64_t> indices = int_input(n, 1, constants).value_or(std::vector<int64_t>{});
  if (indices.empty()) throw unsupported(n, "no indices");
  for (int64_t& i : indices) {
    const int64_t dim = in[static_cast<size_t>(axis)];
    if (i < -dim || i >= dim) throw unsupported(n, "an index out of range");
    if (i < 0) i += dim;
  }
  GeneratedStep s{n.name, "gather", {activation(g, n, n.inputs[0])}, n.outputs.at(0), {}};
  s.kernel = [in, axis, indices](const std::string& symbol) {
    return gather(symbol, in, axis, indices);
  };
  return s;
}

// Resize (opset 10: X, scales; 11 on: X, roi, scales, sizes) and Upsample (opset 9: X, scales) of
// the last two axes of 4-D data. Before opset 11 the coordinates are asymmetric and nearest takes
// the "simple" rounding.
GeneratedStep describe_resize(const frontend::Graph& g, const frontend::Node& n,
                              const Constants& constants) {
  const std::vector<int64_t> in = shape_of(g, n, n.inputs.at(0));
  const std::vector<int64_t> out = shape_of(g, n, n.outputs.at(0));
  if (in.size() != 4 || out.size() != 4) throw unsupported(n, "not 4-D data");
  if (in[0] != out[0] || in[1] != out[1]) throw unsupported(n, "a resize of the batch or channels");
  frontend::ResizeParams p;
  try {
    p = frontend::read_resize(g, n, frontend::lookup_in(constants));
  } catch (const Error& e) {
    throw unsupported(n, e.what());
  }
  std::vector<float> tables[2];
  try {
    const auto axes = frontend::resize_spatial_axes(p, in, out);
    for (int a = 0; a < 2; ++a) tables[a] = resize_table(axes[static_cast<size_t>(a)]);
  } catch (const Error& e) {
    throw unsupported(n, e.what());
  }
  const int64_t oh = out[2], ow = out[3];
  GeneratedStep s{
      n.name,
      "resize",
      {activation(g, n, n.inputs[0]), StepOperand{n.name + "@h_table", true, {4, oh}, tables[0]},
       StepOperand{n.name + "@w_table", true, {4, ow}, tables[1]}},
      n.outputs.at(0),
      {}};
  s.kernel = [in, oh, ow, linear = p.mode == "linear"](const std::string& symbol) {
    return resize(symbol, in, oh, ow, linear);
  };
  return s;
}

// Transpose: its perm as frontend/op_params.h reads it.
GeneratedStep describe_transpose(const frontend::Graph& g, const frontend::Node& n) {
  const std::vector<int64_t> shape = shape_of(g, n, n.inputs.at(0));
  if (shape.size() > 6) throw unsupported(n, "more than 6 axes");
  std::vector<int64_t> perm;
  try {
    perm = frontend::read_perm(n, shape.size());
  } catch (const Error& e) {
    throw unsupported(n, e.what());
  }
  GeneratedStep s{n.name, "transpose", {activation(g, n, n.inputs[0])}, n.outputs.at(0), {}};
  s.kernel = [shape, perm](const std::string& symbol) { return transpose(symbol, shape, perm); };
  return s;
}

}  // namespace

std::vector<GeneratedStep> data_steps(const frontend::Graph& g, const frontend::Node& n,
                                      const Constants& constants) {
  if (n.op == "Transpose") return {describe_transpose(g, n)};
  if (n.op == "Concat") return {describe_concat(g, n, constants)};
  if (n.op == "Split") return describe_split(g, n);
  if (n.op == "Slice") return {describe_slice(g, n, constants)};
  if (n.op == "Pad") return {describe_pad(g, n, constants)};
  if (n.op == "Gather") return {describe_gather(g, n, constants)};
  if (n.op == "Resize" || n.op == "Upsample") return {describe_resize(g, n, constants)};
  return {};
}

}  // namespace ktune::deploy::nodes
