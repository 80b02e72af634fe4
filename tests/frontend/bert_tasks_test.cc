// The tasks of a BERT encoder layer (tiny_bert.onnx): matmuls with bias, residual and the Erf-form
// GELU fused, batch_matmul for the attention products (the Softmax read by the second),
// LayerNorm groups, every other node with a
// generated kernel; and the GELU and LayerNorm forms on graphs built here.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "frontend/layer_norm.h"
#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"
#include "tests/frontend/test_models.h"

namespace ktune::frontend {
namespace {

schedule_space::TargetTraits avx512() {
  return schedule_space::make_target_traits("test", "x86_64-linux-gnu", 512, 1);
}

TEST(BertTasks, TinyBertLayerMapsEveryNode) {
  const Graph g = load_onnx(testing_models::model("tiny_bert.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  std::map<std::string, int64_t> count;
  for (const ModelTask& t : m.tasks) {
    count[t.key()] = t.count;
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
  }
  const std::map<std::string, int64_t> want = {
      {"matmul(M=8,N=32,K=32,layout=nn,dtype=float32,epilogue=bias)", 3},  // Q, K, V
      {"batch_matmul(batch=2,M=8,N=8,K=16,layout=nn,dtype=float32)", 1},   // Q K^T
      // softmax(masked scores) times V, the Softmax computed as the product reads it
      {"batch_matmul(batch=2,M=8,N=16,K=8,layout=nn,a_softmax=1,dtype=float32)", 1},
      {"matmul(M=8,N=32,K=32,layout=nn,dtype=float32,epilogue=bias_add)",
       1},  // projection + residual
      {"matmul(M=8,N=64,K=32,layout=nn,dtype=float32,epilogue=bias_gelu_erf)", 1},
      {"matmul(M=8,N=32,K=64,layout=nn,dtype=float32,epilogue=bias_add)", 1}};
  EXPECT_EQ(count, want);

  // Every node a task does not cover has a generated kernel: nothing is unsupported.
  std::map<std::string, int64_t> generated;
  for (const UnsupportedOp& u : m.unsupported) {
    EXPECT_FALSE(u.generated.empty()) << u.op << ": " << u.reason;
    generated[u.op + ":" + u.generated] += u.count;
  }
  const std::map<std::string, int64_t> want_generated = {{"LayerNorm:layer_norm", 2},
                                                         {"Reshape:view", 4},
                                                         {"Transpose:transpose", 4},
                                                         {"Div:elementwise", 1},
                                                         {"Add:elementwise", 1}};
  EXPECT_EQ(generated, want_generated);

  ASSERT_EQ(m.layer_norms.size(), 2u);
  for (const LayerNormGroup& l : m.layer_norms) {
    EXPECT_EQ(l.nodes.size(), 9u);
    EXPECT_FLOAT_EQ(static_cast<float>(l.epsilon), 1e-12f);
    EXPECT_FALSE(l.gamma.empty());
    EXPECT_FALSE(l.beta.empty());
  }
  // Each node is listed exactly once: in a task, fused, or as one entry of the list.
  size_t listed = 0;
  for (const ModelTask& t : m.tasks) listed += t.layers.size();
  for (const UnsupportedOp& u : m.unsupported)
    for (const std::string& layer : u.layers)
      listed += static_cast<size_t>(std::count(layer.begin(), layer.end(), '+')) + 1;
  EXPECT_EQ(listed, g.nodes.size());
}

// A graph of x [1, 4, 8] -> MatMul 8x8 -> Add bias -> what the test adds.
struct Builder {
  Graph g;
  Builder() {
    g.name = "bert_forms";
    g.opset = 17;
    g.inputs = {"x"};
    g.shapes["x"] = {1, 4, 8};
  }
  std::string constant(const std::string& name, std::vector<int64_t> shape,
                       std::vector<double> values = {}) {
    g.constants.insert(name);
    g.shapes[name] = std::move(shape);
    if (!values.empty()) g.values[name] = std::move(values);
    return name;
  }
  std::string node(const std::string& op, std::vector<std::string> inputs,
                   std::map<std::string, Attribute> attrs = {}) {
    const std::string out = op + "_" + std::to_string(g.nodes.size());
    g.nodes.push_back({op, "", out, std::move(inputs), {out}, std::move(attrs)});
    g.shapes[out] = {1, 4, 8};
    return out;
  }
  std::string linear() {
    return node("Add", {node("MatMul", {"x", constant("w", {8, 8})}), constant("b", {8})});
  }
};

TEST(BertTasks, GeluErfWithTheHalfFirstIsFused) {
  Builder b;
  const std::string y = b.linear();
  const std::string half = b.node("Mul", {y, b.constant("half", {}, {0.5})});
  const std::string erf =
      b.node("Erf", {b.node("Mul", {y, b.constant("rsqrt2", {}, {0.7071067811865476})})});
  const std::string out = b.node("Mul", {half, b.node("Add", {b.constant("one", {}, {1.0}), erf})});
  b.g.outputs = {out};
  const ModelTasks m = extract_tasks(b.g, avx512());
  ASSERT_EQ(m.tasks.size(), 1u);
  EXPECT_EQ(m.tasks[0].epilogue, "bias_gelu_erf");
  EXPECT_TRUE(m.unsupported.empty());
  ASSERT_EQ(m.occurrences.size(), 1u);
  EXPECT_EQ(m.occurrences[0].fused.size(), 6u);  // the bias Add and GELU's five nodes
}

// GELU's tanh form as torch.onnx writes approximate="tanh" below opset 20 (x * (x * x), the half
// last) and as GPT-2's gelu_new exports (Pow(x, 3), the half first): one gelu epilogue.
TEST(BertTasks, GeluTanhFormsAreFused) {
  for (const bool gpt2 : {false, true}) {
    Builder b;
    const std::string y = b.linear();
    const std::string cube = gpt2 ? b.node("Pow", {y, b.constant("three", {}, {3.0})})
                                  : b.node("Mul", {y, b.node("Mul", {y, y})});
    const std::string inner =
        b.node("Add", {y, b.node("Mul", {b.constant("kappa", {}, {0.044715}), cube})});
    const std::string tanh =
        b.node("Tanh", {b.node("Mul", {inner, b.constant("beta", {}, {0.7978845608028654})})});
    const std::string plus = b.node("Add", {tanh, b.constant("one", {}, {1.0})});
    const std::string half = b.constant("half", {}, {0.5});
    b.g.outputs = {gpt2 ? b.node("Mul", {b.node("Mul", {y, half}), plus})
                        : b.node("Mul", {half, b.node("Mul", {y, plus})})};
    const ModelTasks m = extract_tasks(b.g, avx512());
    ASSERT_EQ(m.tasks.size(), 1u) << gpt2;
    EXPECT_EQ(m.tasks[0].epilogue, "bias_gelu") << gpt2;
    EXPECT_TRUE(m.unsupported.empty()) << gpt2;
    ASSERT_EQ(m.occurrences.size(), 1u);
    EXPECT_EQ(m.occurrences[0].fused.size(), gpt2 ? 9u : 10u) << gpt2;  // the bias Add too
  }
}

TEST(BertTasks, GeluWithAnotherConstantIsNotFused) {
  Builder b;
  const std::string y = b.linear();
  const std::string erf = b.node("Erf", {b.node("Div", {y, b.constant("two", {}, {2.0})})});
  const std::string mul = b.node("Mul", {y, b.node("Add", {erf, b.constant("one", {}, {1.0})})});
  b.g.outputs = {b.node("Mul", {mul, b.constant("half", {}, {0.5})})};
  const ModelTasks m = extract_tasks(b.g, avx512());
  ASSERT_EQ(m.tasks.size(), 1u);
  EXPECT_EQ(m.tasks[0].epilogue, "bias");
  EXPECT_EQ(m.unsupported.size(), 4u);  // Div, Erf, Add, Mul (the two Muls are one entry)
}

TEST(BertTasks, LayerNormalizationNodeIsOneGroup) {
  Builder b;
  b.g.outputs = {b.node("LayerNormalization",
                        {b.linear(), b.constant("gamma", {8}), b.constant("beta", {8})},
                        {{"epsilon", {{}, {1e-6f}, ""}}})};
  const ModelTasks m = extract_tasks(b.g, avx512());
  ASSERT_EQ(m.layer_norms.size(), 1u);
  EXPECT_EQ(m.layer_norms[0].gamma, "gamma");
  EXPECT_EQ(m.layer_norms[0].beta, "beta");
  EXPECT_FLOAT_EQ(static_cast<float>(m.layer_norms[0].epsilon), 1e-6f);
  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_EQ(m.unsupported[0].op, "LayerNorm");
  EXPECT_EQ(m.unsupported[0].generated, "layer_norm");
  // Over another axis it is no group (and no model build computes it).
  Builder c;
  c.g.outputs = {
      c.node("LayerNormalization", {"x", c.constant("gamma", {4, 8})}, {{"axis", {{1}, {}, ""}}})};
  EXPECT_TRUE(find_layer_norms(c.g).empty());
}

}  // namespace
}  // namespace ktune::frontend
