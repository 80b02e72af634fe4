// Lowers models of opsets 18 to 22 into the forms of Debian's ONNX library's newest opset (17).
//
// What changed after opset 17, per ONNX's Changelog, and what becomes of it here:
//   18  Reduce{Max,Min,Mean,Prod,L1,L2,LogSum,LogSumExp,SumSquare}: axes an input
//       (noop_with_empty_axes) -> the axes attribute, or Identity;
//       Split: num_outputs -> split sizes (ceil(dim / n) each, the last what remains);
//       Pad: the axes input -> pads of every axis;
//       Resize: antialias, axes, keep_aspect_ratio_policy -> dropped at their defaults, axes
//       expanded into scales or sizes of every axis;
//       Mish -> x * Tanh(Softplus(x)); new operators (GroupNormalization, Col2Im, ...) are left
//       for the reader's schema check.
//   19  AveragePool dilations (all 1), Cast/CastLike/QuantizeLinear saturate (float8 only):
//   dropped;
//       Pad's wrap mode and Resize's half_pixel_symmetric have no older form: refused;
//       other changes add types (float8).
//   20  Gelu -> its Erf form (x * (Erf(x / sqrt 2) + 1) * 0.5, which the epilogue fuser knows) or
//       its tanh form; others add operators or types.
//   21  QuantizeLinear/DequantizeLinear block_size (0 only) and output_dtype (where the zero point
//       or uint8 says it); others add types (int4).
//   22  bfloat16 on more operators: types only.
#include "frontend/opset_adapter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <optional>
#include <set>
#include <vector>

#include <onnx/defs/schema.h>
#include <onnx/defs/tensor_proto_util.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "frontend/onnx_graph.h"
#include "support/error.h"

namespace ktune::frontend {
namespace {

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}

std::string text_attr(const onnx::NodeProto& n, const std::string& name, std::string fallback) {
  const onnx::AttributeProto* a = find_attr(n, name);
  return a ? a->s() : fallback;
}

void drop_attr(onnx::NodeProto& n, const std::string& name) {
  auto* attrs = n.mutable_attribute();
  for (int k = 0; k < attrs->size(); ++k)
    if (attrs->Get(k).name() == name) {
      attrs->DeleteSubrange(k, 1);
      return;
    }
}

void set_ints_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  drop_attr(n, name);
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// Input k of `n`, "" when absent (ONNX's optional inputs).
std::string input_at(const onnx::NodeProto& n, int k) {
  return k < n.input_size() ? n.input(k) : std::string();
}

// Keeps the first `count` inputs, then drops trailing empty ones.
void keep_inputs(onnx::NodeProto& n, int count) {
  while (n.input_size() > count || (n.input_size() > 0 && n.input(n.input_size() - 1).empty()))
    n.mutable_input()->RemoveLast();
}

onnx::NodeProto make_node(const std::string& op, const std::vector<std::string>& inputs,
                          const std::string& output, const std::string& name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const std::string& in : inputs) n.add_input(in);
  n.add_output(output);
  return n;
}

// Every tensor's dimensions (-1 unknown) where its rank is known.
using Shapes = std::map<std::string, std::vector<int64_t>>;

void record_shape(Shapes& shapes, const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
  std::vector<int64_t> dims;
  for (const auto& d : v.type().tensor_type().shape().dim())
    dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  shapes[v.name()] = dims;
}

// The shapes ONNX infers for `model` where it can (a node it cannot infer leaves its outputs
// unknown instead of failing).
Shapes inferred_shapes(const std::string& path, const onnx::ModelProto& model) {
  onnx::ModelProto copy = model;
  onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0, /*data_prop=*/true);
  try {
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error(ErrorKind::kInvalidArgument,
                path + ": shape inference failed: " + what.substr(0, what.find('\n')));
  }
  Shapes shapes;
  for (const auto& v : copy.graph().input()) record_shape(shapes, v);
  for (const auto& v : copy.graph().value_info()) record_shape(shapes, v);
  for (const auto& init : copy.graph().initializer())
    shapes[init.name()] = {init.dims().begin(), init.dims().end()};
  return shapes;
}

class Lowering {
 public:
  Lowering(const std::string& path, onnx::ModelProto& model, int64_t version)
      : path_(path), model_(model), version_(version) {
    collect_constants(model.graph());
  }

  // Rewrites every node, then the nodes that need their input's shape; throws on what is refused.
  void run(int64_t library_opset) {
    lower_graph(*model_.mutable_graph(), true);
    for (auto& opset : *model_.mutable_opset_import())
      if (opset.domain().empty() || opset.domain() == "ai.onnx") opset.set_version(library_opset);
    if (model_.ir_version() > onnx::IR_VERSION) model_.set_ir_version(onnx::IR_VERSION);
    lower_shaped_nodes();
    if (!refused_.empty()) {
      std::string text;
      for (const std::string& r : refused_) text += (text.empty() ? "" : "; ") + r;
      throw Error(ErrorKind::kUnsupported,
                  path_ + ": written for opset " + std::to_string(version_) +
                      ", which ktune reads " + "by rewriting each node into opset " +
                      std::to_string(library_opset) +
                      " (its ONNX library's newest); no such form for " + text);
    }
  }

 private:
  // The small constants a rewrite reads (axes, pads, split sizes, scales): a copy of the weights
  // would double the model's memory while it is read.
  static bool small(const onnx::TensorProto& t) {
    int64_t elements = 1;
    for (int64_t d : t.dims()) elements *= d;
    return elements <= Graph::kMaxValueElements;
  }

  void collect_constants(const onnx::GraphProto& g) {
    for (const auto& init : g.initializer()) {
      names_.insert(init.name());
      if (small(init)) constants_[init.name()] = init;
    }
    for (const auto& n : g.node()) {
      names_.insert(n.output().begin(), n.output().end());
      if (n.op_type() == "Constant" && n.output_size() == 1) {
        if (const auto* v = find_attr(n, "value"); v && v->has_t() && small(v->t()))
          constants_[n.output(0)] = v->t();
        if (const auto* v = find_attr(n, "value_ints"))
          constants_[n.output(0)] = ints_tensor({v->ints().begin(), v->ints().end()});
      }
      for (const auto& a : n.attribute())
        if (a.has_g()) collect_constants(a.g());
    }
  }

  static onnx::TensorProto ints_tensor(const std::vector<int64_t>& v) {
    onnx::TensorProto t = onnx::ToTensor<int64_t>(v);
    t.clear_dims();
    t.add_dims(static_cast<int64_t>(v.size()));
    return t;
  }

  std::optional<std::vector<int64_t>> ints(const std::string& name) const {
    auto it = constants_.find(name);
    if (it == constants_.end() || it->second.data_type() != onnx::TensorProto::INT64)
      return std::nullopt;
    return onnx::ParseData<int64_t>(&it->second);
  }

  std::optional<std::vector<float>> floats(const std::string& name) const {
    auto it = constants_.find(name);
    if (it == constants_.end() || it->second.data_type() != onnx::TensorProto::FLOAT)
      return std::nullopt;
    return onnx::ParseData<float>(&it->second);
  }

  // A new initializer of the top graph (subgraphs see it too), named after `hint` (made unique
  // against every name the graph uses).
  std::string add_initializer(const std::string& hint, onnx::TensorProto t) {
    std::string name = hint;
    for (int k = 1; constants_.count(name) || names_.count(name); ++k)
      name = hint + "_" + std::to_string(k);
    t.set_name(name);
    *model_.mutable_graph()->add_initializer() = t;
    constants_[name] = std::move(t);
    return name;
  }

  std::string add_ints(const std::string& hint, const std::vector<int64_t>& v) {
    return add_initializer(hint, ints_tensor(v));
  }

  std::string add_scalar(const std::string& hint, float v) {
    onnx::TensorProto t = onnx::ToTensor<float>(v);
    t.clear_dims();  // 0-d
    return add_initializer(hint, t);
  }

  void refuse(const onnx::NodeProto& n, const std::string& why) {
    refused_.push_back("node '" + n.name() + "' (" + n.op_type() + "): " + why);
  }

  void lower_graph(onnx::GraphProto& g, bool top) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (onnx::NodeProto& n : *g.mutable_node()) {
      for (auto& a : *n.mutable_attribute())
        if (a.has_g()) lower_graph(*a.mutable_g(), false);
      if (!n.domain().empty() && n.domain() != "ai.onnx") {
        *nodes.Add() = std::move(n);
        continue;
      }
      std::vector<onnx::NodeProto> replacement = lower_node(n, top);
      for (onnx::NodeProto& r : replacement) *nodes.Add() = std::move(r);
    }
    g.mutable_node()->Swap(&nodes);
  }

  // `n` in opset 17's form: itself rewritten, or the nodes that compute it.
  std::vector<onnx::NodeProto> lower_node(onnx::NodeProto& n, bool top) {
    static const std::set<std::string> kReduceAxesInput = {
        "ReduceMax", "ReduceMin",    "ReduceMean",      "ReduceProd",     "ReduceL1",
        "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
    const std::string& op = n.op_type();
    if (kReduceAxesInput.count(op)) reduce_axes_attribute(n);
    if (op == "Split" && find_attr(n, "num_outputs")) {
      if (!input_at(n, 1).empty())
        drop_attr(n, "num_outputs");
      else
        needs_shape(n, top);
    }
    if (op == "Pad") {
      if (text_attr(n, "mode", "constant") == "wrap")
        refuse(n, "the wrap mode (opset 19)");
      else if (!input_at(n, 3).empty())
        needs_shape(n, top);
    }
    if (op == "Resize") resize_attributes(n, top);
    if (op == "Cast" || op == "CastLike" || op == "QuantizeLinear") drop_attr(n, "saturate");
    if (op == "Cast" && int_attr(n, "to", 1) > onnx::TensorProto::BFLOAT16)
      refuse(n, "a cast to a type of opset 19 or later (float8, int4)");
    if (op == "QuantizeLinear" || op == "DequantizeLinear") quantize_attributes(n);
    if (op == "AveragePool") {
      if (const auto* d = find_attr(n, "dilations"))
        for (int64_t v : d->ints())
          if (v != 1) refuse(n, "dilations (opset 19) other than 1");
      drop_attr(n, "dilations");
    }
    if (op == "Gelu") return gelu(n);
    if (op == "Mish") return mish(n);
    return {std::move(n)};
  }

  void reduce_axes_attribute(onnx::NodeProto& n) {
    const bool noop = int_attr(n, "noop_with_empty_axes", 0) != 0;
    drop_attr(n, "noop_with_empty_axes");
    std::vector<int64_t> axes;
    if (const std::string name = input_at(n, 1); !name.empty()) {
      const auto v = ints(name);
      if (!v) return refuse(n, "axes that are not an int64 constant");
      axes = *v;
    }
    keep_inputs(n, 1);
    if (axes.empty() && noop) {  // reduces nothing
      n.set_op_type("Identity");
      n.clear_attribute();
      return;
    }
    if (!axes.empty()) set_ints_attr(n, "axes", axes);
  }

  void resize_attributes(onnx::NodeProto& n, bool top) {
    if (int_attr(n, "antialias", 0) != 0) refuse(n, "antialias (opset 18)");
    if (text_attr(n, "keep_aspect_ratio_policy", "stretch") != "stretch")
      refuse(n, "a keep_aspect_ratio_policy (opset 18) other than stretch");
    if (text_attr(n, "coordinate_transformation_mode", "") == "half_pixel_symmetric")
      refuse(n, "the half_pixel_symmetric coordinates (opset 19)");
    drop_attr(n, "antialias");
    drop_attr(n, "keep_aspect_ratio_policy");
    if (find_attr(n, "axes")) needs_shape(n, top);
  }

  void quantize_attributes(onnx::NodeProto& n) {
    if (int_attr(n, "block_size", 0) != 0) refuse(n, "blocked quantization (opset 21)");
    drop_attr(n, "block_size");
    const int64_t type = int_attr(n, "output_dtype", 0);
    // Without a zero point opset 17 quantizes to uint8.
    if (type != 0 && type != onnx::TensorProto::UINT8 && input_at(n, 2).empty())
      refuse(n, "an output_dtype (opset 21) other than uint8 without a zero point");
    drop_attr(n, "output_dtype");
  }

  std::vector<onnx::NodeProto> gelu(const onnx::NodeProto& n) {
    const std::string x = input_at(n, 0), y = n.output(0), at = n.name().empty() ? y : n.name();
    auto tmp = [&](const char* what) { return y + "_" + what; };
    std::vector<onnx::NodeProto> out;
    if (text_attr(n, "approximate", "none") == "tanh") {
      // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      out.push_back(make_node("Mul", {x, x}, tmp("square"), at + "/square"));
      out.push_back(make_node("Mul", {tmp("square"), x}, tmp("cube"), at + "/cube"));
      out.push_back(make_node("Mul", {tmp("cube"), add_scalar(tmp("k"), 0.044715f)}, tmp("cube_k"),
                              at + "/cube_k"));
      out.push_back(make_node("Add", {x, tmp("cube_k")}, tmp("inner"), at + "/inner"));
      out.push_back(make_node(
          "Mul", {tmp("inner"), add_scalar(tmp("c"), std::sqrt(2.0f / std::numbers::pi_v<float>))},
          tmp("scaled"), at + "/scaled"));
      out.push_back(make_node("Tanh", {tmp("scaled")}, tmp("tanh"), at + "/tanh"));
      out.push_back(
          make_node("Add", {tmp("tanh"), add_scalar(tmp("one"), 1.0f)}, tmp("plus"), at + "/plus"));
      out.push_back(
          make_node("Mul", {x, add_scalar(tmp("half"), 0.5f)}, tmp("half_x"), at + "/half_x"));
      out.push_back(make_node("Mul", {tmp("half_x"), tmp("plus")}, y, at));
      return out;
    }
    // torch.onnx's form below opset 20: x * (Erf(x / sqrt 2) + 1) * 0.5.
    out.push_back(
        make_node("Div", {x, add_scalar(tmp("sqrt2"), std::sqrt(2.0f))}, tmp("div"), at + "/div"));
    out.push_back(make_node("Erf", {tmp("div")}, tmp("erf"), at + "/erf"));
    out.push_back(
        make_node("Add", {tmp("erf"), add_scalar(tmp("one"), 1.0f)}, tmp("plus"), at + "/plus"));
    out.push_back(make_node("Mul", {x, tmp("plus")}, tmp("mul"), at + "/mul"));
    out.push_back(make_node("Mul", {tmp("mul"), add_scalar(tmp("half"), 0.5f)}, y, at));
    return out;
  }

  std::vector<onnx::NodeProto> mish(const onnx::NodeProto& n) {
    const std::string x = input_at(n, 0), y = n.output(0), at = n.name().empty() ? y : n.name();
    return {make_node("Softplus", {x}, y + "_softplus", at + "/softplus"),
            make_node("Tanh", {y + "_softplus"}, y + "_tanh", at + "/tanh"),
            make_node("Mul", {x, y + "_tanh"}, y, at)};
  }

  void needs_shape(const onnx::NodeProto& n, bool top) {
    if (!top) return refuse(n, "a form that needs its input's shape, inside a subgraph");
    shaped_.insert(n.output(0));
  }

  // The nodes whose opset-17 form depends on their input's shape: rewritten as inference reaches
  // them (one Pad's output can be another's input).
  void lower_shaped_nodes() {
    while (!shaped_.empty()) {
      const Shapes shapes = inferred_shapes(path_, model_);
      size_t done = 0;
      for (onnx::NodeProto& n : *model_.mutable_graph()->mutable_node()) {
        if (n.output_size() == 0 || !shaped_.count(n.output(0))) continue;
        auto in = shapes.find(input_at(n, 0));
        if (in == shapes.end()) continue;
        shaped_.erase(n.output(0));
        ++done;
        if (n.op_type() == "Split") split_sizes(n, in->second);
        if (n.op_type() == "Pad") pad_every_axis(n, in->second.size());
        if (n.op_type() == "Resize") resize_every_axis(n, in->second);
      }
      if (done == 0) {
        for (const auto& n : model_.graph().node())
          if (n.output_size() > 0 && shaped_.count(n.output(0)))
            refuse(n, "its input's shape is unknown");
        return;
      }
    }
  }

  // The axis `a` of a rank-`rank` tensor counted from 0, or -1 when out of range.
  static int64_t axis_of(int64_t a, size_t rank) {
    const int64_t r = static_cast<int64_t>(rank);
    if (a < 0) a += r;
    return a >= 0 && a < r ? a : -1;
  }

  void split_sizes(onnx::NodeProto& n, const std::vector<int64_t>& in) {
    const int64_t parts = int_attr(n, "num_outputs", 0);
    const int64_t axis = axis_of(int_attr(n, "axis", 0), in.size());
    if (axis < 0) return refuse(n, "an axis out of range");
    const int64_t dim = in[static_cast<size_t>(axis)];
    if (dim < 0) return refuse(n, "num_outputs over a dimension that --input leaves unknown");
    if (parts <= 0 || parts != n.output_size())
      return refuse(n, "num_outputs other than its output count");
    // ONNX: each part ceil(dim / n) long, the last one what remains.
    const int64_t part = (dim + parts - 1) / parts;
    std::vector<int64_t> sizes;
    for (int64_t k = 0; k < parts; ++k) sizes.push_back(std::min(part, dim - k * part));
    if (sizes.back() <= 0) return refuse(n, "more parts than its dimension can fill");
    drop_attr(n, "num_outputs");
    keep_inputs(n, 1);
    n.add_input(add_ints(n.output(0) + "_split", sizes));
  }

  void pad_every_axis(onnx::NodeProto& n, size_t rank) {
    const auto pads = ints(input_at(n, 1));
    const auto axes = ints(input_at(n, 3));
    if (!pads || !axes) return refuse(n, "pads or axes that are not int64 constants");
    if (pads->size() != 2 * axes->size()) return refuse(n, "pads of another length than 2 x axes");
    std::vector<int64_t> full(2 * rank, 0);
    for (size_t k = 0; k < axes->size(); ++k) {
      const int64_t a = axis_of((*axes)[k], rank);
      if (a < 0) return refuse(n, "an axis out of range");
      full[static_cast<size_t>(a)] = (*pads)[k];
      full[static_cast<size_t>(a) + rank] = (*pads)[k + axes->size()];
    }
    n.set_input(1, add_ints(n.output(0) + "_pads", full));
    keep_inputs(n, 3);
  }

  void resize_every_axis(onnx::NodeProto& n, const std::vector<int64_t>& in) {
    const auto* attr = find_attr(n, "axes");
    const std::vector<int64_t> axes(attr->ints().begin(), attr->ints().end());
    std::vector<size_t> at;
    for (int64_t a : axes) {
      const int64_t d = axis_of(a, in.size());
      if (d < 0) return refuse(n, "an axis out of range");
      at.push_back(static_cast<size_t>(d));
    }
    if (const std::string s = input_at(n, 2); !s.empty()) {
      const auto scales = floats(s);
      if (!scales || scales->size() != at.size())
        return refuse(n, "scales that are no float constant, one per axis");
      std::vector<float> full(in.size(), 1.0f);
      for (size_t k = 0; k < at.size(); ++k) full[at[k]] = (*scales)[k];
      onnx::TensorProto t = onnx::ToTensor<float>(full);
      t.clear_dims();
      t.add_dims(static_cast<int64_t>(full.size()));
      n.set_input(2, add_initializer(n.output(0) + "_scales", t));
    } else {
      const auto sizes = ints(input_at(n, 3));
      if (!sizes || sizes->size() != at.size())
        return refuse(n, "sizes that are no int64 constant, one per axis");
      std::vector<int64_t> full = in;
      for (size_t k = 0; k < at.size(); ++k) full[at[k]] = (*sizes)[k];
      for (int64_t d : full)
        if (d < 0) return refuse(n, "sizes of a dimension that --input leaves unknown");
      n.set_input(3, add_ints(n.output(0) + "_sizes", full));
    }
    drop_attr(n, "axes");
  }

  const std::string& path_;
  onnx::ModelProto& model_;
  const int64_t version_;
  std::map<std::string, onnx::TensorProto> constants_;
  std::set<std::string> names_;   // every initializer and node output, in subgraphs too
  std::set<std::string> shaped_;  // first outputs of the nodes that need their input's shape
  std::vector<std::string> refused_;
};

}  // namespace

int64_t lower_opset(const std::string& path, onnx::ModelProto& model) {
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const int64_t library = known.at("").second;
  int64_t version = 0;
  for (const auto& opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx") version = opset.version();
  if (version <= library) return 0;
  if (version > kNewestReadOpset)
    throw Error(ErrorKind::kUnsupported,
                path + ": opset " + std::to_string(version) +
                    " of domain 'ai.onnx' is newer than ktune reads (up to " +
                    std::to_string(kNewestReadOpset) + "); export the model at opset " +
                    std::to_string(kNewestReadOpset) + " or below");
  Lowering(path, model, version).run(library);
  return version;
}

}  // namespace ktune::frontend
