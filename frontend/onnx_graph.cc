// Reads an ONNX model through Debian's libonnx (protobuf types, checker, shape inference) into a
// Graph.
#include "frontend/onnx_graph.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "frontend/contrib_ops.h"
#include "frontend/opset_adapter.h"
#include "support/error.h"
#include "support/json_input.h"

namespace ktune::frontend {
namespace {

// ONNX's messages run over several lines (with the node's text); the first one says it.
std::string first_line(const std::string& text) {
  const std::string line = text.substr(0, text.find('\n'));
  return line.size() > 240 ? line.substr(0, 240) + "..." : line;
}

onnx::ModelProto read_model(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(ErrorKind::kNotFound, path + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, path + ": cannot be read");
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw Error(ErrorKind::kIo, path + ": cannot be read");
  onnx::ModelProto model;
  // An empty or arbitrary byte string can parse as a ModelProto with nothing set: an ONNX model
  // always has an IR version and a graph.
  if (!model.ParseFromString(bytes.str()) || model.ir_version() == 0 || !model.has_graph())
    throw Error(ErrorKind::kInvalidArgument,
                path + ": not an ONNX model (not a ModelProto with a graph)");
  return model;
}

// Opsets this ONNX library knows, and a schema for every operator: otherwise shape inference
// would silently leave tensors unknown.
void check_operator_sets(const std::string& path, const onnx::ModelProto& model) {
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  std::map<std::string, int64_t> versions;
  for (const auto& opset : model.opset_import()) {
    const std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    versions[domain] = opset.version();
    auto it = known.find(domain);
    if (it != known.end() &&
        (opset.version() < it->second.first || opset.version() > it->second.second))
      throw Error(ErrorKind::kUnsupported, path + ": opset " + std::to_string(opset.version()) +
                                               " of domain '" +
                                               (domain.empty() ? "ai.onnx" : domain) +
                                               "' is outside what this ONNX library reads (" +
                                               std::to_string(it->second.first) + ".." +
                                               std::to_string(it->second.second) + ")");
  }
  for (const auto& node : model.graph().node()) {
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    auto version = versions.find(domain);
    const int max_version = version == versions.end() ? 0 : static_cast<int>(version->second);
    // ONNX Runtime's quantizer writes contrib operators in its QOperator form: ktune knows two
    // (register_contrib_schemas); its QDQ form of the same model is plain ONNX.
    if (domain == "com.microsoft" && node.op_type().rfind("QLinear", 0) == 0 &&
        node.op_type() != "QLinearAdd" && node.op_type() != "QLinearGlobalAveragePool")
      throw Error(ErrorKind::kUnsupported,
                  path + ": operator 'com.microsoft::" + node.op_type() +
                      "' is an ONNX Runtime contrib operator of the QOperator form; ktune reads "
                      "QLinearConv, QLinearMatMul, QLinearAdd and QLinearGlobalAveragePool of it, "
                      "and every operator of the QDQ form (quantize with QuantFormat.QDQ)");
    if (onnx::OpSchemaRegistry::Schema(node.op_type(), max_version, domain) == nullptr)
      throw Error(ErrorKind::kUnsupported,
                  path + ": operator '" + (domain.empty() ? "" : domain + "::") + node.op_type() +
                      "' is in no operator set ktune can read");
  }
}

std::vector<int64_t> dims_of(const onnx::TypeProto& type) {
  std::vector<int64_t> dims;
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return dims;
  for (const auto& d : type.tensor_type().shape().dim())
    dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return dims;
}

// The element type's name as Graph::types keeps it ("" when the type says none).
std::string type_name(int32_t elem_type) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT:
      return "float32";
    case onnx::TensorProto::DOUBLE:
      return "float64";
    case onnx::TensorProto::FLOAT16:
      return "float16";
    case onnx::TensorProto::BFLOAT16:
      return "bfloat16";
    case onnx::TensorProto::UINT8:
      return "uint8";
    case onnx::TensorProto::INT8:
      return "int8";
    case onnx::TensorProto::INT32:
      return "int32";
    case onnx::TensorProto::INT64:
      return "int64";
    case onnx::TensorProto::BOOL:
      return "bool";
    default:
      return elem_type == onnx::TensorProto::UNDEFINED ? "" : "other";
  }
}

void record_type(Graph& graph, const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type()) return;
  const std::string t = type_name(v.type().tensor_type().elem_type());
  if (!t.empty()) graph.types[v.name()] = t;
}

std::string dims_text(const onnx::TypeProto& type) {
  // Joined by 'x' like --input's dims while every name is a plain word ("Nx3x224x224"); an
  // exporter's dotted names (paddle2onnx's "p2o.DynamicDimension.0") read better as a list.
  bool plain = true;
  for (const auto& d : type.tensor_type().shape().dim())
    for (char c : d.dim_param())
      plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  std::string text;
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (!text.empty()) text += plain ? "x" : ", ";
    text += d.has_dim_value() ? std::to_string(d.dim_value())
                              : (d.dim_param().empty() ? "?" : d.dim_param());
  }
  return plain ? text : "[" + text + "]";
}

// Applies the --input shapes and requires every graph input to be fully known afterwards.
// Returns the inputs whose fixed dimensions changed, with their shapes in the model (the model's
// stored shapes are then stale).
std::map<std::string, std::vector<int64_t>> set_input_shapes(
    const std::string& path, onnx::GraphProto& graph, const std::set<std::string>& constants,
    const std::vector<InputShape>& inputs) {
  std::map<std::string, const InputShape*> given;
  for (const auto& in : inputs) given[in.name] = &in;
  // A name that is no input (a typo) first: otherwise the input it meant says it is symbolic, and
  // nothing says the --input was ignored.
  std::vector<std::string> names;
  for (const auto& value : graph.input())
    if (!constants.count(value.name())) names.push_back(value.name());
  for (const auto& [name, shape] : given)
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      throw Error(ErrorKind::kInvalidArgument,
                  "--input " + name + ": the model has no such input (its inputs: " + known + ")");
    }
  std::map<std::string, std::vector<int64_t>> replaced;
  for (auto& value : *graph.mutable_input()) {
    if (constants.count(value.name())) continue;
    auto it = given.find(value.name());
    if (it != given.end()) {
      auto* shape = value.mutable_type()->mutable_tensor_type()->mutable_shape();
      const std::vector<int64_t>& want = it->second->dims;
      if (shape->dim_size() != 0 && shape->dim_size() != static_cast<int>(want.size()))
        throw Error(ErrorKind::kInvalidArgument,
                    "--input " + value.name() + "=" + shape_text(want) +
                        ": the model's input has rank " + std::to_string(shape->dim_size()) + " (" +
                        dims_text(value.type()) + ")");
      // Fixed dimensions are overridden too (another batch size, another image size); shape
      // inference then says whether the graph allows it.
      for (int d = 0; d < shape->dim_size(); ++d)
        if (shape->dim(d).has_dim_value() &&
            shape->dim(d).dim_value() != want[static_cast<size_t>(d)])
          replaced[value.name()] = dims_of(value.type());
      shape->clear_dim();
      for (int64_t d : want) shape->add_dim()->set_dim_value(d);
      given.erase(it);
    }
    const std::vector<int64_t> dims = dims_of(value.type());
    bool known = value.type().tensor_type().has_shape();
    for (int64_t d : dims) known = known && d > 0;
    if (!known) {
      // The example: its known dimensions, 1 for each symbolic one (a batch of one).
      std::string example;
      for (const auto& d : value.type().tensor_type().shape().dim())
        example += (example.empty() ? "" : "x") +
                   std::to_string(d.has_dim_value() && d.dim_value() > 0 ? d.dim_value() : 1);
      throw Error(ErrorKind::kInvalidArgument,
                  path + ": input '" + value.name() + "' has a symbolic shape (" +
                      dims_text(value.type()) + "); give it with --input " + value.name() +
                      "=<dims, e.g. " + (example.empty() ? "1x3x224x224" : example) +
                      ": 1 for each symbolic dimension, or the size the model is used at>");
    }
  }
  return replaced;
}

// The elements of a small float, double or integer tensor as doubles; nullopt for other types,
// external data or more than Graph::kMaxValueElements elements.
std::optional<std::vector<double>> small_values(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  if (n < 0 || n > Graph::kMaxValueElements || t.data_location() == onnx::TensorProto::EXTERNAL)
    return std::nullopt;
  std::vector<double> out;
  const std::string& raw = t.raw_data();
  // raw_data is little-endian, as the hosts ktune runs on.
  // The raw bytes as T, else the typed field.
  auto read = [&]<typename T>(T, const auto& field) -> bool {
    if (!t.has_raw_data()) {
      out.assign(field.begin(), field.end());
      return true;
    }
    if (raw.size() != static_cast<size_t>(n) * sizeof(T)) return false;
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
      out.push_back(static_cast<double>(v));
    }
    return true;
  };
  bool ok = false;
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      ok = read(float{}, t.float_data());
      break;
    case onnx::TensorProto::DOUBLE:
      ok = read(double{}, t.double_data());
      break;
    case onnx::TensorProto::INT64:
      ok = read(int64_t{}, t.int64_data());
      break;
    // Zero points: int32_data holds INT32, INT8 and UINT8 elements when there is no raw data.
    case onnx::TensorProto::INT32:
      ok = read(int32_t{}, t.int32_data());
      break;
    case onnx::TensorProto::INT8:
      ok = read(int8_t{}, t.int32_data());
      break;
    case onnx::TensorProto::UINT8:
      ok = read(uint8_t{}, t.int32_data());
      break;
    default:
      return std::nullopt;
  }
  if (!ok || out.size() != static_cast<size_t>(n)) return std::nullopt;
  return out;
}

// The ranges of an int8 or uint8 tensor with data in the model (ByteRanges), else nullopt.
std::optional<ByteRanges> byte_range(const onnx::TensorProto& t) {
  const bool s8 = t.data_type() == onnx::TensorProto::INT8;
  if ((!s8 && t.data_type() != onnx::TensorProto::UINT8) ||
      t.data_location() == onnx::TensorProto::EXTERNAL)
    return std::nullopt;
  std::vector<int64_t> v;
  if (t.has_raw_data())
    for (char c : t.raw_data()) v.push_back(s8 ? static_cast<int8_t>(c) : static_cast<uint8_t>(c));
  else
    v.assign(t.int32_data().begin(), t.int32_data().end());
  const std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (v.empty() || static_cast<int64_t>(v.size()) != n) return std::nullopt;
  ByteRanges r;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  r.whole = {*lo, *hi};
  // Element i lies in slice (i / inner0) of the first axis and ((i / inner1) % d1) of the second.
  const int64_t d0 = dims.empty() ? 1 : dims[0];
  const int64_t d1 = dims.size() >= 2 ? dims[1] : 0;
  const int64_t inner0 = n / std::max<int64_t>(d0, 1);
  const int64_t inner1 = d1 > 0 ? inner0 / d1 : 0;
  const auto widen = [](ByteRanges::Range& range, int64_t x) {
    range = {std::min(range.first, x), std::max(range.second, x)};
  };
  r.axis0.assign(static_cast<size_t>(d0), {INT64_MAX, INT64_MIN});
  r.axis1.assign(static_cast<size_t>(d1), {INT64_MAX, INT64_MIN});
  for (int64_t i = 0; i < n; ++i) {
    widen(r.axis0[static_cast<size_t>(i / inner0)], v[static_cast<size_t>(i)]);
    if (d1 > 0) widen(r.axis1[static_cast<size_t>(i / inner1 % d1)], v[static_cast<size_t>(i)]);
  }
  return r;
}

// The `count` values of a tensor's data: its raw bytes (little-endian Stored), else its typed
// field.
template <typename Stored, typename Out, typename Typed>
std::vector<Out> values_of(const std::string& raw, const Typed& typed, int64_t count,
                           const std::function<Error(const std::string&)>& bad) {
  std::vector<Out> out;
  if (!raw.empty()) {
    if (raw.size() != static_cast<size_t>(count) * sizeof(Stored))
      throw bad("raw data does not match the shape");
    std::vector<Stored> tmp(static_cast<size_t>(count));
    std::memcpy(tmp.data(), raw.data(), raw.size());
    out.assign(tmp.begin(), tmp.end());
  } else {
    out.assign(typed.begin(), typed.end());
  }
  if (static_cast<int64_t>(out.size()) != count) throw bad("data does not match the shape");
  return out;
}

// The value of one tensor, or nullopt for a type a build does not read.
std::optional<ConstantValue> value_of(const std::string& path, const onnx::TensorProto& t) {
  ConstantValue v;
  v.shape.assign(t.dims().begin(), t.dims().end());
  int64_t count = 1;
  for (int64_t d : v.shape) count *= d;
  const std::function<Error(const std::string&)> bad = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidArgument, path + ": constant '" + t.name() + "': " + why);
  };
  if (t.data_location() == onnx::TensorProto::EXTERNAL) throw bad("external data is not supported");
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      v.f32 = values_of<float, float>(t.raw_data(), t.float_data(), count, bad);
      return v;
    case onnx::TensorProto::DOUBLE:
      v.f32 = values_of<double, float>(t.raw_data(), t.double_data(), count, bad);
      return v;
    case onnx::TensorProto::BOOL:  // Where's conditions, folded with the shapes they select
      v.i64 = values_of<uint8_t, int64_t>(t.raw_data(), t.int32_data(), count, bad);
      return v;
    case onnx::TensorProto::INT64:
      v.i64 = values_of<int64_t, int64_t>(t.raw_data(), t.int64_data(), count, bad);
      return v;
    case onnx::TensorProto::INT32:
      v.i64 = values_of<int32_t, int64_t>(t.raw_data(), t.int32_data(), count, bad);
      return v;
    case onnx::TensorProto::INT8:
      v.i64 = values_of<int8_t, int64_t>(t.raw_data(), t.int32_data(), count, bad);
      return v;
    case onnx::TensorProto::UINT8:
      v.i64 = values_of<uint8_t, int64_t>(t.raw_data(), t.int32_data(), count, bad);
      return v;
    default:
      return std::nullopt;
  }
}

Attribute attribute_of(const onnx::AttributeProto& a) {
  Attribute out;
  if (a.has_i()) out.ints.push_back(a.i());
  out.ints.insert(out.ints.end(), a.ints().begin(), a.ints().end());
  if (a.has_f()) out.floats.push_back(a.f());
  out.floats.insert(out.floats.end(), a.floats().begin(), a.floats().end());
  if (a.has_s()) out.text = a.s();
  if (a.has_t()) out.tensor = value_of("attribute '" + a.name() + "'", a.t());
  return out;
}

}  // namespace

std::vector<int64_t> Node::ints(const std::string& key, std::vector<int64_t> fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.ints;
}

int64_t Node::int_or(const std::string& key, int64_t fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() || it->second.ints.empty() ? fallback : it->second.ints[0];
}

std::string Node::text_or(const std::string& key, std::string fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.text;
}

double Node::float_or(const std::string& key, double fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() || it->second.floats.empty() ? fallback : it->second.floats[0];
}

std::optional<std::vector<int64_t>> Graph::shape(const std::string& tensor) const {
  auto it = shapes.find(tensor);
  if (it == shapes.end()) return std::nullopt;
  for (int64_t d : it->second)
    if (d < 0) return std::nullopt;
  return it->second;
}

std::string Graph::type(const std::string& tensor) const {
  auto it = types.find(tensor);
  return it == types.end() ? "" : it->second;
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string text;
  for (int64_t d : dims)
    text += (text.empty() ? "" : "x") + (d < 0 ? std::string("?") : std::to_string(d));
  return text;
}

InputShape parse_input_shape(const std::string& text) {
  const auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw Error(ErrorKind::kInvalidArgument,
                "--input " + quote_input(text) + ": expected name=DIMS, e.g. input=1x3x224x224");
  InputShape shape{text.substr(0, eq), {}};
  std::string_view dims(text);
  dims.remove_prefix(eq + 1);
  while (!dims.empty()) {
    const auto x = dims.find('x');
    const std::string_view part = dims.substr(0, x);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || v < 1 ||
        v > (int64_t{1} << 31))
      throw Error(
          ErrorKind::kInvalidArgument,
          "--input " + quote_input(text) + ": dimensions are positive integers joined by 'x'");
    shape.dims.push_back(v);
    if (x == std::string_view::npos) break;
    dims.remove_prefix(x + 1);
    if (dims.empty())
      throw Error(
          ErrorKind::kInvalidArgument,
          "--input " + quote_input(text) + ": dimensions are positive integers joined by 'x'");
  }
  return shape;
}

namespace {

void record_initializer(Graph& graph, const onnx::TensorProto& init) {
  graph.constants.insert(init.name());
  graph.shapes[init.name()] = std::vector<int64_t>(init.dims().begin(), init.dims().end());
  if (const std::string t = type_name(init.data_type()); !t.empty()) graph.types[init.name()] = t;
  if (auto v = small_values(init)) graph.values[init.name()] = std::move(*v);
  if (auto r = byte_range(init)) graph.byte_ranges[init.name()] = *r;
}

// The shapes and types shape inference left in a (sub)graph's value_info and outputs.
void record_value_info(Graph& graph, const onnx::GraphProto& g) {
  for (const auto& v : g.value_info()) {
    graph.shapes[v.name()] = dims_of(v.type());
    record_type(graph, v);
  }
  for (const auto& v : g.output()) {
    record_type(graph, v);
    if (v.type().tensor_type().has_shape()) graph.shapes[v.name()] = dims_of(v.type());
  }
}

// The node as Graph keeps it. A Constant node's output joins graph.constants (weights may come
// from Constant nodes instead of initializers: some exporters do that); a subgraph attribute
// becomes a Branch, its tensors recorded in `graph`'s maps.
Node node_of(const onnx::NodeProto& n, int index, Graph& graph) {
  Node node;
  node.op = n.op_type();
  node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
  node.name = n.name().empty() ? n.op_type() + "#" + std::to_string(index) : n.name();
  node.inputs.assign(n.input().begin(), n.input().end());
  node.outputs.assign(n.output().begin(), n.output().end());
  node.onnx = n.SerializeAsString();
  for (const auto& a : n.attribute()) {
    if (a.has_g()) {
      Branch b{a.name(), {}, {}};
      for (const auto& init : a.g().initializer()) record_initializer(graph, init);
      record_value_info(graph, a.g());
      int k = 0;
      for (const auto& inner : a.g().node()) b.nodes.push_back(node_of(inner, k++, graph));
      for (const auto& out : a.g().output()) b.outputs.push_back(out.name());
      node.branches.push_back(std::move(b));
      continue;
    }
    node.attrs[a.name()] = attribute_of(a);
  }
  if (node.op == "Constant" && node.domain.empty() && node.outputs.size() == 1) {
    const std::string& out = node.outputs[0];
    graph.constants.insert(out);
    for (const auto& a : n.attribute()) {
      if (a.name() == "value" && a.has_t()) {
        if (auto v = small_values(a.t())) graph.values[out] = std::move(*v);
        if (auto r = byte_range(a.t())) graph.byte_ranges[out] = *r;
      } else if (a.name() == "value_float" || a.name() == "value_floats") {
        graph.values[out].assign(a.floats().begin(), a.floats().end());
        if (a.has_f()) graph.values[out] = {a.f()};
      } else if (a.name() == "value_int" || a.name() == "value_ints") {
        graph.values[out].assign(a.ints().begin(), a.ints().end());
        if (a.has_i()) graph.values[out] = {static_cast<double>(a.i())};
      }
    }
    if (graph.values.count(out) &&
        static_cast<int64_t>(graph.values[out].size()) > Graph::kMaxValueElements)
      graph.values.erase(out);
  }
  return node;
}

// Reads, checks and infers the shapes of the model at `path` (load_onnx's contract) into a Graph.
Graph graph_of(const std::string& path, onnx::ModelProto& model,
               const std::vector<InputShape>& inputs) {
  register_contrib_schemas();
  Graph graph;
  // The model is named by its file, as build --model names its library: exporters name every
  // graph alike (torch.onnx "main_graph", tf2onnx "tf2onnx").
  graph.name = std::filesystem::path(path).stem().string();
  for (const auto& init : model.graph().initializer()) record_initializer(graph, init);
  graph.replaced_inputs = set_input_shapes(path, *model.mutable_graph(), graph.constants, inputs);
  if (!graph.replaced_inputs.empty()) {
    // Shapes stored for the old input would contradict the new ones: inference recomputes them.
    model.mutable_graph()->clear_value_info();
    // The outputs keep their rank (ONNX's checker requires a shape), their dimensions unknown.
    for (auto& out : *model.mutable_graph()->mutable_output())
      if (out.type().tensor_type().has_shape())
        for (auto& d : *out.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
          d.Clear();
  }
  // A model of a newer opset is checked in the older opset's form (the library knows no other);
  // the rewrite reads the input shapes just fixed.
  const int before = model.graph().initializer_size();
  lower_opset(path, model);
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                path + ": invalid ONNX model: " + first_line(e.what()));
  }
  check_operator_sets(path, model);
  // Initializers the rewrite added (split sizes, pads of every axis).
  for (int k = before; k < model.graph().initializer_size(); ++k)
    record_initializer(graph, model.graph().initializer(k));
  try {
    // Strict: a node whose shapes cannot be inferred is an error, not a silently unknown tensor.
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1, /*data_prop=*/true);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                path + ": shape inference failed: " + first_line(e.what()));
  }

  for (const auto& opset : model.opset_import()) {
    const std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    graph.opsets[domain] = opset.version();
    if (domain.empty()) graph.opset = opset.version();
  }
  graph.ir_version = model.ir_version();
  for (const auto& v : model.graph().input()) {
    if (!graph.constants.count(v.name())) graph.inputs.push_back(v.name());
    graph.shapes[v.name()] = dims_of(v.type());
    record_type(graph, v);
  }
  record_value_info(graph, model.graph());
  for (const auto& v : model.graph().output()) graph.outputs.push_back(v.name());
  int index = 0;
  for (const auto& n : model.graph().node()) graph.nodes.push_back(node_of(n, index++, graph));
  return graph;
}

// A Constant node's value in any of its attribute forms, or nullopt for a type a build does not
// read.
std::optional<ConstantValue> constant_node_value(const std::string& path,
                                                 const onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    if (a.name() == "value" && a.has_t()) return value_of(path, a.t());
    ConstantValue v;
    if (a.name() == "value_float") v.f32 = {a.f()};
    if (a.name() == "value_floats") {
      v.f32.assign(a.floats().begin(), a.floats().end());
      v.shape = {a.floats_size()};
    }
    if (a.name() == "value_int") v.i64 = {a.i()};
    if (a.name() == "value_ints") {
      v.i64.assign(a.ints().begin(), a.ints().end());
      v.shape = {a.ints_size()};
    }
    if (!v.f32.empty() || !v.i64.empty() || !v.shape.empty()) return v;
  }
  return std::nullopt;
}

void collect_constants(const std::string& path, const onnx::GraphProto& g, Constants& values) {
  for (const auto& init : g.initializer())
    if (auto v = value_of(path, init)) values[init.name()] = std::move(*v);
  for (const auto& n : g.node()) {
    if (n.op_type() == "Constant" && n.output_size() == 1)
      if (auto v = constant_node_value(path, n)) values[n.output(0)] = std::move(*v);
    for (const auto& a : n.attribute())
      if (a.has_g()) collect_constants(path, a.g(), values);
  }
}

}  // namespace

Graph load_onnx(const std::string& path, const std::vector<InputShape>& inputs) {
  onnx::ModelProto model = read_model(path);
  return graph_of(path, model, inputs);
}

Model read_onnx(const std::string& path, const std::vector<InputShape>& inputs) {
  onnx::ModelProto model = read_model(path);
  Model m;
  m.graph = graph_of(path, model, inputs);
  // After graph_of: a model of a newer opset has gained initializers (opset_adapter.h).
  collect_constants(path, model.graph(), m.constants);
  return m;
}

namespace {

int32_t onnx_type(const std::string& name) {
  static const std::map<std::string, int32_t> kTypes = {
      {"float32", onnx::TensorProto::FLOAT},   {"float64", onnx::TensorProto::DOUBLE},
      {"float16", onnx::TensorProto::FLOAT16}, {"bfloat16", onnx::TensorProto::BFLOAT16},
      {"uint8", onnx::TensorProto::UINT8},     {"int8", onnx::TensorProto::INT8},
      {"int32", onnx::TensorProto::INT32},     {"int64", onnx::TensorProto::INT64},
      {"bool", onnx::TensorProto::BOOL}};
  auto it = kTypes.find(name);
  return it == kTypes.end() ? onnx::TensorProto::UNDEFINED : it->second;
}

void set_value_info(onnx::ValueInfoProto& v, const Graph& g, const std::string& name,
                    bool with_shape) {
  v.set_name(name);
  auto* tensor = v.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx_type(g.type(name)));
  auto s = g.shapes.find(name);
  if (!with_shape || s == g.shapes.end()) return;
  auto* shape = tensor->mutable_shape();
  for (int64_t d : s->second) {
    auto* dim = shape->add_dim();
    if (d >= 0) dim->set_dim_value(d);
  }
}

// A constant as an initializer: the values a shape computation reads (shapes, axes, scales).
// Weights are declared as inputs of their type and shape instead: inference needs no more.
void add_constant(onnx::GraphProto& graph, const Model& m, const std::string& name) {
  constexpr size_t kMaxData = 4096;
  const ConstantValue& c = m.constants.at(name);
  const int32_t type = onnx_type(m.graph.type(name));
  if (type == onnx::TensorProto::UNDEFINED || c.f32.size() + c.i64.size() > kMaxData) {
    onnx::ValueInfoProto v;
    set_value_info(v, m.graph, name, true);
    v.mutable_type()->mutable_tensor_type()->clear_shape();
    for (int64_t d : c.shape)
      v.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    if (type == onnx::TensorProto::UNDEFINED)
      v.mutable_type()->mutable_tensor_type()->set_elem_type(
          c.f32.empty() ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT);
    *graph.add_input() = std::move(v);
    return;
  }
  onnx::TensorProto* t = graph.add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : c.shape) t->add_dims(d);
  switch (type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      t->set_data_type(onnx::TensorProto::FLOAT);
      for (float v : c.f32) t->add_float_data(v);
      break;
    case onnx::TensorProto::DOUBLE:
      for (float v : c.f32) t->add_double_data(v);
      break;
    case onnx::TensorProto::INT64:
      for (int64_t v : c.i64) t->add_int64_data(v);
      break;
    default:  // INT32, INT8, UINT8 and BOOL live in int32_data
      for (int64_t v : c.i64) t->add_int32_data(static_cast<int32_t>(v));
  }
}

}  // namespace

void infer_shapes(Model& m) {
  Graph& g = m.graph;
  onnx::ModelProto model;
  model.set_ir_version(g.ir_version > 0 ? g.ir_version : static_cast<int64_t>(onnx::IR_VERSION));
  std::map<std::string, int64_t> opsets = g.opsets;
  if (opsets.empty()) opsets[""] = g.opset;  // a graph made in code, not read
  for (const auto& [domain, version] : opsets) {
    auto* opset = model.add_opset_import();
    opset->set_domain(domain);
    opset->set_version(version);
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(g.name);
  for (const std::string& in : g.inputs) set_value_info(*graph.add_input(), g, in, true);
  std::set<std::string> added;
  for (const Node& n : g.nodes) {
    onnx::NodeProto& p = *graph.add_node();
    if (!n.onnx.empty() && !p.ParseFromString(n.onnx))
      throw Error(ErrorKind::kInternal, "node '" + n.name + "': its ONNX form does not parse");
    if (n.onnx.empty()) {
      // Made by a pass: an operator without attributes (an Identity).
      if (!n.attrs.empty())
        throw Error(ErrorKind::kInternal, "node '" + n.name + "' has no ONNX form to infer");
      p.set_op_type(n.op);
      p.set_domain(n.domain);
      p.set_name(n.name);
    }
    p.clear_input();
    p.clear_output();
    for (const std::string& in : n.inputs) p.add_input(in);
    for (const std::string& out : n.outputs) p.add_output(out);
    std::vector<std::string> read = n.inputs;
    for (const Branch& b : n.branches)
      for (const Node& inner : b.nodes)
        read.insert(read.end(), inner.inputs.begin(), inner.inputs.end());
    for (const std::string& in : read)
      if (m.constants.count(in) && added.insert(in).second) add_constant(graph, m, in);
  }
  for (const std::string& out : g.outputs) set_value_info(*graph.add_output(), g, out, false);
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1, /*data_prop=*/true);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                "model '" + g.name +
                    "': shape inference after the clean-up failed: " + first_line(e.what()));
  }
  record_value_info(g, model.graph());
}

const Branch* Node::branch(const std::string& key) const {
  for (const Branch& b : branches)
    if (b.name == key) return &b;
  return nullptr;
}

}  // namespace ktune::frontend
