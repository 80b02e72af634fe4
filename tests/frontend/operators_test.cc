// The operator table: one row per operator, a kernel exactly where its family computes one, and
// what `ktune tasks` lists for each family's nodes (the generated kernel a model build runs).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "frontend/model_tasks.h"
#include "frontend/operators.h"

namespace ktune::frontend {
namespace {

TEST(OperatorTable, OneRowPerOperatorAndKernelsWhereTheFamilyComputes) {
  std::set<std::string> seen;
  for (const OperatorInfo& info : operator_table()) {
    EXPECT_TRUE(seen.insert(info.domain + "::" + info.op).second) << info.op << " listed twice";
    const bool computes = info.family != OpFamily::kAnchor && info.family != OpFamily::kView &&
                          info.family != OpFamily::kConstant;
    EXPECT_EQ(!info.kernel.empty(), computes) << info.op;
    // An anchor names the task family that maps it; no other row does.
    if (info.family == OpFamily::kAnchor)
      EXPECT_TRUE(info.tasks == "conv" || info.tasks == "matmul" || info.tasks == "pool")
          << info.op << ": " << info.tasks;
    else
      EXPECT_EQ(info.tasks, "") << info.op;
    EXPECT_EQ(operator_info(info.op, info.domain), &info);
  }
  EXPECT_EQ(operator_info("NonMaxSuppression"), nullptr);
  // A row belongs to its domain: ONNX Runtime's FusedMatMul is no default-domain operator.
  EXPECT_EQ(operator_info("FusedMatMul"), nullptr);
  EXPECT_EQ(operator_info("FusedMatMul", "com.microsoft")->tasks, "matmul");
  EXPECT_TRUE(in_family("Mish", OpFamily::kUnary));
  EXPECT_FALSE(in_family("Mish", OpFamily::kBinary));
}

// A node of each family, alone after the input: what `ktune tasks` says computes it.
TEST(OperatorTable, TasksListTheFamilysGeneratedKernel) {
  struct Case {
    std::string op, generated, reason;
  };
  for (const Case& c :
       {Case{"Mish", "elementwise", "no template"}, Case{"Pow", "elementwise", "no template"},
        Case{"Flatten", "view", "layout only (no kernel)"},
        Case{"Softmax", "softmax", "no template"}, Case{"ReduceMax", "reduce", "no template"},
        Case{"DepthToSpace", "depth_to_space", "no template"},
        Case{"QuantizeLinear", "quantize", "no template (per-tensor kernel)"},
        Case{"NonZero", "", "no template"}}) {
    Graph g;
    g.name = "one";
    g.opset = 13;
    g.inputs = {"x"};
    g.shapes["x"] = {1, 4, 2, 2};
    g.types["x"] = "float32";
    std::vector<std::string> inputs = {"x"};
    if (c.op == "Pow") inputs.push_back("x");
    g.nodes.push_back({c.op, "", c.op, inputs, {"y"}, {}});
    g.shapes["y"] = {1, 4, 2, 2};
    g.types["y"] = "float32";
    g.outputs = {"y"};
    const ModelTasks m =
        extract_tasks(g, schedule_space::make_target_traits("test", "x86_64-linux-gnu", 512, 1));
    ASSERT_EQ(m.unsupported.size(), 1u) << c.op;
    EXPECT_EQ(m.unsupported[0].generated, c.generated) << c.op;
    EXPECT_EQ(m.unsupported[0].reason, c.reason) << c.op;
  }
}

}  // namespace
}  // namespace ktune::frontend
