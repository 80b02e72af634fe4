// Defines Graph, a model's operator graph with every tensor's inferred shape, and load_onnx, which
// reads it from an ONNX file.
//
// frontend/ is the model-import module (library ktune_frontend). It sits after schedule_space and
// tuning_db and before tuner in the module order (support, te, codegen, schedule_space,
// cost_model, tuning_db, frontend, tuner, rpc_runner, tools): it may use te, schedule_space and
// tuning_db, and tuner (the multi-task scheduler) and tools use it. The ONNX protobuf types stay
// inside the .cc files: callers see only these plain structs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ktune::frontend {

// The value of a constant tensor (an initializer or a Constant node's output).
struct ConstantValue {
  std::vector<int64_t> shape;
  std::vector<float> f32;    // FLOAT tensors
  std::vector<int64_t> i64;  // INT64, INT32, INT8 and UINT8 tensors (shapes, axes, pads,
                             // quantized weights, zero points)
};

// One attribute of a node: what ONNX's ints/int/floats/float/string/tensor attributes hold.
struct Attribute {
  std::vector<int64_t> ints;  // INT (one element) or INTS
  std::vector<float> floats;  // FLOAT (one element) or FLOATS
  std::string text;           // STRING
  // TENSOR of a type ConstantValue holds (ConstantOfShape's value, a Constant's value).
  std::optional<ConstantValue> tensor = std::nullopt;
};

struct Node;

// A subgraph attribute: its nodes (which may read the enclosing graph's tensors) and its outputs.
// Its tensors' shapes and types are in the enclosing Graph's maps (ONNX names are unique across
// a model's subgraphs).
struct Branch {
  std::string name;  // the attribute: "then_branch", "else_branch"
  std::vector<Node> nodes;
  std::vector<std::string> outputs;
};

struct Node {
  std::string op;      // "Conv"
  std::string domain;  // "" for the default ONNX domain
  std::string name;    // the node's name, or "<op>#<index>" when the model leaves it empty
  std::vector<std::string> inputs;  // tensor names ("" = an omitted optional input)
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attrs;
  // Subgraph attributes (If's then_branch and else_branch), in the node's attribute order.
  std::vector<Branch> branches = {};
  // The ONNX NodeProto it was read from, serialized, with its attributes as ONNX types them
  // (infer_shapes runs ONNX's shape inference on it again); "" for a node a pass made.
  std::string onnx = "";

  // The attribute's ints, or `fallback` when absent.
  std::vector<int64_t> ints(const std::string& key, std::vector<int64_t> fallback = {}) const;
  // The attribute's first int, or `fallback` when absent.
  int64_t int_or(const std::string& key, int64_t fallback) const;
  // The attribute's text, or `fallback` when absent.
  std::string text_or(const std::string& key, std::string fallback) const;
  // The attribute's first float, or `fallback` when absent.
  double float_or(const std::string& key, double fallback) const;
  // The branch attribute `key` (If's "then_branch"), or nullptr.
  const Branch* branch(const std::string& key) const;
};

// The least and greatest element of an int8 or uint8 constant: of the whole tensor, and of each
// slice along its first axis and (rank >= 2) its second, where weights have their output channels
// (a conv's [K, C, R, S] and a Gemm's [N, K] along the first, a MatMul's [K, N] along the second).
// A 1-D tensor's slices along its first axis are its elements (per-channel zero points).
struct ByteRanges {
  using Range = std::pair<int64_t, int64_t>;
  Range whole{0, 0};
  std::vector<Range> axis0, axis1;  // axis1 empty below rank 2
};

// A model after shape inference. Value type, no ONNX types.
struct Graph {
  std::string name;                 // the model file's stem (what reports and summaries show)
  std::vector<Node> nodes;          // in the model's (topological) order
  std::vector<std::string> inputs;  // graph inputs that are not initializers
  std::vector<std::string> outputs;
  std::set<std::string> constants;  // initializers and Constant nodes' outputs (weights)
  // The values of the small numeric constants (at most kMaxValueElements elements: scalars such
  // as Clip's bounds, which a fused epilogue takes as arguments), as doubles.
  std::map<std::string, std::vector<double>> values;
  static constexpr int64_t kMaxValueElements = 16;
  // The ranges of each int8 or uint8 constant (quantized weights, zero points): whether weights
  // minus their zero point fit int8 without reading the weights.
  std::map<std::string, ByteRanges> byte_ranges;
  // The shape of each tensor shape inference could resolve; a dimension it could not resolve
  // is -1. Tensors without any shape information are absent.
  std::map<std::string, std::vector<int64_t>> shapes;
  // The element type of each tensor whose type is known: "float32", "uint8", "int8", "int32",
  // "int64", ... (ONNX's type names, lower case, with the width).
  std::map<std::string, std::string> types;
  int64_t opset = 0;  // the default domain's opset
  // Every operator set the model imports (domain "" = ai.onnx) and its IR version: what
  // infer_shapes gives ONNX again.
  std::map<std::string, int64_t> opsets;
  int64_t ir_version = 0;
  // The graph inputs whose fixed dimensions --input changed, with the model's own shape (a
  // symbolic dimension as -1): what `ktune tasks` says was replaced.
  std::map<std::string, std::vector<int64_t>> replaced_inputs;

  // The shape of `tensor` when fully known (no -1), else nullopt.
  std::optional<std::vector<int64_t>> shape(const std::string& tensor) const;
  // The element type of `tensor` (Graph::types), "" when unknown.
  std::string type(const std::string& tensor) const;
};

// `--input name=1x3x224x224`: the full shape of one graph input.
struct InputShape {
  std::string name;
  std::vector<int64_t> dims;
};

// Parses "name=1x3x224x224" (positive dims). Throws Error(kInvalidArgument) naming the text.
InputShape parse_input_shape(const std::string& text);

// Reads the ONNX model at `path`, sets the given input shapes (they fill symbolic dimensions and
// override fixed ones), checks the model with ONNX's checker and infers every tensor's
// shape with ONNX's shape inference. Returns the graph.
// Throws Error with one line, naming the file:
//   kNotFound         the file does not exist;  kIo  it cannot be read;
//   kInvalidArgument  not an ONNX model (not a ModelProto, no graph), the ONNX checker rejects it,
//                     an --input names no graph input or disagrees with its rank,
//                     a graph input keeps a symbolic dimension (the message says which --input
//                     to give), shape inference fails;
//   kUnsupported      an opset newer than ktune reads (opset_adapter.h: models of an opset newer
//                     than the ONNX library's are read in its form, and some nodes have none),
//                     or an operator no ONNX schema describes (a custom domain).
Graph load_onnx(const std::string& path, const std::vector<InputShape>& inputs = {});

// Constant tensors by name (weights, shapes, scalars).
using Constants = std::map<std::string, ConstantValue>;

// A model as read: its graph and the values of its constants.
struct Model {
  Graph graph;
  Constants constants;
};

// Runs ONNX's shape inference (strict, with data propagation) again on `model` as the clean-up
// passes left it, its constants known: shapes that depended on shape arithmetic (a Concat with
// a folded operand, a Reshape to a folded target, an If inlined) are then known. Every tensor's
// shape and type in model.graph is replaced by what it infers. Throws Error(kInvalidArgument)
// naming the model when inference fails.
void infer_shapes(Model& model);

// load_onnx, and the values of every FLOAT, INT64, INT32, INT8 and UINT8 constant of the model
// (initializers, those opset_adapter.h added, and Constant nodes' value, value_float(s) and
// value_int(s), in subgraphs too) by tensor name: what a model build packs. Constants of other
// types are left out (a build that needs one says so). Throws like load_onnx, and
// Error(kInvalidArgument) naming a tensor whose data does not match its shape or that refers to
// external data.
Model read_onnx(const std::string& path, const std::vector<InputShape>& inputs = {});

// "1x3x224x224" (-1 prints as "?").
std::string shape_text(const std::vector<int64_t>& dims);

}  // namespace ktune::frontend
