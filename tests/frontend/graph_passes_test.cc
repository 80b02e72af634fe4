// Tests of the graph clean-up passes (frontend/graph_passes.h), one test group per pass, on graphs
// written here node by node: the values folded, the nodes left, the readers rewired.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "frontend/constant_eval.h"
#include "frontend/graph_passes.h"
#include "frontend/heads_matmul.h"
#include "frontend/layer_norm.h"

namespace ktune::frontend {
namespace {

Node node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
          std::map<std::string, Attribute> attrs = {}) {
  Node n;
  n.op = op;
  n.name = outputs.empty() ? op : outputs[0] + "_node";
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attrs = std::move(attrs);
  return n;
}

Attribute ints(std::vector<int64_t> v) { return Attribute{std::move(v), {}, {}, {}}; }

ConstantValue i64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  return ConstantValue{std::move(shape), {}, std::move(v)};
}

// A model whose input "x" is [2, 8, 4, 4] float32, opset 13.
Model with_input() {
  Model m;
  m.graph.opset = 13;
  m.graph.inputs = {"x"};
  m.graph.shapes["x"] = {2, 8, 4, 4};
  m.graph.types["x"] = "float32";
  return m;
}

void constant(Model& m, const std::string& name, ConstantValue v, const std::string& type) {
  m.graph.constants.insert(name);
  m.graph.shapes[name] = v.shape;
  m.graph.types[name] = type;
  m.constants[name] = std::move(v);
}

std::vector<std::string> ops(const Model& m) {
  std::vector<std::string> out;
  for (const Node& n : m.graph.nodes) out.push_back(n.op);
  return out;
}

// torch's x.view(x.size(0), -1): Shape -> Gather(0) -> Unsqueeze -> Concat([-1]) -> Reshape. Every
// node but the Reshape folds, and the Reshape's shape becomes the constant [2, 128].
TEST(FoldConstants, ShapeSubgraphBecomesTheReshapeTarget) {
  Model m = with_input();
  constant(m, "zero", i64({}, {0}), "int64");
  constant(m, "axes", i64({1}, {0}), "int64");
  constant(m, "minus_one", i64({1}, {-1}), "int64");
  m.graph.nodes = {node("Shape", {"x"}, {"s"}), node("Gather", {"s", "zero"}, {"n"}),
                   node("Unsqueeze", {"n", "axes"}, {"n1"}),
                   node("Concat", {"n1", "minus_one"}, {"target"}, {{"axis", ints({0})}}),
                   node("Reshape", {"x", "target"}, {"y"})};
  m.graph.outputs = {"y"};
  for (auto [t, s] : {std::pair<const char*, std::vector<int64_t>>{"s", {4}},
                      {"n", {}},
                      {"n1", {1}},
                      {"target", {2}},
                      {"y", {2, 128}}}) {
    m.graph.shapes[t] = s;
    m.graph.types[t] = std::string(t) == "y" ? "float32" : "int64";
  }
  fold_constants(m);
  EXPECT_EQ(ops(m), std::vector<std::string>{"Reshape"});
  ASSERT_TRUE(m.constants.count("target"));
  EXPECT_EQ(m.constants["target"].i64, (std::vector<int64_t>{2, -1}));
  EXPECT_EQ(m.constants["target"].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(m.constants["s"].i64, (std::vector<int64_t>{2, 8, 4, 4}));
  EXPECT_TRUE(m.graph.constants.count("target"));
  EXPECT_EQ(m.graph.values["target"], (std::vector<double>{2, -1}));
}

// Slice at opset 13 (inputs, a negative start, INT64_MAX as the end, a step of 2) and at opset 9
// (attributes).
TEST(FoldConstants, SliceReadsInputsFromOpset10AndAttributesBefore) {
  Model m = with_input();
  constant(m, "v", i64({6}, {10, 11, 12, 13, 14, 15}), "int64");
  constant(m, "starts", i64({1}, {-5}), "int64");
  constant(m, "ends", i64({1}, {INT64_MAX}), "int64");
  constant(m, "axes", i64({1}, {0}), "int64");
  constant(m, "steps", i64({1}, {2}), "int64");
  m.graph.nodes = {node("Slice", {"v", "starts", "ends", "axes", "steps"}, {"a"})};
  m.graph.types["a"] = "int64";
  fold_constants(m);
  EXPECT_TRUE(m.graph.nodes.empty());
  EXPECT_EQ(m.constants["a"].i64, (std::vector<int64_t>{11, 13, 15}));

  m.graph.opset = 9;
  m.graph.nodes = {node("Slice", {"v"}, {"b"},
                        {{"starts", ints({1})}, {"ends", ints({-1})}, {"axes", ints({0})}})};
  m.graph.types["b"] = "int64";
  fold_constants(m);
  EXPECT_EQ(m.constants["b"].i64, (std::vector<int64_t>{11, 12, 13, 14}));
  // Backwards: starts -1, ends -7 (past the front), step -2.
  m.graph.opset = 13;
  constant(m, "back_starts", i64({1}, {-1}), "int64");
  constant(m, "back_ends", i64({1}, {-7}), "int64");
  constant(m, "back_steps", i64({1}, {-2}), "int64");
  m.graph.nodes = {node("Slice", {"v", "back_starts", "back_ends", "axes", "back_steps"}, {"c"})};
  m.graph.types["c"] = "int64";
  fold_constants(m);
  EXPECT_EQ(m.constants["c"].i64, (std::vector<int64_t>{15, 13, 11}));
}

// ConstantOfShape, Range, Equal + Where, Expand, Cast, an integer Div (truncated) and a float one.
TEST(FoldConstants, ArithmeticOnConstants) {
  Model m = with_input();
  constant(m, "shape", i64({2}, {2, 3}), "int64");
  constant(m, "start", i64({}, {1}), "int64");
  constant(m, "limit", i64({}, {8}), "int64");
  constant(m, "delta", i64({}, {3}), "int64");
  constant(m, "seven", i64({1}, {-7}), "int64");
  constant(m, "two", i64({1}, {2}), "int64");
  Attribute fill;
  fill.tensor = ConstantValue{{1}, {2.5f}, {}};
  m.graph.nodes = {
      node("ConstantOfShape", {"shape"}, {"filled"}, {{"value", fill}}),
      node("Range", {"start", "limit", "delta"}, {"range"}),
      node("Equal", {"range", "start"}, {"is_one"}),
      node("Where", {"is_one", "limit", "range"}, {"picked"}),
      node("Expand", {"two", "shape"}, {"expanded"}),
      node("Cast", {"range"}, {"as_float"}, {{"to", ints({1})}}),
      node("Div", {"seven", "two"}, {"int_div"}),
      node("Div", {"as_float", "two"}, {"float_div"}),
  };
  for (const char* t : {"range", "picked", "expanded", "int_div"}) m.graph.types[t] = "int64";
  for (const char* t : {"filled", "as_float", "float_div"}) m.graph.types[t] = "float32";
  m.graph.types["is_one"] = "bool";
  fold_constants(m);
  EXPECT_TRUE(m.graph.nodes.empty()) << m.graph.nodes.size() << " nodes left";
  EXPECT_EQ(m.constants["filled"].f32, std::vector<float>(6, 2.5f));
  EXPECT_EQ(m.constants["filled"].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.constants["range"].i64, (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(m.constants["is_one"].i64, (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(m.constants["picked"].i64, (std::vector<int64_t>{8, 4, 7}));
  EXPECT_EQ(m.constants["expanded"].i64, std::vector<int64_t>(6, 2));
  EXPECT_EQ(m.constants["expanded"].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.constants["int_div"].i64, (std::vector<int64_t>{-3}));
  EXPECT_EQ(m.constants["float_div"].f32, (std::vector<float>{0.5f, 2.0f, 3.5f}));
}

// A node reading an activation stays; so does a graph output, and a node of a form the evaluator
// does not compute (Gather of an index out of range).
TEST(FoldConstants, LeavesActivationsOutputsAndBadForms) {
  Model m = with_input();
  constant(m, "v", i64({2}, {3, 4}), "int64");
  constant(m, "nine", i64({}, {9}), "int64");
  m.graph.nodes = {node("Relu", {"x"}, {"r"}), node("Gather", {"v", "nine"}, {"g"}),
                   node("Neg", {"v"}, {"out"})};
  m.graph.outputs = {"r", "out"};
  fold_constants(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"Relu", "Gather", "Neg"}));
}

// Constant nodes go (their values are already read); Identity, a Dropout whose mask nobody reads
// and a Cast to the same type are bypassed; an Identity producing a graph output stays.
TEST(RemoveIdentities, ReadersReadTheInput) {
  Model m = with_input();
  constant(m, "c", i64({1}, {1}), "int64");
  Node c = node("Constant", {}, {"c"});
  m.graph.types["d"] = m.graph.types["cast"] = "float32";
  m.graph.nodes = {c,
                   node("Identity", {"x"}, {"i"}),
                   node("Dropout", {"i"}, {"d", "mask"}),
                   node("Cast", {"d"}, {"cast"}, {{"to", ints({1})}}),
                   node("Relu", {"cast"}, {"r"}),
                   node("Identity", {"r"}, {"out"})};
  m.graph.outputs = {"out"};
  fold_constants(m);
  remove_identities(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"Relu", "Identity"}));
  EXPECT_EQ(m.graph.nodes[0].inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(m.graph.nodes[1].inputs, std::vector<std::string>{"r"});
}

// A Cast to the same type that produces a graph output becomes an Identity (a view in a model
// build), its attributes gone.
TEST(RemoveIdentities, ACastToTheSameTypeGivingAnOutputBecomesAnIdentity) {
  Model m = with_input();
  m.graph.types["cast"] = "float32";
  m.graph.nodes = {node("Cast", {"x"}, {"cast"}, {{"to", ints({1})}})};
  m.graph.outputs = {"cast"};
  remove_identities(m);
  ASSERT_EQ(ops(m), (std::vector<std::string>{"Identity"}));
  EXPECT_TRUE(m.graph.nodes[0].attrs.empty());
  EXPECT_EQ(m.graph.nodes[0].inputs, std::vector<std::string>{"x"});
}

TEST(RemoveIdentities, DropoutInTrainingModeOrWithItsMaskReadStays) {
  Model m = with_input();
  constant(m, "on", i64({}, {1}), "bool");
  m.graph.values["on"] = {1};
  m.graph.nodes = {node("Dropout", {"x", "", "on"}, {"d"}), node("Dropout", {"d"}, {"e", "mask"}),
                   node("Add", {"e", "mask"}, {"out"})};
  m.graph.outputs = {"out"};
  remove_identities(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"Dropout", "Dropout", "Add"}));
}

TEST(RemoveDeadNodes, KeepsOnlyWhatAnOutputNeeds) {
  Model m = with_input();
  m.graph.nodes = {node("Shape", {"x"}, {"s"}), node("Relu", {"x"}, {"r"}),
                   node("Sigmoid", {"r"}, {"unused"}), node("Neg", {"r"}, {"out"})};
  m.graph.outputs = {"out"};
  remove_dead_nodes(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"Relu", "Neg"}));
}

// An If on a condition that folding decides (Equal of a shape value and 2) becomes its then
// branch, its output renamed to the If's; a branch that passes an outer tensor on gets an
// Identity, which remove_identities drops.
TEST(InlineConstantIf, TheBranchTakenReplacesTheIf) {
  Model m = with_input();
  constant(m, "zero", i64({}, {0}), "int64");
  constant(m, "two", i64({}, {2}), "int64");
  Node cond_if = node("If", {"cond"}, {"y"});
  cond_if.branches = {Branch{"then_branch", {node("Relu", {"x"}, {"then_y"})}, {"then_y"}},
                      Branch{"else_branch", {node("Sigmoid", {"x"}, {"else_y"})}, {"else_y"}}};
  m.graph.nodes = {node("Shape", {"x"}, {"s"}), node("Gather", {"s", "zero"}, {"batch"}),
                   node("Equal", {"batch", "two"}, {"cond"}), cond_if, node("Neg", {"y"}, {"out"})};
  m.graph.types["s"] = m.graph.types["batch"] = "int64";
  m.graph.types["cond"] = "bool";
  m.graph.outputs = {"out"};
  simplify_graph(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"Relu", "Neg"}));
  EXPECT_EQ(m.graph.nodes[0].outputs, std::vector<std::string>{"y"});

  Model pass = with_input();
  constant(pass, "no", i64({}, {0}), "bool");
  Node if_node = node("If", {"no"}, {"y"});
  if_node.branches = {Branch{"then_branch", {node("Relu", {"x"}, {"t"})}, {"t"}},
                      Branch{"else_branch", {}, {"x"}}};
  pass.graph.nodes = {if_node, node("Neg", {"y"}, {"out"})};
  pass.graph.outputs = {"out"};
  simplify_graph(pass);
  EXPECT_EQ(ops(pass), std::vector<std::string>{"Neg"});
  EXPECT_EQ(pass.graph.nodes[0].inputs, std::vector<std::string>{"x"});
}

// A 1-D conv (stride 2, padding 1 and 2) and max pool become 2-D ones on [N, C, 1, L] between
// an Unsqueeze and a Squeeze; the weights gain a row axis, the padding lies on the columns.
TEST(Lift1dWindows, ConvAndPoolBecome2dOnOneRow) {
  Model m = with_input();
  m.graph.inputs = {"a"};
  m.graph.shapes["a"] = {1, 4, 10};
  ConstantValue w{{8, 4, 3}, std::vector<float>(96, 0.5f), {}};
  m.constants["w"] = w;
  m.graph.constants.insert("w");
  m.graph.shapes["w"] = {8, 4, 3};
  m.graph.shapes["c"] = {1, 8, 6};
  m.graph.shapes["p"] = {1, 8, 3};
  m.graph.nodes = {
      node("Conv", {"a", "w"}, {"c"}, {{"strides", ints({2})}, {"pads", ints({1, 2})}}),
      node("MaxPool", {"c"}, {"p"}, {{"kernel_shape", ints({2})}, {"strides", ints({2})}})};
  m.graph.outputs = {"p"};
  lift_1d_windows(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"Unsqueeze", "Conv", "Squeeze", "Unsqueeze",
                                              "MaxPool", "Squeeze"}));
  const Node& conv = m.graph.nodes[1];
  EXPECT_EQ(conv.inputs, (std::vector<std::string>{"a@2d", "w@2d"}));
  EXPECT_EQ(conv.ints("kernel_shape"), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(conv.ints("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(conv.ints("pads"), (std::vector<int64_t>{0, 1, 0, 2}));
  EXPECT_EQ(m.constants["w@2d"].shape, (std::vector<int64_t>{8, 4, 1, 3}));
  EXPECT_EQ(m.graph.shapes["c@2d"], (std::vector<int64_t>{1, 8, 1, 6}));
  EXPECT_EQ(m.graph.nodes[2].outputs, std::vector<std::string>{"c"});
  EXPECT_EQ(m.graph.nodes[4].ints("kernel_shape"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(m.graph.nodes[4].ints("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(m.graph.shapes["p@2d"], (std::vector<int64_t>{1, 8, 1, 3}));
}

// Reference loops: ONNX ConvTranspose (groups, dilations), and the three nodes the pass
// writes (Conv with pads, DepthToSpace in either mode, Slice on axes 2 and 3), all on NCHW
// float32.
using Tensor = std::vector<float>;

Tensor conv_transpose_ref(const Tensor& x, const std::vector<int64_t>& xs, const ConstantValue& w,
                          std::vector<int64_t> strides, const std::vector<int64_t>& pads,
                          const std::vector<int64_t>& ys, int64_t group = 1,
                          const std::vector<int64_t>& dilations = {1, 1}) {
  const int64_t C = xs[1], Kg = w.shape[1], kh = w.shape[2], kw = w.shape[3], Cg = C / group;
  Tensor y(static_cast<size_t>(ys[0] * ys[1] * ys[2] * ys[3]), 0.0f);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < xs[2]; ++i)
      for (int64_t j = 0; j < xs[3]; ++j)
        for (int64_t kg = 0; kg < Kg; ++kg)
          for (int64_t a = 0; a < kh; ++a)
            for (int64_t b = 0; b < kw; ++b) {
              const int64_t oh = i * strides[0] + a * dilations[0] - pads[0],
                            ow = j * strides[1] + b * dilations[1] - pads[1];
              if (oh < 0 || ow < 0 || oh >= ys[2] || ow >= ys[3]) continue;
              const int64_t k = (c / Cg) * Kg + kg;
              y[static_cast<size_t>((k * ys[2] + oh) * ys[3] + ow)] +=
                  x[static_cast<size_t>((c * xs[2] + i) * xs[3] + j)] *
                  w.f32[static_cast<size_t>(((c * Kg + kg) * kh + a) * kw + b)];
            }
  return y;
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A float32 graph from input x to output y, opset 13, no node yet.
Model x_to_y(const std::vector<int64_t>& xs, const std::vector<int64_t>& ys) {
  Model m;
  m.graph.opset = 13;
  m.graph.inputs = {"x"};
  m.graph.outputs = {"y"};
  m.graph.shapes["x"] = xs;
  m.graph.shapes["y"] = ys;
  m.graph.types["x"] = m.graph.types["y"] = "float32";
  return m;
}

Tensor run_rewritten(const Model& m, const Tensor& x) {
  std::map<std::string, Tensor> t{{"x", x}};
  for (const Node& n : m.graph.nodes) {
    // The activation operand: the first input, or the last after a constant (an Add's bias).
    const std::string& x_in = m.constants.count(n.inputs[0]) ? n.inputs.back() : n.inputs[0];
    const std::vector<int64_t> in = *m.graph.shape(x_in);
    const std::vector<int64_t> out = *m.graph.shape(n.outputs[0]);
    const Tensor& a = t.at(x_in);
    Tensor o(static_cast<size_t>(elements(out)), NAN);
    if (n.op == "Conv") {
      const ConstantValue& w = m.constants.at(n.inputs[1]);
      const std::vector<int64_t> p = n.ints("pads");
      const int64_t group = n.int_or("group", 1), Cg = in[1] / group, Kg = out[1] / group;
      for (int64_t k = 0; k < out[1]; ++k)
        for (int64_t i = 0; i < out[2]; ++i)
          for (int64_t j = 0; j < out[3]; ++j) {
            float sum = 0;
            for (int64_t cg = 0; cg < Cg; ++cg)
              for (int64_t r = 0; r < w.shape[2]; ++r)
                for (int64_t q = 0; q < w.shape[3]; ++q) {
                  const int64_t h = i + r - p[0], v = j + q - p[1], c = (k / Kg) * Cg + cg;
                  if (h >= 0 && v >= 0 && h < in[2] && v < in[3])
                    sum += a[static_cast<size_t>((c * in[2] + h) * in[3] + v)] *
                           w.f32[static_cast<size_t>(((k * Cg + cg) * w.shape[2] + r) * w.shape[3] +
                                                     q)];
                }
            o[static_cast<size_t>((k * out[2] + i) * out[3] + j)] = sum;
          }
    } else if (n.op == "Reshape") {
      o = a;
    } else if (n.op == "Transpose") {
      // Output element (d0, .., d5) is input element at the axes perm names.
      const std::vector<int64_t> perm = n.ints("perm");
      std::vector<int64_t> in_stride(in.size(), 1);
      for (size_t d = in.size() - 1; d > 0; --d) in_stride[d - 1] = in_stride[d] * in[d];
      for (int64_t e = 0; e < elements(out); ++e) {
        int64_t rest = e, from = 0;
        for (size_t d = out.size(); d-- > 0;) {
          from += (rest % out[d]) * in_stride[static_cast<size_t>(perm[d])];
          rest /= out[d];
        }
        o[static_cast<size_t>(e)] = a[static_cast<size_t>(from)];
      }
    } else if (n.op == "DepthToSpace") {
      // Input channel c holds output channel k at phase (rh, rw): c = k*s*s + rh*s + rw (CRD) or
      // (rh*s + rw)*K + k (DCR).
      const int64_t s = n.ints("blocksize")[0], K = out[1];
      const bool crd = n.text_or("mode", "DCR") == "CRD";
      for (int64_t c = 0; c < in[1]; ++c)
        for (int64_t i = 0; i < in[2]; ++i)
          for (int64_t j = 0; j < in[3]; ++j) {
            const int64_t k = crd ? c / (s * s) : c % K, phase = crd ? c % (s * s) : c / K;
            o[static_cast<size_t>((k * out[2] + i * s + phase / s) * out[3] + j * s + phase % s)] =
                a[static_cast<size_t>((c * in[2] + i) * in[3] + j)];
          }
    } else if (n.op == "BatchNormalization") {
      const auto param = [&](size_t k, int64_t c) {
        return m.constants.at(n.inputs[k]).f32.at(static_cast<size_t>(c));
      };
      const int64_t plane = out[2] * out[3];
      for (int64_t c = 0; c < out[1]; ++c)
        for (int64_t i = 0; i < plane; ++i)
          o[static_cast<size_t>(c * plane + i)] =
              param(1, c) * (a[static_cast<size_t>(c * plane + i)] - param(3, c)) /
                  std::sqrt(param(4, c) + 1e-5f) +
              param(2, c);
    } else if (n.op == "Add") {
      // A per-channel constant first, then the activation.
      const std::vector<float>& shift = m.constants.at(n.inputs[0]).f32;
      const int64_t plane = out[2] * out[3];
      for (int64_t c = 0; c < out[1]; ++c)
        for (int64_t i = 0; i < plane; ++i)
          o[static_cast<size_t>(c * plane + i)] =
              a[static_cast<size_t>(c * plane + i)] + shift[static_cast<size_t>(c)];
    } else if (n.op == "Relu") {
      for (size_t i = 0; i < o.size(); ++i) o[i] = std::max(a[i], 0.0f);
    } else {
      EXPECT_EQ(n.op, "Slice");
      const std::vector<int64_t> starts = m.constants.at(n.inputs[1]).i64;
      for (int64_t c = 0; c < out[1]; ++c)
        for (int64_t i = 0; i < out[2]; ++i)
          for (int64_t j = 0; j < out[3]; ++j)
            o[static_cast<size_t>((c * out[2] + i) * out[3] + j)] =
                a[static_cast<size_t>((c * in[2] + i + starts[0]) * in[3] + j + starts[1])];
    }
    t[n.outputs[0]] = std::move(o);
  }
  return t.at(m.graph.outputs[0]);
}

// Transposed convs as decoders write them: torch's k=4 s=2 p=1, k=3 s=2 p=1 output_padding=1,
// a U-Net's k=2 s=2 and a k=5 s=3 with uneven pads. Each becomes Conv -> DepthToSpace [-> Slice]
// whose output equals the transposed conv's on a random input.
TEST(ConvTransposeAsConv, EveryPhaseAndCropMatchesTheTransposedConv) {
  struct Case {
    int64_t k, s;
    std::vector<int64_t> pads, output_padding;
    size_t nodes;
  };
  for (const Case& c : {Case{4, 2, {1, 1, 1, 1}, {0, 0}, 3}, Case{3, 2, {1, 1, 1, 1}, {1, 1}, 3},
                        Case{2, 2, {0, 0, 0, 0}, {0, 0}, 2}, Case{5, 3, {2, 0, 1, 3}, {1, 2}, 3}}) {
    SCOPED_TRACE("k " + std::to_string(c.k) + " s " + std::to_string(c.s));
    const std::vector<int64_t> xs = {1, 3, 5, 4};
    const int64_t K = 2;
    std::vector<int64_t> ys = {1, K, 0, 0};
    for (int a = 0; a < 2; ++a)
      ys[2 + a] = c.s * (xs[2 + a] - 1) + c.output_padding[a] + c.k - c.pads[a] - c.pads[a + 2];
    Model m = x_to_y(xs, ys);
    ConstantValue w{{xs[1], K, c.k, c.k}, {}, {}};
    for (int64_t i = 0; i < xs[1] * K * c.k * c.k; ++i)
      w.f32.push_back(static_cast<float>((i * 37 % 23) - 11) / 8.0f);
    const ConstantValue weights = w;
    constant(m, "w", std::move(w), "float32");
    m.graph.nodes = {node("ConvTranspose", {"x", "w"}, {"y"},
                          {{"strides", ints({c.s, c.s})},
                           {"pads", ints(c.pads)},
                           {"output_padding", ints(c.output_padding)}})};
    conv_transpose_as_conv(m);
    ASSERT_EQ(m.graph.nodes.size(), c.nodes);
    EXPECT_EQ(m.graph.nodes[0].op, "Conv");
    EXPECT_EQ(m.graph.nodes[0].ints("kernel_shape"),
              (std::vector<int64_t>{(c.k + c.s - 1) / c.s, (c.k + c.s - 1) / c.s}));
    Tensor x;
    for (int64_t i = 0; i < xs[1] * xs[2] * xs[3]; ++i)
      x.push_back(static_cast<float>((i * 13 % 17) - 8) / 4.0f);
    const Tensor want = conv_transpose_ref(x, xs, weights, {c.s, c.s}, c.pads, ys);
    const Tensor got = run_rewritten(m, x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
  }
}

// Groups and per-axis strides: a grouped transposed conv (2 groups, and depthwise as bilinear
// upsampling layers are initialised), strides 2x1 and 1x4 (a 1-D transposed conv lifted). Each
// becomes a Conv of the same groups, Reshape, Transpose, Reshape [-> Slice], whose output equals
// the transposed conv's.
TEST(ConvTransposeAsConv, GroupsAndPerAxisStridesMatchTheTransposedConv) {
  struct Case {
    int64_t group, kh, kw, sh, sw;
    std::vector<int64_t> pads, output_padding;
  };
  for (const Case& c :
       {Case{2, 4, 4, 2, 2, {1, 1, 1, 1}, {0, 0}}, Case{4, 2, 2, 2, 2, {0, 0, 0, 0}, {0, 0}},
        Case{1, 3, 3, 2, 1, {1, 1, 1, 1}, {1, 0}}, Case{2, 1, 8, 1, 4, {0, 2, 0, 2}, {0, 1}}}) {
    SCOPED_TRACE("group " + std::to_string(c.group) + " strides " + std::to_string(c.sh) + "x" +
                 std::to_string(c.sw));
    const std::vector<int64_t> xs = {1, 4, 3, 5};
    const int64_t Kg = c.group == 4 ? 1 : 3, K = Kg * c.group;
    std::vector<int64_t> ys = {1, K, 0, 0};
    const int64_t k[2] = {c.kh, c.kw}, st[2] = {c.sh, c.sw};
    for (int a = 0; a < 2; ++a)
      ys[2 + a] = st[a] * (xs[2 + a] - 1) + c.output_padding[a] + k[a] - c.pads[a] - c.pads[a + 2];
    Model m = x_to_y(xs, ys);
    ConstantValue w{{xs[1], Kg, c.kh, c.kw}, {}, {}};
    for (int64_t i = 0; i < elements(w.shape); ++i)
      w.f32.push_back(static_cast<float>((i * 37 % 23) - 11) / 8.0f);
    const ConstantValue weights = w;
    constant(m, "w", std::move(w), "float32");
    m.graph.nodes = {node("ConvTranspose", {"x", "w"}, {"y"},
                          {{"group", ints({c.group})},
                           {"strides", ints({c.sh, c.sw})},
                           {"pads", ints(c.pads)},
                           {"output_padding", ints(c.output_padding)}})};
    conv_transpose_as_conv(m);
    ASSERT_GE(m.graph.nodes.size(), 4u);
    EXPECT_EQ(m.graph.nodes[0].op, "Conv");
    EXPECT_EQ(m.graph.nodes[0].int_or("group", 1), c.group);
    EXPECT_EQ(m.graph.nodes[2].op, "Transpose");
    Tensor x;
    for (int64_t i = 0; i < elements(xs); ++i)
      x.push_back(static_cast<float>((i * 13 % 17) - 8) / 4.0f);
    const Tensor want = conv_transpose_ref(x, xs, weights, {c.sh, c.sw}, c.pads, ys, c.group);
    const Tensor got = run_rewritten(m, x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
  }
}

// A decoder's ConvTranspose -> BatchNormalization -> Relu: both move above the DepthToSpace, the
// BN's parameters repeated per phase, and the rewritten graph computes the same values. A BN whose
// input another node reads too stays below it.
TEST(HoistOverDepthToSpace, TransposedConvsBatchNormAndReluMoveOntoThePhaseConv) {
  for (const bool shared : {false, true}) {
    const std::vector<int64_t> xs = {1, 3, 4, 5}, ys = {1, 2, 8, 10};
    Model m;
    m.graph.opset = 13;
    m.graph.inputs = {"x"};
    m.graph.outputs = shared ? std::vector<std::string>{"y", "t"} : std::vector<std::string>{"y"};
    for (const char* t : {"x", "t", "b", "y"}) m.graph.types[t] = "float32";
    m.graph.shapes["x"] = xs;
    m.graph.shapes["t"] = m.graph.shapes["b"] = m.graph.shapes["y"] = ys;
    ConstantValue w{{3, 2, 2, 2}, {}, {}};
    for (int64_t i = 0; i < 24; ++i) w.f32.push_back(static_cast<float>((i * 37 % 23) - 11) / 8.0f);
    constant(m, "w", std::move(w), "float32");
    constant(m, "scale", ConstantValue{{2}, {1.5f, -0.5f}, {}}, "float32");
    constant(m, "bias", ConstantValue{{2}, {0.25f, -1.0f}, {}}, "float32");
    constant(m, "mean", ConstantValue{{2}, {0.5f, -0.125f}, {}}, "float32");
    constant(m, "var", ConstantValue{{2}, {2.0f, 0.75f}, {}}, "float32");
    constant(m, "shift", ConstantValue{{1, 2, 1, 1}, {-0.75f, 0.5f}, {}}, "float32");
    m.graph.shapes["a"] = ys;
    m.graph.types["a"] = "float32";
    m.graph.nodes = {node("ConvTranspose", {"x", "w"}, {"t"}, {{"strides", ints({2, 2})}}),
                     node("Add", {"shift", "t"}, {"a"}),
                     node("BatchNormalization", {"a", "scale", "bias", "mean", "var"}, {"b"}),
                     node("Relu", {"b"}, {"y"})};
    Tensor x;
    for (int64_t i = 0; i < 60; ++i) x.push_back(static_cast<float>((i * 13 % 17) - 8) / 4.0f);
    Model before = m;
    conv_transpose_as_conv(before);
    const Tensor want = run_rewritten(before, x);
    conv_transpose_as_conv(m);
    hoist_over_depth_to_space(m);
    if (shared) {
      EXPECT_EQ(ops(m), ops(before));
      continue;
    }
    EXPECT_EQ(ops(m), (std::vector<std::string>{"Conv", "Add", "BatchNormalization", "Relu",
                                                "DepthToSpace"}));
    EXPECT_EQ(m.graph.nodes[1].inputs[1], m.graph.nodes[0].outputs[0]);
    EXPECT_EQ(m.constants.at(m.graph.nodes[1].inputs[0]).shape, (std::vector<int64_t>{1, 8, 1, 1}));
    EXPECT_EQ(m.constants.at(m.graph.nodes[2].inputs[1]).f32,
              (std::vector<float>{1.5f, -0.5f, 1.5f, -0.5f, 1.5f, -0.5f, 1.5f, -0.5f}));
    EXPECT_EQ(m.graph.nodes[4].outputs[0], "y");
    const Tensor got = run_rewritten(m, x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  }
}

// The pads a ConvTranspose does not spell: tf2onnx's output_shape (the odd unit of padding at the
// start), auto_pad SAME_UPPER (at the end) and SAME_LOWER, VALID, and dilations. Each is rewritten
// and computes the transposed conv of the pads ONNX's total_padding implies (checked by hand
// below), on a random input.
TEST(ConvTransposeAsConv, OutputShapeAutoPadAndDilationsMatchTheTransposedConv) {
  struct Case {
    int64_t k, s, d;
    std::vector<int64_t> ys, pads;  // the output, and the pads that give it
    std::map<std::string, Attribute> attrs;
  };
  const std::vector<int64_t> xs = {1, 3, 5, 4};
  auto text = [](const char* v) { return Attribute{{}, {}, v, {}}; };
  const Attribute d2 = ints({2, 2}), d3 = ints({3, 3}), same_upper = text("SAME_UPPER");
  // k 3 s 2 over 5 x 4: 2*(in-1) + 3 = 11 x 9 before padding.
  const std::vector<Case> cases = {
      {3, 2, 1, {1, 2, 10, 8}, {1, 1, 0, 0}, {{"output_shape", ints({10, 8})}}},
      {3, 2, 1, {1, 2, 10, 8}, {0, 0, 1, 1}, {{"auto_pad", text("SAME_UPPER")}}},
      {3, 2, 1, {1, 2, 10, 8}, {1, 1, 0, 0}, {{"auto_pad", text("SAME_LOWER")}}},
      {3, 2, 1, {1, 2, 11, 9}, {0, 0, 0, 0}, {{"auto_pad", text("VALID")}}},
      {3, 2, 1, {1, 2, 9, 7}, {1, 1, 1, 1}, {{"output_shape", ints({1, 2, 9, 7})}}},
      {3, 2, 2, {1, 2, 11, 9}, {1, 1, 1, 1}, {{"dilations", d2}, {"pads", ints({1, 1, 1, 1})}}},
      {2, 1, 3, {1, 2, 5, 4}, {1, 1, 2, 2}, {{"dilations", d3}, {"auto_pad", same_upper}}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.attrs.begin()->first + " k " + std::to_string(c.k) + " d " +
                 std::to_string(c.d));
    Model m = x_to_y(xs, c.ys);
    ConstantValue w{{xs[1], 2, c.k, c.k}, {}, {}};
    for (int64_t i = 0; i < elements(w.shape); ++i)
      w.f32.push_back(static_cast<float>((i * 37 % 23) - 11) / 8.0f);
    const ConstantValue weights = w;
    constant(m, "w", std::move(w), "float32");
    std::map<std::string, Attribute> attrs = c.attrs;
    attrs["strides"] = ints({c.s, c.s});
    m.graph.nodes = {node("ConvTranspose", {"x", "w"}, {"y"}, attrs)};
    conv_transpose_as_conv(m);
    ASSERT_EQ(m.graph.nodes.front().op, "Conv");
    Tensor x;
    for (int64_t i = 0; i < elements(xs); ++i)
      x.push_back(static_cast<float>((i * 13 % 17) - 8) / 4.0f);
    const Tensor want = conv_transpose_ref(x, xs, weights, {c.s, c.s}, c.pads, c.ys, 1, {c.d, c.d});
    const Tensor got = run_rewritten(m, x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
  }
}

// Not rewritten: an output_shape past what the inputs reach (a negative total padding), a
// 3-D transposed conv.
TEST(ConvTransposeAsConv, LeavesWhatOneConvCannotExpress) {
  Model m = with_input();
  constant(m, "w", ConstantValue{{8, 4, 2, 2}, std::vector<float>(128, 1.0f), {}}, "float32");
  m.graph.nodes = {node("ConvTranspose", {"x", "w"}, {"y"},
                        {{"strides", ints({2, 2})}, {"output_shape", ints({10, 10})}})};
  m.graph.outputs = {"y"};
  m.graph.shapes["y"] = {2, 4, 10, 10};
  conv_transpose_as_conv(m);
  EXPECT_EQ(ops(m), std::vector<std::string>{"ConvTranspose"});

  Model m3 = with_input();
  m3.graph.shapes["x"] = {1, 8, 2, 2, 2};
  constant(m3, "w", ConstantValue{{8, 1, 2, 2, 2}, std::vector<float>(64, 1.0f), {}}, "float32");
  m3.graph.nodes = {node("ConvTranspose", {"x", "w"}, {"y"}, {{"strides", ints({2, 2, 2})}})};
  m3.graph.outputs = {"y"};
  m3.graph.shapes["y"] = {1, 1, 4, 4, 4};
  conv_transpose_as_conv(m3);
  EXPECT_EQ(ops(m3), std::vector<std::string>{"ConvTranspose"});
}

// Two lifted 1-D convs with a bias Add ([C, 1], as tf2onnx writes it) and a LeakyRelu between
// them: the Squeeze sinks below both, the second conv's Unsqueeze goes, and the Add reads a [C, 1,
// 1] copy of the bias, so conv -> Add -> LeakyRelu -> conv is 4-D throughout.
TEST(SinkSqueezes, LiftedConvsReadEachOthersRows) {
  Model m;
  m.graph.opset = 13;
  m.graph.inputs = {"a"};
  m.graph.shapes["a"] = {1, 4, 10};
  m.graph.types["a"] = "float32";
  constant(m, "w1", ConstantValue{{8, 4, 3}, std::vector<float>(96, 0.5f), {}}, "float32");
  constant(m, "w2", ConstantValue{{8, 8, 1}, std::vector<float>(64, 0.5f), {}}, "float32");
  constant(m, "bias", ConstantValue{{8, 1}, std::vector<float>(8, 1.0f), {}}, "float32");
  m.graph.nodes = {node("Conv", {"a", "w1"}, {"c1"}, {{"pads", ints({1, 1})}}),
                   node("Add", {"c1", "bias"}, {"b1"}), node("LeakyRelu", {"b1"}, {"r1"}),
                   node("Conv", {"r1", "w2"}, {"c2"})};
  m.graph.outputs = {"c2"};
  for (const char* t : {"c1", "b1", "r1", "c2"}) {
    m.graph.shapes[t] = {1, 8, 10};
    m.graph.types[t] = "float32";
  }
  lift_1d_windows(m);
  sink_squeezes(m);
  EXPECT_EQ(ops(m),
            (std::vector<std::string>{"Unsqueeze", "Conv", "Add", "LeakyRelu", "Conv", "Squeeze"}));
  const Graph& g = m.graph;
  EXPECT_EQ(g.nodes[2].inputs[0], g.nodes[1].outputs[0]);
  EXPECT_EQ(m.constants.at(g.nodes[2].inputs[1]).shape, (std::vector<int64_t>{8, 1, 1}));
  EXPECT_EQ(g.shapes.at(g.nodes[3].outputs[0]), (std::vector<int64_t>{1, 8, 1, 10}));
  EXPECT_EQ(g.nodes[4].inputs[0], g.nodes[3].outputs[0]);
  EXPECT_EQ(g.nodes[5].outputs, std::vector<std::string>{"c2"});
}

// A Squeeze whose reader is not elementwise (a Softmax) stays where it is.
TEST(SinkSqueezes, StopsAtOtherReaders) {
  Model m;
  m.graph.opset = 11;
  m.graph.inputs = {"a"};
  m.graph.shapes["a"] = {1, 4, 1, 10};
  m.graph.types["a"] = "float32";
  m.graph.nodes = {node("Squeeze", {"a"}, {"s"}, {{"axes", ints({2})}}),
                   node("Softmax", {"s"}, {"y"})};
  m.graph.shapes["s"] = m.graph.shapes["y"] = {1, 4, 10};
  m.graph.outputs = {"y"};
  sink_squeezes(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"Squeeze", "Softmax"}));
}

// Global pooling as tf2onnx and paddle2onnx write it: a ReduceMean over H and W keeping them is
// a GlobalAveragePool; a ReduceMax over [-1, -2] (opset 18: the axes an input) dropping them is
// a GlobalMaxPool and a Flatten. A mean over the channels, or over H alone, stays a reduction.
TEST(ReduceAsGlobalPool, SpatialReductionsBecomeGlobalPools) {
  Model m = with_input();
  m.graph.opset = 18;
  constant(m, "hw", i64({2}, {-1, -2}), "int64");
  m.graph.values["hw"] = {-1, -2};
  m.graph.nodes = {node("ReduceMean", {"x"}, {"mean"}, {{"axes", ints({2, 3})}}),
                   node("ReduceMax", {"x", "hw"}, {"max"}, {{"keepdims", ints({0})}}),
                   node("ReduceMean", {"x"}, {"channels"}, {{"axes", ints({1})}}),
                   node("ReduceMean", {"x"}, {"rows"}, {{"axes", ints({2})}})};
  m.graph.outputs = {"mean", "max", "channels", "rows"};
  m.graph.shapes["mean"] = {2, 8, 1, 1};
  m.graph.shapes["max"] = {2, 8};
  m.graph.shapes["channels"] = {2, 1, 4, 4};
  m.graph.shapes["rows"] = {2, 8, 1, 4};
  for (const char* t : {"mean", "max", "channels", "rows"}) m.graph.types[t] = "float32";
  reduce_as_global_pool(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"GlobalAveragePool", "GlobalMaxPool", "Flatten",
                                              "ReduceMean", "ReduceMean"}));
  const Graph& g = m.graph;
  EXPECT_EQ(g.nodes[0].inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(g.nodes[0].outputs, std::vector<std::string>{"mean"});
  EXPECT_EQ(g.nodes[1].inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(g.shapes.at(g.nodes[1].outputs[0]), (std::vector<int64_t>{2, 8, 1, 1}));
  EXPECT_EQ(g.nodes[2].inputs, g.nodes[1].outputs);
  EXPECT_EQ(g.nodes[2].int_or("axis", 0), 1);
  EXPECT_EQ(g.nodes[2].outputs, std::vector<std::string>{"max"});
}

// A 1-D global pool (Keras' GlobalAveragePooling1D after lifted convs): the mean over L of the
// row Squeeze's output pools the [N, C, 1, L] tensor before it, and the Squeeze goes; a 3-D graph
// input gets an Unsqueeze of the row, and keepdims 1 a Squeeze of the added column.
TEST(ReduceAsGlobalPool, OneDimensionalMeansPoolTheRow) {
  Model m;
  m.graph.opset = 13;
  m.graph.inputs = {"a", "b"};
  m.graph.shapes["a"] = {1, 4, 1, 10};
  m.graph.shapes["b"] = {1, 4, 10};
  m.graph.types["a"] = m.graph.types["b"] = "float32";
  m.graph.nodes = {node("Squeeze", {"a"}, {"s"}, {{"axes", ints({2})}}),
                   node("ReduceMean", {"s"}, {"y"}, {{"axes", ints({2})}, {"keepdims", ints({0})}}),
                   node("ReduceMean", {"b"}, {"z"}, {{"axes", ints({-1})}})};
  m.graph.shapes["s"] = {1, 4, 10};
  m.graph.shapes["y"] = {1, 4};
  m.graph.shapes["z"] = {1, 4, 1};
  for (const char* t : {"s", "y", "z"}) m.graph.types[t] = "float32";
  m.graph.outputs = {"y", "z"};
  reduce_as_global_pool(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"GlobalAveragePool", "Flatten", "Unsqueeze",
                                              "GlobalAveragePool", "Squeeze"}));
  const Graph& g = m.graph;
  EXPECT_EQ(g.nodes[0].inputs, std::vector<std::string>{"a"});
  EXPECT_EQ(g.nodes[1].outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(g.shapes.at(g.nodes[2].outputs[0]), (std::vector<int64_t>{1, 4, 1, 10}));
  EXPECT_EQ(g.nodes[3].inputs, g.nodes[2].outputs);
  EXPECT_EQ(g.nodes[4].ints("axes"), std::vector<int64_t>{3});
  EXPECT_EQ(g.nodes[4].outputs, std::vector<std::string>{"z"});
}

// The two ReduceMeans of a LayerNorm over [N, T, C] (paddle2onnx's transformer blocks: the
// same last axis a 1-D pool reduces) stay, and the LayerNorm is found whole.
TEST(ReduceAsGlobalPool, LeavesTheMeansOfALayerNorm) {
  Model m;
  m.graph.opset = 11;
  m.graph.inputs = {"x"};
  m.graph.shapes["x"] = {1, 6, 10};
  m.graph.types["x"] = "float32";
  constant(m, "two", ConstantValue{{}, {2}, {}}, "float32");
  constant(m, "eps", ConstantValue{{}, {1e-5f}, {}}, "float32");
  m.graph.values["two"] = {2};
  m.graph.values["eps"] = {1e-5};
  m.graph.nodes = {node("ReduceMean", {"x"}, {"mean"}, {{"axes", ints({-1})}}),
                   node("Sub", {"x", "mean"}, {"d"}),
                   node("Pow", {"d", "two"}, {"sq"}),
                   node("ReduceMean", {"sq"}, {"var"}, {{"axes", ints({-1})}}),
                   node("Add", {"var", "eps"}, {"var_eps"}),
                   node("Sqrt", {"var_eps"}, {"std"}),
                   node("Div", {"d", "std"}, {"y"})};
  for (const char* t : {"mean", "var", "var_eps", "std"}) m.graph.shapes[t] = {1, 6, 1};
  for (const char* t : {"d", "sq", "y"}) m.graph.shapes[t] = {1, 6, 10};
  for (const char* t : {"mean", "d", "sq", "var", "var_eps", "std", "y"})
    m.graph.types[t] = "float32";
  m.graph.outputs = {"y"};
  reduce_as_global_pool(m);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"ReduceMean", "Sub", "Pow", "ReduceMean", "Add",
                                              "Sqrt", "Div"}));
  ASSERT_EQ(find_layer_norms(m.graph).size(), 1u);
  EXPECT_EQ(find_layer_norms(m.graph)[0].nodes.size(), 7u);
}

// Attention's scores, q times k transposed: a MatMul reading a Transpose of k's last two axes
// becomes FusedMatMul(q, k, transB=1) and the Transpose goes; a Transpose another node reads too,
// one that moves other axes, one a graph output, and broadcast batches stay as they are.
TEST(FoldTransposeIntoMatmul, AttentionScoresReadKeysUntransposed) {
  const auto model = [](std::vector<int64_t> q_shape, std::vector<int64_t> k_shape,
                        std::vector<int64_t> perm, bool shared) {
    Model m;
    m.graph.opset = 17;
    m.graph.inputs = {"q", "k"};
    m.graph.shapes["q"] = q_shape;
    m.graph.shapes["k"] = k_shape;
    std::vector<int64_t> kt(k_shape.size());
    const auto rank = static_cast<int64_t>(k_shape.size());
    for (size_t d = 0; d < perm.size(); ++d)
      kt[d] = k_shape[static_cast<size_t>((perm[d] + rank) % rank)];
    m.graph.shapes["kt"] = kt;
    std::vector<int64_t> s = q_shape;
    s.back() = kt.back();
    m.graph.shapes["s"] = s;
    for (const char* t : {"q", "k", "kt", "s"}) m.graph.types[t] = "float32";
    m.graph.nodes = {node("Transpose", {"k"}, {"kt"}, {{"perm", ints(perm)}}),
                     node("MatMul", {"q", "kt"}, {"s"})};
    m.graph.outputs = {"s"};
    if (shared) m.graph.outputs.push_back("kt");
    return m;
  };
  Model m = model({1, 3, 197, 64}, {1, 3, 197, 64}, {0, 1, 3, 2}, false);
  fold_transpose_into_matmul(m);
  ASSERT_EQ(ops(m), std::vector<std::string>{"FusedMatMul"});
  const Node& f = m.graph.nodes[0];
  EXPECT_EQ(f.domain, "com.microsoft");
  EXPECT_EQ(f.inputs, (std::vector<std::string>{"q", "k"}));
  EXPECT_EQ(f.int_or("transB", 0), 1);
  EXPECT_EQ(f.outputs, std::vector<std::string>{"s"});

  // B a matrix ([N, K] -> read as [K, N]) under batched rows; the perm written with negative axes.
  Model matrix = model({2, 5, 8}, {6, 8}, {1, 0}, false);
  fold_transpose_into_matmul(matrix);
  EXPECT_EQ(ops(matrix), std::vector<std::string>{"FusedMatMul"});
  Model negative = model({2, 4, 8}, {2, 6, 8}, {0, -1, -2}, false);
  fold_transpose_into_matmul(negative);
  EXPECT_EQ(ops(negative), std::vector<std::string>{"FusedMatMul"});

  const std::vector<std::string> both = {"Transpose", "MatMul"};
  Model shared = model({1, 3, 197, 64}, {1, 3, 197, 64}, {0, 1, 3, 2}, true);
  fold_transpose_into_matmul(shared);
  EXPECT_EQ(ops(shared), both);
  // A perm that moves more than the last two axes.
  Model heads = model({1, 197, 3, 64}, {1, 3, 197, 64}, {0, 2, 3, 1}, false);
  fold_transpose_into_matmul(heads);
  EXPECT_EQ(ops(heads), both);
  Model broadcast = model({3, 197, 64}, {1, 3, 197, 64}, {0, 1, 3, 2}, false);
  fold_transpose_into_matmul(broadcast);
  EXPECT_EQ(ops(broadcast), both);
}

// Attention after a packed projection [1, S, 3 x H x D]: Reshape to [1, S, 3, H, D], Transpose to
// [3, 1, H, S, D], q, k and v selected by Gather (torch) or Slice + Squeeze (paddle); scores
// q k^T (FusedMatMul), the Softmax, the values, and the heads transposed back to [1, S, H, D].
// S = 5, H = 2, D = 4.
Model attention(bool paddle, bool shared_k = false, std::vector<int64_t> perm = {2, 0, 3, 1, 4}) {
  Model m;
  m.graph.opset = paddle ? 11 : 17;
  m.graph.inputs = {"qkv"};
  const std::map<std::string, std::vector<int64_t>> shapes = {
      {"qkv", {1, 5, 24}},    {"x", {1, 5, 3, 2, 4}},  {"t", {3, 1, 2, 5, 4}},
      {"q", {1, 2, 5, 4}},    {"k", {1, 2, 5, 4}},     {"v", {1, 2, 5, 4}},
      {"s", {1, 2, 5, 5}},    {"p", {1, 2, 5, 5}},     {"o", {1, 2, 5, 4}},
      {"y", {1, 5, 2, 4}},    {"q1", {1, 1, 2, 5, 4}}, {"k1", {1, 1, 2, 5, 4}},
      {"v1", {1, 1, 2, 5, 4}}};
  for (const auto& [t, shape] : shapes) {
    m.graph.shapes[t] = shape;
    m.graph.types[t] = "float32";
  }
  constant(m, "target", i64({5}, {1, 5, 3, 2, 4}), "int64");
  m.graph.nodes = {node("Reshape", {"qkv", "target"}, {"x"}),
                   node("Transpose", {"x"}, {"t"}, {{"perm", ints(perm)}})};
  const char* names[] = {"q", "k", "v"};
  for (int64_t g = 0; g < 3; ++g) {
    const std::string out = names[g];
    if (paddle) {
      // Slice's starts, ends and axes are inputs from opset 10 on.
      const std::string at = std::to_string(g);
      for (auto [name, v] : {std::pair<std::string, int64_t>{"start" + at, g},
                             {"end" + at, g + 1},
                             {"axis" + at, 0}}) {
        constant(m, name, i64({1}, {v}), "int64");
        m.graph.values[name] = {static_cast<double>(v)};
      }
      m.graph.nodes.push_back(
          node("Slice", {"t", "start" + at, "end" + at, "axis" + at}, {out + "1"}));
      m.graph.nodes.push_back(node("Squeeze", {out + "1"}, {out}, {{"axes", ints({0})}}));
    } else {
      const std::string index = "index" + std::to_string(g);
      constant(m, index, i64({}, {g}), "int64");
      m.graph.values[index] = {static_cast<double>(g)};
      m.graph.nodes.push_back(node("Gather", {"t", index}, {out}, {{"axis", ints({0})}}));
    }
  }
  Node scores = node("FusedMatMul", {"q", "k"}, {"s"}, {{"transB", ints({1})}});
  scores.domain = "com.microsoft";
  m.graph.nodes.push_back(scores);
  m.graph.nodes.push_back(node("Softmax", {"s"}, {"p"}, {{"axis", ints({-1})}}));
  m.graph.nodes.push_back(node("MatMul", {"p", "v"}, {"o"}));
  m.graph.nodes.push_back(node("Transpose", {"o"}, {"y"}, {{"perm", ints({0, 2, 1, 3})}}));
  m.graph.outputs = {"y"};
  if (shared_k) m.graph.outputs.push_back("k");
  return m;
}

// The products read q, k and v where the projection wrote them, and write the heads side by side:
// the selections and both Transposes go, for torch's Gathers and paddle's Slices alike.
TEST(ReadHeadsInPlace, ProductsReadTheProjectionAndWriteHeadsSideBySide) {
  for (bool paddle : {false, true}) {
    SCOPED_TRACE(paddle ? "paddle" : "torch");
    Model m = attention(paddle);
    read_heads_in_place(m);
    ASSERT_EQ(ops(m),
              (std::vector<std::string>{"Reshape", "HeadsMatMul", "Softmax", "HeadsMatMul"}));
    const Node& scores = m.graph.nodes[1];
    EXPECT_EQ(scores.domain, "ktune");
    EXPECT_EQ(scores.inputs, (std::vector<std::string>{"x", "x"}));
    EXPECT_EQ(scores.int_or("transB", 0), 1);
    // 3 groups x 2 heads = 6 slots per token; q is slots 0-1, k 2-3, v 4-5.
    EXPECT_EQ(scores.int_or("a_heads", 0), 6);
    EXPECT_EQ(scores.int_or("a_head", -1), 0);
    EXPECT_EQ(scores.int_or("b_heads", 0), 6);
    EXPECT_EQ(scores.int_or("b_head", -1), 2);
    EXPECT_EQ(scores.ints("a_shape"), (std::vector<int64_t>{1, 2, 5, 4}));
    EXPECT_EQ(scores.int_or("c_heads", 0), 0);
    EXPECT_EQ(scores.outputs, std::vector<std::string>{"s"});
    const Node& values = m.graph.nodes[3];
    EXPECT_EQ(values.inputs, (std::vector<std::string>{"p", "x"}));
    EXPECT_EQ(values.int_or("transB", 1), 0);
    EXPECT_EQ(values.int_or("a_heads", 0), 0);
    EXPECT_EQ(values.int_or("b_heads", 0), 6);
    EXPECT_EQ(values.int_or("b_head", -1), 4);
    EXPECT_EQ(values.int_or("c_heads", 0), 2);
    EXPECT_EQ(values.outputs, std::vector<std::string>{"y"});
    const HeadsOperand a = heads_operand(m.graph, values, 0), b = heads_operand(m.graph, values, 1);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 2, 5, 5}));
    EXPECT_EQ(a.heads, 0);
    EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 2, 5, 4}));
    EXPECT_EQ(b.head, 4);
  }
}

// A selection something else reads keeps its Transpose (the products still read in place); a
// Transpose of another perm is no grouping of heads, and the products read their operands.
TEST(ReadHeadsInPlace, KeepsWhatOthersReadAndOtherPerms) {
  Model shared = attention(false, true);
  read_heads_in_place(shared);
  EXPECT_EQ(ops(shared), (std::vector<std::string>{"Reshape", "Transpose", "Gather", "HeadsMatMul",
                                                   "Softmax", "HeadsMatMul"}));
  Model other = attention(false, false, {2, 0, 1, 3, 4});
  for (const char* t : {"t"}) other.graph.shapes[t] = {3, 1, 5, 2, 4};
  for (const char* t : {"q", "k", "v"}) other.graph.shapes[t] = {1, 5, 2, 4};
  other.graph.shapes["s"] = other.graph.shapes["p"] = {1, 5, 2, 2};
  other.graph.shapes["o"] = {1, 5, 2, 4};
  other.graph.shapes["y"] = {1, 2, 5, 4};
  read_heads_in_place(other);
  // The values' product still writes its output transposed: 5 "heads" side by side.
  EXPECT_EQ(ops(other),
            (std::vector<std::string>{"Reshape", "Transpose", "Gather", "Gather", "Gather",
                                      "FusedMatMul", "Softmax", "HeadsMatMul"}));
  const Node& values = other.graph.nodes.back();
  EXPECT_EQ(values.inputs, (std::vector<std::string>{"p", "v"}));
  EXPECT_EQ(values.int_or("a_heads", 0) + values.int_or("b_heads", 0), 0);
  EXPECT_EQ(values.int_or("c_heads", 0), 5);
}

// BERT as torch exports it: q, k and v of projections of their own, each a Reshape to
// [1, S, H, D] and a Transpose (k's to [1, H, D, S]); the scores read k^T as B stored [N, K].
TEST(ReadHeadsInPlace, SeparateProjectionsAndTransposedKeys) {
  Model m;
  m.graph.opset = 13;
  m.graph.inputs = {"pq", "pk", "pv"};
  const std::map<std::string, std::vector<int64_t>> shapes = {
      {"pq", {1, 5, 8}},    {"pk", {1, 5, 8}},    {"pv", {1, 5, 8}},   {"xq", {1, 5, 2, 4}},
      {"xk", {1, 5, 2, 4}}, {"xv", {1, 5, 2, 4}}, {"q", {1, 2, 5, 4}}, {"kt", {1, 2, 4, 5}},
      {"v", {1, 2, 5, 4}},  {"s", {1, 2, 5, 5}},  {"p", {1, 2, 5, 5}}, {"o", {1, 2, 5, 4}},
      {"y", {1, 5, 2, 4}}};
  for (const auto& [t, shape] : shapes) {
    m.graph.shapes[t] = shape;
    m.graph.types[t] = "float32";
  }
  constant(m, "target", i64({4}, {1, 5, 2, 4}), "int64");
  m.graph.nodes = {node("Reshape", {"pq", "target"}, {"xq"}),
                   node("Reshape", {"pk", "target"}, {"xk"}),
                   node("Reshape", {"pv", "target"}, {"xv"}),
                   node("Transpose", {"xq"}, {"q"}, {{"perm", ints({0, 2, 1, 3})}}),
                   node("Transpose", {"xk"}, {"kt"}, {{"perm", ints({0, 2, 3, 1})}}),
                   node("Transpose", {"xv"}, {"v"}, {{"perm", ints({0, 2, 1, 3})}}),
                   node("MatMul", {"q", "kt"}, {"s"}),
                   node("Softmax", {"s"}, {"p"}, {{"axis", ints({-1})}}),
                   node("MatMul", {"p", "v"}, {"o"}),
                   node("Transpose", {"o"}, {"y"}, {{"perm", ints({0, 2, 1, 3})}})};
  m.graph.outputs = {"y"};
  read_heads_in_place(m);
  ASSERT_EQ(ops(m), (std::vector<std::string>{"Reshape", "Reshape", "Reshape", "HeadsMatMul",
                                              "Softmax", "HeadsMatMul"}));
  const Node& scores = m.graph.nodes[3];
  EXPECT_EQ(scores.inputs, (std::vector<std::string>{"xq", "xk"}));
  EXPECT_EQ(scores.int_or("transB", 0), 1);
  EXPECT_EQ(scores.int_or("a_heads", 0), 2);
  EXPECT_EQ(scores.int_or("b_heads", 0), 2);
  EXPECT_EQ(scores.int_or("b_head", -1), 0);
  // B as the product reads it: [1, H, N, K].
  EXPECT_EQ(scores.ints("b_shape"), (std::vector<int64_t>{1, 2, 5, 4}));
  const Node& values = m.graph.nodes[5];
  EXPECT_EQ(values.inputs, (std::vector<std::string>{"p", "xv"}));
  EXPECT_EQ(values.int_or("transB", 1), 0);
  EXPECT_EQ(values.int_or("c_heads", 0), 2);
  EXPECT_EQ(values.outputs, std::vector<std::string>{"y"});
}

// paddle scales q before the product; the scaling moves below it, where the Softmax absorbs it.
// Div by the constant moves as well; a product no Softmax reads keeps its scaled operand.
TEST(MoveScaleAfterMatmul, QScalingMovesBelowTheScores) {
  const auto model = [](const std::string& op, bool softmax) {
    Model m;
    m.graph.opset = 11;
    m.graph.inputs = {"q", "k"};
    for (const char* t : {"q", "k", "qs"}) m.graph.shapes[t] = {1, 2, 5, 4};
    for (const char* t : {"s", "p"}) m.graph.shapes[t] = {1, 2, 5, 5};
    for (const char* t : {"q", "k", "qs", "s", "p"}) m.graph.types[t] = "float32";
    constant(m, "c", ConstantValue{{}, {0.5f}, {}}, "float32");
    m.graph.values["c"] = {0.5};
    Node scores = node("FusedMatMul", {"qs", "k"}, {"s"}, {{"transB", ints({1})}});
    scores.domain = "com.microsoft";
    m.graph.nodes = {node(op, {"q", "c"}, {"qs"}), scores};
    if (softmax) m.graph.nodes.push_back(node("Softmax", {"s"}, {"p"}));
    m.graph.outputs = {softmax ? "p" : "s"};
    return m;
  };
  for (const char* op : {"Mul", "Div"}) {
    Model m = model(op, true);
    move_scale_after_matmul(m);
    ASSERT_EQ(ops(m), (std::vector<std::string>{"FusedMatMul", op, "Softmax"}));
    EXPECT_EQ(m.graph.nodes[0].inputs, (std::vector<std::string>{"q", "k"}));
    EXPECT_EQ(m.graph.nodes[0].outputs, std::vector<std::string>{"s@unscaled"});
    EXPECT_EQ(m.graph.shape("s@unscaled"), (std::vector<int64_t>{1, 2, 5, 5}));
    EXPECT_EQ(m.graph.nodes[1].inputs, (std::vector<std::string>{"s@unscaled", "c"}));
    EXPECT_EQ(m.graph.nodes[1].outputs, std::vector<std::string>{"s"});
  }
  Model plain = model("Mul", false);
  move_scale_after_matmul(plain);
  EXPECT_EQ(ops(plain), (std::vector<std::string>{"Mul", "FusedMatMul"}));
}

TEST(SimplifyGraph, ObserverSeesEveryPassInOrder) {
  Model m = with_input();
  m.graph.nodes = {node("Relu", {"x"}, {"out"})};
  m.graph.outputs = {"out"};
  std::vector<std::string> passes;
  simplify_graph(m, [&](const std::string& pass, const Model&) { passes.push_back(pass); });
  // One round (it removes nothing), then the rewrites.
  EXPECT_EQ(passes,
            (std::vector<std::string>{
                "read", "fold_constants", "inline_constant_if", "remove_identities",
                "remove_dead_nodes", "infer_shapes", "lift_1d_windows", "sink_squeezes",
                "reduce_as_global_pool", "conv_transpose_as_conv", "hoist_over_depth_to_space",
                "fold_transpose_into_matmul", "move_scale_after_matmul", "read_heads_in_place"}));
  const std::string text = graph_text(m);
  // infer_shapes gave the output, declared without a shape, its shape.
  EXPECT_NE(text.find("out_node: Relu(x [2x8x4x4]) -> out [2x8x4x4]"), std::string::npos) << text;
}

}  // namespace
}  // namespace ktune::frontend
