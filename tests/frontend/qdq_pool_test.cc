// The uint8 global average pool on graphs built here node by node (no ONNX file): DQ ->
// GlobalAveragePool -> Q with a Flatten or Reshape between the pool and the QuantizeLinear is one
// uint8 pool whose output is the view's; a view that reorders or that another node also reads in
// float leaves the pool in float32.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"

namespace ktune::frontend {
namespace {

// x [1, 24, 4, 4] float -> Q (uint8) -> DQ -> GlobalAveragePool, the rest added by each test.
struct PoolGraph {
  Graph g;
  std::string pooled;  // the GlobalAveragePool's output, float32 [1, 24, 1, 1]
  size_t pool = 0;     // its node

  PoolGraph() {
    g.name = "pool";
    g.opset = 13;
    g.inputs = {"x"};
    g.shapes["x"] = {1, 24, 4, 4};
    g.types["x"] = "float32";
    const std::string q =
        node("QuantizeLinear", {"x", scale("sx"), zero_point("zx")}, {1, 24, 4, 4}, "uint8");
    const std::string d = node("DequantizeLinear", {q, "sx", "zx"}, {1, 24, 4, 4}, "float32");
    pooled = node("GlobalAveragePool", {d}, {1, 24, 1, 1}, "float32");
    pool = g.nodes.size() - 1;
  }
  std::string scale(const std::string& name) {
    g.constants.insert(name);
    g.shapes[name] = {};
    g.types[name] = "float32";
    g.values[name] = {0.05};
    return name;
  }
  std::string zero_point(const std::string& name) {
    g.constants.insert(name);
    g.shapes[name] = {};
    g.types[name] = "uint8";
    g.values[name] = {3};
    return name;
  }
  // Adds a node whose single output has `shape` and `type`; returns the output's name.
  std::string node(const std::string& op, std::vector<std::string> inputs,
                   std::vector<int64_t> shape, const std::string& type) {
    const std::string out = op + "_" + std::to_string(g.nodes.size());
    g.nodes.push_back({op, "", out, std::move(inputs), {out}, {}});
    g.shapes[out] = std::move(shape);
    g.types[out] = type;
    return out;
  }
  // `view` -> Q -> DQ to the graph output (and `also` as a second output when not "").
  ModelTasks finish(const std::string& view, const std::string& also = "") {
    const std::vector<int64_t> shape = g.shapes.at(view);
    const std::string q =
        node("QuantizeLinear", {view, scale("sy"), zero_point("zy")}, shape, "uint8");
    g.outputs = {node("DequantizeLinear", {q, "sy", "zy"}, shape, "float32")};
    if (!also.empty()) g.outputs.push_back(also);
    return extract_tasks(g, schedule_space::make_target_traits("test", "x86_64-linux-gnu", 512, 1));
  }
  std::string reshape(const std::string& in, std::vector<int64_t> shape) {
    const std::string s = "shape" + std::to_string(g.nodes.size());
    g.constants.insert(s);
    g.shapes[s] = {static_cast<int64_t>(shape.size())};
    g.types[s] = "int64";
    return node("Reshape", {in, s}, std::move(shape), "float32");
  }
};

// How many times `op` is listed, by the generated kernel named.
std::map<std::string, int64_t> generated(const ModelTasks& m, const std::string& op) {
  std::map<std::string, int64_t> by;
  for (const auto& u : m.unsupported)
    if (u.op == op) by[u.generated] += u.count;
  return by;
}

// The one uint8 pool of `m`, whose epilogue is `view_op` (Flatten or Reshape) then the
// QuantizeLinear, writing the QuantizeLinear's output.
void expect_uint8_pool_through(const PoolGraph& p, const ModelTasks& m,
                               const std::string& view_op) {
  ASSERT_EQ(m.quantized_global_pools.size(), 1u);
  const QuantizedGlobalAveragePool& pool = m.quantized_global_pools.front();
  EXPECT_EQ(pool.node, p.pool);
  ASSERT_EQ(pool.prologue.size(), 1u);
  EXPECT_EQ(p.g.nodes[pool.prologue[0]].op, "DequantizeLinear");
  ASSERT_EQ(pool.epilogue.size(), 2u);
  EXPECT_EQ(p.g.nodes[pool.epilogue[0]].op, view_op);
  EXPECT_EQ(p.g.nodes[pool.epilogue[1]].op, "QuantizeLinear");
  EXPECT_EQ(pool.output, p.g.nodes[pool.epilogue[1]].outputs[0]);
  EXPECT_EQ(pool.data, "QuantizeLinear_0");
  EXPECT_EQ(pool.out_scale, "sy");
  EXPECT_EQ(pool.out_zero_point, "zy");
  EXPECT_TRUE(m.tasks.empty());  // no float avg_pool2d task
  EXPECT_EQ(generated(m, "GlobalAveragePool"),
            (std::map<std::string, int64_t>{{"global_average_pool_u8", 1}}));
  EXPECT_TRUE(generated(m, view_op).empty()) << view_op << " listed apart from the pool";
  for (const auto& u : m.unsupported) {
    if (u.op == "GlobalAveragePool") {
      EXPECT_EQ(u.reason,
                "uint8 global average pool (between DequantizeLinear and QuantizeLinear, its " +
                    view_op + " a view)");
    }
  }
}

TEST(QdqPool, FlattenBetweenPoolAndQuantizeIsAView) {
  PoolGraph p;
  const ModelTasks m = p.finish(p.node("Flatten", {p.pooled}, {1, 24}, "float32"));
  expect_uint8_pool_through(p, m, "Flatten");
}

TEST(QdqPool, ReshapeToRowsOrToThePooledShapeIsAView) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{1, 24}, std::vector<int64_t>{1, 24, 1, 1}}) {
    PoolGraph p;
    const ModelTasks m = p.finish(p.reshape(p.pooled, shape));
    expect_uint8_pool_through(p, m, "Reshape");
  }
}

// A float pool, its view and the QuantizeLinear each a kernel of their own.
void expect_float_pool(const ModelTasks& m) {
  EXPECT_TRUE(m.quantized_global_pools.empty());
  ASSERT_EQ(m.tasks.size(), 1u);
  EXPECT_EQ(m.tasks[0].template_name, "avg_pool2d");
  EXPECT_EQ(generated(m, "QuantizeLinear")["quantize"], 2);
}

// A Reshape to another shape than [N, C] or [N, C, 1, 1] is not matched (the pool runs in float).
TEST(QdqPool, ReshapeToAnotherShapeLeavesThePoolInFloat) {
  PoolGraph p;
  expect_float_pool(p.finish(p.reshape(p.pooled, {1, 4, 6})));
}

// The flattened float values read by another node too, or the pooled ones, or a graph output: the
// float values must exist, so the pool stays float32.
TEST(QdqPool, FloatValuesReadElsewhereLeaveThePoolInFloat) {
  {
    PoolGraph p;
    const std::string flat = p.node("Flatten", {p.pooled}, {1, 24}, "float32");
    const std::string relu = p.node("Relu", {flat}, {1, 24}, "float32");
    expect_float_pool(p.finish(flat, relu));
  }
  {
    PoolGraph p;
    const std::string flat = p.node("Flatten", {p.pooled}, {1, 24}, "float32");
    expect_float_pool(p.finish(flat, flat));
  }
  {
    PoolGraph p;
    const std::string relu = p.node("Relu", {p.pooled}, {1, 24, 1, 1}, "float32");
    expect_float_pool(p.finish(p.node("Flatten", {p.pooled}, {1, 24}, "float32"), relu));
  }
}

}  // namespace
}  // namespace ktune::frontend
