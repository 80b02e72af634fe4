// Task extraction on the quantized models of scripts/make-test-models: each DequantizeLinear ->
// Conv | Gemm [-> Relu] -> QuantizeLinear, and each QLinearConv and QLinearMatMul, is one
// conv2d_nchwc_u8s8s32 or matmul_u8s8s32 task with its requantize epilogue and its
// DequantizeLinear nodes absorbed; a Conv that does not fuse runs in float32 and says why; the
// other QuantizeLinear / DequantizeLinear nodes are listed with their generated kernels.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"
#include "support/error.h"
#include "tests/frontend/test_models.h"

namespace ktune::frontend {
namespace {

using testing_models::model;

schedule_space::TargetTraits avx512() {
  return schedule_space::make_target_traits("test", "x86_64-linux-gnu", 512, 1);
}

// The occurrences of `op` in the unsupported list, by the generated kernel named.
std::map<std::string, int64_t> generated(const ModelTasks& m, const std::string& op) {
  std::map<std::string, int64_t> by;
  for (const auto& u : m.unsupported)
    if (u.op == op) by[u.generated] += u.count;
  return by;
}

TEST(QdqTasks, SmallQdqRunsEveryConvInInt8) {
  const Graph g = load_onnx(model("small_qdq.onnx"));
  EXPECT_EQ(g.type("input"), "float32");
  const ModelTasks m = extract_tasks(g, avx512());
  // small_qdq: 8->16 relu, 16->16 relu, 16->16 (no relu, nonzero output zero point), 16->32
  // stride 2 relu, 1x1 32->24 relu.
  ASSERT_EQ(m.occurrences.size(), 6u);  // and the global pool, in float
  ASSERT_EQ(m.quantized.size(), 5u);
  int relu = 0, convs = 0;
  for (const TaskOccurrence& occ : m.occurrences) {
    const ModelTask& t = m.tasks[occ.task];
    if (g.nodes[occ.node].op != "Conv") continue;
    ++convs;
    EXPECT_EQ(t.template_name, "conv2d_nchwc_u8s8s32") << t.key();
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
    EXPECT_EQ(t.args.at("out"), "u8");
    EXPECT_EQ(t.args.at("scale"), "per_channel");
    EXPECT_EQ(t.args.count("dtype"), 0u) << t.key();
    relu += t.args.at("relu") == "1";
    // The weights' and bias' DequantizeLinear at least; the QuantizeLinear last in the epilogue.
    EXPECT_GE(occ.prologue.size(), 2u) << occ.layer;
    ASSERT_FALSE(occ.fused.empty());
    EXPECT_EQ(g.nodes[occ.fused.back()].op, "QuantizeLinear") << occ.layer;
    for (size_t p : occ.prologue) EXPECT_EQ(g.nodes[p].op, "DequantizeLinear") << occ.layer;
  }
  EXPECT_EQ(convs, 5);
  EXPECT_EQ(relu, 4);
  const auto first = m.tasks[m.occurrences.front().task];
  EXPECT_EQ(first.args.at("data_zero_point"), "128") << first.key();
  EXPECT_EQ(first.args.at("C"), "8");
  // The input's QuantizeLinear; the residual's two DequantizeLinear (c1 is also the next conv's
  // data, so its DequantizeLinear stays), the final one before the pool.
  EXPECT_EQ(generated(m, "QuantizeLinear"), (std::map<std::string, int64_t>{{"quantize", 2}}));
  EXPECT_EQ(generated(m, "DequantizeLinear")["dequantize"], 3);
  EXPECT_EQ(generated(m, "DequantizeLinear").count("folded"), 0u);
}

TEST(QdqTasks, ResNet18QdqRunsInt8ButTheStem) {
  const Graph g = load_onnx(model("resnet18_qdq.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  int64_t int8 = 0, float_convs = 0, gemms = 0;
  for (const TaskOccurrence& occ : m.occurrences) {
    const ModelTask& t = m.tasks[occ.task];
    if (t.template_name == "conv2d_nchwc_u8s8s32") {
      ++int8;
      EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
    } else if (t.template_name == "matmul_u8s8s32") {
      ++gemms;
      EXPECT_EQ(g.nodes[occ.node].op, "Gemm");
      EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
      EXPECT_EQ(t.key(), "matmul_u8s8s32(M=1,N=1000,K=512,out=u8,scale=per_channel,relu=0)");
      // The data's, weights' and bias' DequantizeLinear; the QuantizeLinear after it.
      EXPECT_EQ(occ.prologue.size(), 3u) << occ.layer;
      ASSERT_EQ(occ.fused.size(), 1u) << occ.layer;
      EXPECT_EQ(g.nodes[occ.fused.front()].op, "QuantizeLinear");
    } else if (g.nodes[occ.node].op == "Conv") {
      ++float_convs;
      EXPECT_NE(t.note.find("float32, not int8: input channels not a multiple of 4"),
                std::string::npos)
          << t.note;
    }
  }
  EXPECT_EQ(int8, 19);  // 16 block convs and 3 projections; the stem (3 channels) in float32
  EXPECT_EQ(float_convs, 1);
  EXPECT_EQ(gemms, 1);
  EXPECT_EQ(m.quantized.size(), 20u);
  // The stem's weights and bias are folded (2 DequantizeLinear of constants); the Gemm's are its.
  EXPECT_EQ(generated(m, "DequantizeLinear")["folded"], 2);
}

// Data quantized per channel is not the int8 kernels' per-tensor data: the conv runs in float32
// and its note says why.
TEST(QdqTasks, PerAxisDataRunsInFloatAndSaysWhy) {
  const Graph g = load_onnx(model("qdq_per_axis.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  EXPECT_TRUE(m.quantized.empty());
  ASSERT_EQ(m.occurrences.size(), 1u);
  const ModelTask& t = m.tasks[m.occurrences.front().task];
  EXPECT_EQ(t.template_name, "conv2d_nchwc");
  EXPECT_EQ(t.note,
            "float32, not int8: the data's scale or zero point is not one value "
            "(per-axis data)");
  // The conv and its Relu; the QuantizeLinear after them stays a kernel of its own.
  EXPECT_EQ(t.key().find("epilogue=bias_relu") != std::string::npos, true) << t.key();
  EXPECT_EQ(generated(m, "DequantizeLinear")["folded"], 2);
}

// The QOperator form: each QLinearConv and the QLinearMatMul is the int8 task its QDQ form is,
// with nothing around it to absorb; the float residual Add between DQ and Q stays as it is.
TEST(QdqTasks, SmallQopRunsEveryQLinearOperatorInInt8) {
  const Graph g = load_onnx(model("small_qop.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  ASSERT_EQ(m.quantized.size(), 5u);
  std::map<std::string, int64_t> by_op;
  for (const TaskOccurrence& occ : m.occurrences) {
    const ModelTask& t = m.tasks[occ.task];
    const std::string& op = g.nodes[occ.node].op;
    if (op == "GlobalAveragePool") continue;
    ++by_op[op];
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
    EXPECT_EQ(t.template_name, op == "QLinearConv" ? "conv2d_nchwc_u8s8s32" : "matmul_u8s8s32");
    EXPECT_TRUE(occ.prologue.empty() && occ.fused.empty()) << occ.layer;
    EXPECT_EQ(t.args.at("relu"), "0") << t.key();  // a Relu is the output's range
  }
  EXPECT_EQ(by_op, (std::map<std::string, int64_t>{{"QLinearConv", 4}, {"QLinearMatMul", 1}}));
  const ModelTask& first = m.tasks[m.occurrences.front().task];
  EXPECT_EQ(first.args.at("data_zero_point"), "128") << first.key();
  for (const auto& u : m.unsupported)
    EXPECT_EQ(u.op.rfind("QLinear", 0), std::string::npos) << u.op << ": " << u.reason;
  const ModelTask& last = m.tasks[m.occurrences.back().task];
  EXPECT_EQ(last.key(), "matmul_u8s8s32(M=1,N=24,K=32,out=u8,scale=per_channel,relu=0)");
}

// ONNX Runtime's contrib operators of the QOperator form (QLinearAdd, ...) are refused at load
// with what ktune reads instead.
TEST(QdqTasks, ContribQLinearOperatorIsRefusedWithTheReason) {
  try {
    load_onnx(model("qop_contrib.onnx"));
    FAIL() << "loaded a model with com.microsoft::QLinearAdd";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("'com.microsoft::QLinearAdd' is an ONNX Runtime contrib "
                                         "operator of the QOperator form"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ktune::frontend
