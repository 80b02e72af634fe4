// Tests of frontend/opset_adapter: models of opsets 18 to 21 (scripts/make-test-models op_opset18,
// op_opset21, opset19_refused) read in opset 17's forms, node by node, and what opset 17 cannot
// say refused at once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/onnx_graph.h"
#include "support/error.h"
#include "tests/frontend/test_models.h"

namespace ktune::frontend {
namespace {

using testing_models::model;

std::vector<const Node*> nodes_of(const Graph& g, const std::string& op) {
  std::vector<const Node*> found;
  for (const Node& n : g.nodes)
    if (n.op == op) found.push_back(&n);
  return found;
}

// The values of the constant input k of `n`, as integers.
std::vector<int64_t> int_values(const Graph& g, const Node& n, size_t k) {
  std::vector<int64_t> v;
  if (k >= n.inputs.size() || !g.values.count(n.inputs[k])) return {-999};
  for (double x : g.values.at(n.inputs[k])) v.push_back(static_cast<int64_t>(x));
  return v;
}

TEST(OpsetAdapter, Opset18ParametersBecomeOpset17s) {
  const Graph g = load_onnx(model("op_opset18.onnx"));
  EXPECT_EQ(g.opset, 17);
  // Reduce* axes inputs become the attribute; empty axes with noop_with_empty_axes an Identity.
  const auto means = nodes_of(g, "ReduceMean");
  ASSERT_EQ(means.size(), 3u);
  EXPECT_EQ(means[0]->inputs.size(), 1u);
  EXPECT_EQ(means[0]->ints("axes"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(means[1]->ints("axes"), (std::vector<int64_t>{1}));
  EXPECT_EQ(means[2]->ints("axes"), (std::vector<int64_t>{-1, -2}));
  const auto maxes = nodes_of(g, "ReduceMax");
  ASSERT_EQ(maxes.size(), 1u);
  EXPECT_EQ(maxes[0]->ints("axes"), (std::vector<int64_t>{-1}));
  const auto mins = nodes_of(g, "ReduceMin");
  ASSERT_EQ(mins.size(), 1u);
  EXPECT_FALSE(mins[0]->attrs.count("axes"));  // all axes
  EXPECT_EQ(nodes_of(g, "Identity").size(), 1u);
  // Split by num_outputs: sizes ceil(dim / n), the last part what remains.
  const auto splits = nodes_of(g, "Split");
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_EQ(int_values(g, *splits[0], 1), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(int_values(g, *splits[1], 1), (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_EQ(g.shapes.at(splits[1]->outputs[3]), (std::vector<int64_t>{1, 6, 5, 1}));
  // Pad of some axes: pads of every axis, the fill value kept.
  const auto pads = nodes_of(g, "Pad");
  ASSERT_EQ(pads.size(), 2u);
  EXPECT_EQ(int_values(g, *pads[0], 1), (std::vector<int64_t>{0, 0, 1, 2, 0, 0, 0, 1}));
  EXPECT_EQ(pads[0]->inputs.size(), 3u);
  EXPECT_EQ(int_values(g, *pads[1], 1), (std::vector<int64_t>{0, 0, 0, 2, 0, 0, 0, 1}));
  EXPECT_EQ(g.shapes.at(pads[1]->outputs[0]), (std::vector<int64_t>{1, 6, 5, 10}));
  // Resize of some axes: scales and sizes of every axis; the opset 18 attributes gone.
  const auto resizes = nodes_of(g, "Resize");
  ASSERT_EQ(resizes.size(), 2u);
  EXPECT_EQ(g.values.at(resizes[0]->inputs[2]), (std::vector<double>{1, 1, 2, 2}));
  EXPECT_EQ(int_values(g, *resizes[1], 3), (std::vector<int64_t>{1, 6, 5, 11}));
  for (const Node* r : resizes)
    for (const char* attr : {"axes", "antialias", "keep_aspect_ratio_policy"})
      EXPECT_FALSE(r->attrs.count(attr)) << attr;
  // Mish: x * Tanh(Softplus(x)).
  EXPECT_TRUE(nodes_of(g, "Mish").empty());
  EXPECT_EQ(nodes_of(g, "Softplus").size(), 1u);
}

TEST(OpsetAdapter, Opset21ParametersBecomeOpset17s) {
  const Graph g = load_onnx(model("op_opset21.onnx"));
  EXPECT_EQ(g.opset, 17);
  EXPECT_EQ(g.ir_version, 8);
  // Gelu: its exact form as torch.onnx writes it below opset 20, and its tanh form.
  EXPECT_TRUE(nodes_of(g, "Gelu").empty());
  EXPECT_EQ(nodes_of(g, "Erf").size(), 1u);
  EXPECT_EQ(nodes_of(g, "Tanh").size(), 2u);
  for (const Node& n : g.nodes)
    for (const char* attr : {"saturate", "block_size", "output_dtype", "dilations"})
      EXPECT_FALSE(n.attrs.count(attr)) << n.name << " " << attr;
  EXPECT_EQ(nodes_of(g, "ReduceMax").at(0)->ints("axes"), (std::vector<int64_t>{1}));
}

TEST(OpsetAdapter, WhatOpset17CannotSayIsRefusedNodeByNode) {
  try {
    load_onnx(model("opset19_refused.onnx"));
    ADD_FAILURE() << "opset19_refused.onnx loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    const std::string message = e.what();
    for (const char* what : {"antialias", "half_pixel_symmetric", "wrap mode", "opset 19"})
      EXPECT_NE(message.find(what), std::string::npos) << what << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  try {
    load_onnx(model("bad_opset.onnx"));
    ADD_FAILURE() << "bad_opset.onnx loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("newer than ktune reads (up to 22)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ktune::frontend
