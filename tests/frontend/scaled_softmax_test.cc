// Tests of find_scaled_softmaxes (frontend/scaled_softmax.h): a Mul or Div of the scores by a
// one-element constant that only a Softmax reads belongs to the Softmax, in each operand order;
// any other reader, a graph output or a constant of more elements leaves the two apart. And
// `ktune tasks`' listing (extract_tasks): the Softmax row names both nodes, the Mul has none.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "frontend/model_tasks.h"
#include "frontend/scaled_softmax.h"
#include "schedule_space/workload.h"

namespace ktune::frontend {
namespace {

Node node(const std::string& op, std::vector<std::string> inputs, const std::string& output) {
  Node n;
  n.op = op;
  n.name = output + "_node";
  n.inputs = std::move(inputs);
  n.outputs = {output};
  return n;
}

// Scores "x" [2, 3, 10] and the constants "eighth" (0.125), "root" (2.5), "row" ([1, 1, 10]).
Graph scores() {
  Graph g;
  g.opset = 17;
  g.inputs = {"x"};
  g.shapes["x"] = {2, 3, 10};
  g.types["x"] = "float32";
  for (const auto& [name, v] : std::map<std::string, std::vector<double>>{
           {"eighth", {0.125}}, {"root", {2.5}}, {"row", std::vector<double>(10, 0.5)}}) {
    g.constants.insert(name);
    g.values[name] = v;
    g.types[name] = "float32";
    g.shapes[name] = v.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{1, 1, 10};
  }
  return g;
}

void add(Graph& g, Node n) {
  for (const std::string& out : n.outputs) {
    g.shapes[out] = {2, 3, 10};
    g.types[out] = "float32";
  }
  g.nodes.push_back(std::move(n));
}

TEST(ScaledSoftmax, AMulOrDivByAConstantOnlyTheSoftmaxReadsIsItsOwn) {
  Graph g = scores();
  add(g, node("Mul", {"x", "eighth"}, "a"));
  add(g, node("Softmax", {"a"}, "sa"));
  add(g, node("Mul", {"eighth", "x"}, "b"));
  add(g, node("Softmax", {"b"}, "sb"));
  add(g, node("Div", {"x", "root"}, "c"));
  add(g, node("LogSoftmax", {"c"}, "sc"));
  g.outputs = {"sa", "sb", "sc"};
  const std::vector<ScaledSoftmax> found = find_scaled_softmaxes(g);
  ASSERT_EQ(found.size(), 3u);
  const std::vector<std::pair<size_t, size_t>> nodes = {{0, 1}, {2, 3}, {4, 5}};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(found[k].scale_node, nodes[k].first);
    EXPECT_EQ(found[k].softmax, nodes[k].second);
    EXPECT_EQ(found[k].input, "x");
  }
  EXPECT_EQ(found[0].scale, 0.125);
  EXPECT_EQ(found[1].scale, 0.125);
  EXPECT_DOUBLE_EQ(found[2].scale, 0.4);
}

TEST(ScaledSoftmax, AnotherReaderAGraphOutputOrAWiderConstantLeavesThemApart) {
  Graph g = scores();
  add(g, node("Mul", {"x", "eighth"}, "read_twice"));
  add(g, node("Softmax", {"read_twice"}, "s1"));
  add(g, node("Relu", {"read_twice"}, "r1"));
  add(g, node("Mul", {"x", "eighth"}, "an_output"));
  add(g, node("Softmax", {"an_output"}, "s2"));
  add(g, node("Mul", {"x", "row"}, "per_column"));
  add(g, node("Softmax", {"per_column"}, "s3"));
  add(g, node("Div", {"eighth", "x"}, "divided_by_scores"));
  add(g, node("Softmax", {"divided_by_scores"}, "s4"));
  add(g, node("Mul", {"x", "x"}, "squared"));
  add(g, node("Softmax", {"squared"}, "s5"));
  g.outputs = {"s1", "r1", "an_output", "s2", "s3", "s4", "s5"};
  EXPECT_TRUE(find_scaled_softmaxes(g).empty());
}

TEST(ScaledSoftmax, TheTaskListingNamesTheMulWithItsSoftmax) {
  Graph g = scores();
  add(g, node("Mul", {"x", "eighth"}, "a"));
  add(g, node("Softmax", {"a"}, "sa"));
  g.outputs = {"sa"};
  const ModelTasks m =
      extract_tasks(g, schedule_space::make_target_traits("test", "x86_64-linux-gnu", 512, 1));
  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_EQ(m.unsupported[0].op, "Softmax");
  EXPECT_EQ(m.unsupported[0].layers, std::vector<std::string>{"a_node+sa_node"});
  EXPECT_EQ(m.unsupported[0].generated, "softmax");
  ASSERT_EQ(m.scaled_softmaxes.size(), 1u);
}

}  // namespace
}  // namespace ktune::frontend
