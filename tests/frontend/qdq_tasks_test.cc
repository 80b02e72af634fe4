// Task extraction on the quantized models of scripts/make-test-models: each DequantizeLinear ->
// Conv | Gemm [-> Relu] -> QuantizeLinear, and each QLinearConv and QLinearMatMul, is one
// conv2d_nchwc_u8s8s32, depthwise_conv2d_nchwc_u8s8s32 or matmul_u8s8s32 task with its requantize
// epilogue and its DequantizeLinear nodes absorbed; a Conv that does not fuse runs in float32 and
// says why; uint8 residual Adds and max pools are generated uint8 kernels; the other
// QuantizeLinear / DequantizeLinear nodes are listed with their generated kernels.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

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
  // The input's QuantizeLinear and the final DequantizeLinear before the pool; the residual's
  // DequantizeLinear pair, Add, Relu and QuantizeLinear are one uint8 add.
  EXPECT_EQ(generated(m, "QuantizeLinear"), (std::map<std::string, int64_t>{{"quantize", 1}}));
  EXPECT_EQ(generated(m, "DequantizeLinear"), (std::map<std::string, int64_t>{{"dequantize", 1}}));
  EXPECT_EQ(generated(m, "Add"), (std::map<std::string, int64_t>{{"quantized_add", 1}}));
  EXPECT_EQ(generated(m, "Relu").size(), 0u);
  ASSERT_EQ(m.quantized_adds.size(), 1u);
  const QuantizedAdd& add = m.quantized_adds.front();
  EXPECT_TRUE(add.relu);
  EXPECT_EQ(add.prologue.size(), 2u);
  ASSERT_EQ(add.epilogue.size(), 2u);
  EXPECT_EQ(g.nodes[add.epilogue[0]].op, "Relu");
  EXPECT_EQ(g.nodes[add.epilogue[1]].op, "QuantizeLinear");
  EXPECT_EQ(g.type(add.a), "uint8");
  EXPECT_EQ(g.type(add.output), "uint8");
}

TEST(QdqTasks, ResNet18QdqRunsEveryConvInInt8) {
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
    }
  }
  // 16 block convs, 3 projections and the stem, whose 3 input channels are padded to 4.
  EXPECT_EQ(int8, 20);
  EXPECT_EQ(float_convs, 0);
  EXPECT_EQ(gemms, 1);
  EXPECT_EQ(m.quantized.size(), 21u);
  const ModelTask& stem = m.tasks[m.occurrences.front().task];
  EXPECT_EQ(stem.args.at("C"), "4") << stem.key();
  EXPECT_EQ(stem.note, "int8: requantized to uint8; input channels padded from 3 to 4");
  // Every weight and bias DequantizeLinear is an int8 kernel's. The 8 residual Adds (each with its
  // DequantizeLinear pair, Relu and QuantizeLinear) are uint8 adds, the max pool between DQ and Q
  // of one scale a uint8 pool, and so is DQ -> GlobalAveragePool -> Flatten -> Q (the Flatten a
  // view of its output); what remains is the input's QuantizeLinear and the output's
  // DequantizeLinear.
  EXPECT_EQ(generated(m, "DequantizeLinear"), (std::map<std::string, int64_t>{{"dequantize", 1}}));
  EXPECT_EQ(generated(m, "QuantizeLinear"), (std::map<std::string, int64_t>{{"quantize", 1}}));
  EXPECT_EQ(generated(m, "Add"), (std::map<std::string, int64_t>{{"quantized_add", 8}}));
  EXPECT_EQ(generated(m, "MaxPool"), (std::map<std::string, int64_t>{{"max_pool_u8", 1}}));
  EXPECT_EQ(generated(m, "GlobalAveragePool"),
            (std::map<std::string, int64_t>{{"global_average_pool_u8", 1}}));
  EXPECT_TRUE(generated(m, "Flatten").empty());
  EXPECT_EQ(generated(m, "Relu").size(), 0u);
  EXPECT_EQ(m.quantized_adds.size(), 8u);
  EXPECT_EQ(m.quantized_max_pools.size(), 1u);
  ASSERT_EQ(m.quantized_global_pools.size(), 1u);
  const QuantizedGlobalAveragePool& pool = m.quantized_global_pools.front();
  ASSERT_EQ(pool.epilogue.size(), 2u);
  EXPECT_EQ(g.nodes[pool.epilogue[0]].op, "Flatten");
  EXPECT_EQ(g.nodes[pool.epilogue[1]].op, "QuantizeLinear");
  EXPECT_EQ(g.shape(pool.output), (std::vector<int64_t>{1, 512}));
}

// A MobileNet-like block: the depthwise convs (one with 24 channels, a partial block) are
// depthwise_conv2d_nchwc_u8s8s32 tasks, the residual Add a uint8 add.
TEST(QdqTasks, QdqMobileRunsDepthwiseInInt8) {
  const Graph g = load_onnx(model("qdq_mobile.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  std::map<std::string, int64_t> by_template;
  for (const TaskOccurrence& occ : m.occurrences) {
    const ModelTask& t = m.tasks[occ.task];
    ++by_template[t.template_name];
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
    if (t.template_name == "depthwise_conv2d_nchwc_u8s8s32") {
      EXPECT_EQ(t.args.at("C"), "24");
      EXPECT_EQ(t.args.at("relu"), "1");
      EXPECT_EQ(t.args.at("out"), "u8");
      EXPECT_EQ(occ.prologue.size(), 3u) << occ.layer;
    }
  }
  EXPECT_EQ(by_template, (std::map<std::string, int64_t>{{"conv2d_nchwc_u8s8s32", 3},
                                                         {"depthwise_conv2d_nchwc_u8s8s32", 2}}));
  EXPECT_EQ(m.quantized.size(), 5u);
  EXPECT_EQ(generated(m, "Add"), (std::map<std::string, int64_t>{{"quantized_add", 1}}));
}

// A float32 bias (no DequantizeLinear) and an int8 output are the int8 kernels' too: the first
// conv's bias is rounded to its accumulator's scale, the second conv requantizes to int8.
TEST(QdqTasks, FloatBiasAndInt8OutputRunInInt8) {
  const Graph g = load_onnx(model("qdq_s8_bias.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  ASSERT_EQ(m.quantized.size(), 2u);
  EXPECT_TRUE(m.quantized[0].float_bias);
  EXPECT_FALSE(m.quantized[1].float_bias);
  ASSERT_EQ(m.occurrences.size(), 2u);
  const ModelTask& first = m.tasks[m.occurrences[0].task];
  const ModelTask& second = m.tasks[m.occurrences[1].task];
  EXPECT_EQ(first.status, TaskStatus::kOk) << first.key() << ": " << first.refused;
  EXPECT_EQ(second.status, TaskStatus::kOk) << second.key() << ": " << second.refused;
  EXPECT_EQ(first.note,
            "int8: requantized to uint8; float32 bias rounded to the accumulator's scale");
  EXPECT_EQ(first.args.at("out"), "u8");
  EXPECT_EQ(first.args.at("relu"), "1");
  EXPECT_EQ(second.note, "int8: requantized to int8");
  EXPECT_EQ(second.args.at("out"), "s8");
  EXPECT_EQ(second.args.at("relu"), "0");
  // The weights' DequantizeLinear of both, the second's bias' and data's.
  EXPECT_EQ(m.occurrences[0].prologue.size(), 2u);
  EXPECT_EQ(m.occurrences[1].prologue.size(), 3u);
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

// Weights with zero points other than 0: uint8 of zero point 128 and int8 and uint8 with a zero
// point per channel are int8 tasks (the model build subtracts the zero point); uint8 weights over
// [0, 255] of another zero point are an int8 task with input sums (weights less 128, the input
// window sums correcting); DQ -> GlobalAveragePool -> Q is a uint8 pool that absorbs both.
TEST(QdqTasks, WeightZeroPointsRunInInt8) {
  const Graph g = load_onnx(model("qdq_zp.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  ASSERT_EQ(m.quantized.size(), 4u);
  EXPECT_EQ(g.type(m.quantized[0].weight), "uint8");
  EXPECT_EQ(g.type(m.quantized[1].weight), "int8");
  EXPECT_EQ(g.type(m.quantized[2].weight), "uint8");
  for (size_t k : {0, 1, 3}) EXPECT_FALSE(m.quantized[k].input_sums) << k;
  EXPECT_TRUE(m.quantized[2].input_sums);
  EXPECT_EQ(m.quantized[2].weight_shift, 128);
  std::map<std::string, int64_t> by_template;
  int64_t with_sums = 0;
  for (const TaskOccurrence& occ : m.occurrences) {
    const ModelTask& t = m.tasks[occ.task];
    ++by_template[t.template_name];
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
    if (t.key().find("input_sums=1") == std::string::npos) continue;
    ++with_sums;
    EXPECT_EQ(t.key().rfind("conv2d_nchwc_u8s8s32(N=1,C=16,H=8,W=8,K=16,R=1,S=1,", 0), 0u)
        << t.key();
    EXPECT_NE(t.key().find(",out=u8,scale=per_channel,relu=1,input_sums=1)"), std::string::npos)
        << t.key();
    EXPECT_NE(t.note.find("weights shifted by 128 into int8, the input window sums correcting"),
              std::string::npos)
        << t.note;
  }
  EXPECT_EQ(with_sums, 1);
  EXPECT_EQ(by_template,
            (std::map<std::string, int64_t>{{"conv2d_nchwc_u8s8s32", 3}, {"matmul_u8s8s32", 1}}));
  ASSERT_EQ(m.quantized_global_pools.size(), 1u);
  const QuantizedGlobalAveragePool& pool = m.quantized_global_pools.front();
  ASSERT_EQ(pool.prologue.size(), 1u);
  ASSERT_EQ(pool.epilogue.size(), 1u);
  EXPECT_EQ(g.nodes[pool.prologue[0]].op, "DequantizeLinear");
  EXPECT_EQ(g.nodes[pool.epilogue[0]].op, "QuantizeLinear");
  EXPECT_EQ(g.type(pool.data), "uint8");
  EXPECT_EQ(generated(m, "GlobalAveragePool"),
            (std::map<std::string, int64_t>{{"global_average_pool_u8", 1}}));
}

// uint8 weights with a zero point per output channel spread over [28, 227]: each channel's weights
// lie within int8 of its own zero point, the whole tensor's range less the zero points' range does
// not (the check goes channel by channel, from the per-channel ranges read at load): the conv
// (channels along axis 0) and the MatMul (columns, axis 1) are int8 tasks.
TEST(QdqTasks, PerChannelZeroPointsFitChannelByChannel) {
  const Graph g = load_onnx(model("qdq_zp_channels.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  ASSERT_EQ(m.quantized.size(), 2u);
  for (const QuantizedOp& q : m.quantized) {
    const ByteRanges& w = g.byte_ranges.at(q.weight);
    const ByteRanges& z = g.byte_ranges.at(q.weight_zero_point);
    // Not by the whole ranges: w - z reaches past -128 there.
    EXPECT_LT(w.whole.first - z.whole.second, -128) << q.weight;
    const auto& channels = q.conv ? w.axis0 : w.axis1;
    ASSERT_EQ(channels.size(), z.axis0.size()) << q.weight;
    for (size_t k = 0; k < channels.size(); ++k) {
      EXPECT_EQ(z.axis0[k].first, z.axis0[k].second);  // one zero point per channel
      EXPECT_GE(channels[k].first - z.axis0[k].first, -128) << q.weight << " channel " << k;
      EXPECT_LE(channels[k].second - z.axis0[k].first, 127) << q.weight << " channel " << k;
    }
  }
  EXPECT_EQ(g.shape(m.quantized[0].weight), (std::vector<int64_t>{16, 8, 3, 3}));
  EXPECT_EQ(g.shape(m.quantized[1].weight), (std::vector<int64_t>{16, 24}));
  std::map<std::string, int64_t> by_template;
  for (const TaskOccurrence& occ : m.occurrences) {
    const ModelTask& t = m.tasks[occ.task];
    ++by_template[t.template_name];
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
  }
  EXPECT_EQ(by_template,
            (std::map<std::string, int64_t>{{"conv2d_nchwc_u8s8s32", 1}, {"matmul_u8s8s32", 1}}));
}

// The QOperator form of the same zero points: every QLinear operator an int8 task.
TEST(QdqTasks, QOperatorWeightZeroPointsRunInInt8) {
  const Graph g = load_onnx(model("qop_zp.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  ASSERT_EQ(m.quantized.size(), 3u);
  for (const auto& u : m.unsupported)
    EXPECT_EQ(u.op.rfind("QLinear", 0), std::string::npos) << u.op << ": " << u.reason;
  for (const TaskOccurrence& occ : m.occurrences) {
    const ModelTask& t = m.tasks[occ.task];
    if (g.nodes[occ.node].op == "GlobalAveragePool") continue;
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
    EXPECT_NE(t.template_name.find("u8s8s32"), std::string::npos) << t.key();
  }
}

// uint8 weights whose w - z_w is past int8 in both forms (a conv of 6 channels, a stride-2 conv of
// zero point 122, a matrix product): every one an int8 task with input_sums=1, no QLinear operator
// refused.
TEST(QdqTasks, WeightsPastInt8OfTheirZeroPointRunWithInputSums) {
  for (const char* name : {"qdq_zp_wide.onnx", "qop_zp_wide.onnx"}) {
    const Graph g = load_onnx(model(name));
    const ModelTasks m = extract_tasks(g, avx512());
    ASSERT_EQ(m.quantized.size(), 3u) << name;
    for (const QuantizedOp& q : m.quantized) {
      EXPECT_TRUE(q.input_sums) << name;
      EXPECT_EQ(q.weight_shift, 128) << name;
    }
    for (const auto& u : m.unsupported)
      EXPECT_EQ(u.op.rfind("QLinear", 0), std::string::npos) << name << u.op << ": " << u.reason;
    std::map<std::string, int64_t> by_template;
    for (const TaskOccurrence& occ : m.occurrences) {
      const ModelTask& t = m.tasks[occ.task];
      if (g.nodes[occ.node].op == "GlobalAveragePool") continue;
      ++by_template[t.template_name];
      EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
      EXPECT_NE(t.key().find(",input_sums=1)"), std::string::npos) << t.key();
    }
    EXPECT_EQ(by_template,
              (std::map<std::string, int64_t>{{"conv2d_nchwc_u8s8s32", 2}, {"matmul_u8s8s32", 1}}))
        << name;
  }
}

// Depthwise convs whose uint8 weights less their zero point are past int8 (zero point 122, and one
// per channel) in both forms: int8 tasks of depthwise_conv2d_nchwc_u8s8s32 with weights=s16 (w -
// z_w as int16, no input sums), the 1x1 convs around them unchanged, no QLinear operator refused.
// On Cortex-A76 (sdot) the int16 weights run no dot: no shift_data, which the 1x1 convs take.
TEST(QdqTasks, DepthwiseWeightsPastInt8RunWithInt16Weights) {
  const auto a76 = schedule_space::make_target_traits(
      "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76", "aarch64-linux-gnu", 128, 4);
  ASSERT_EQ(a76.int8_dot_insn, "sdot");
  for (const char* name : {"qdq_mobile_zp_wide.onnx", "qop_mobile_zp_wide.onnx"}) {
    const Graph g = load_onnx(model(name));
    for (const auto& traits : {avx512(), a76}) {
      const ModelTasks m = extract_tasks(g, traits);
      ASSERT_EQ(m.quantized.size(), 4u) << name;
      int wide = 0;
      for (const QuantizedOp& q : m.quantized) {
        EXPECT_FALSE(q.input_sums) << name;
        EXPECT_EQ(q.s16_weights, q.depthwise) << name;
        wide += q.s16_weights;
      }
      EXPECT_EQ(wide, 2) << name;
      for (const auto& u : m.unsupported)
        EXPECT_EQ(u.op.rfind("QLinear", 0), std::string::npos) << name << u.op << ": " << u.reason;
      std::map<std::string, int64_t> by_template;
      for (const TaskOccurrence& occ : m.occurrences) {
        const ModelTask& t = m.tasks[occ.task];
        ++by_template[t.template_name];
        EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
        const bool depthwise = t.template_name == "depthwise_conv2d_nchwc_u8s8s32";
        EXPECT_EQ(t.key().find(",weights=s16)") != std::string::npos, depthwise) << t.key();
        EXPECT_EQ(t.key().find("shift_data=1") != std::string::npos,
                  !depthwise && traits.int8_dot_insn == "sdot")
            << t.key();
      }
      EXPECT_EQ(by_template,
                (std::map<std::string, int64_t>{{"conv2d_nchwc_u8s8s32", 2},
                                                {"depthwise_conv2d_nchwc_u8s8s32", 2}}))
          << name;
    }
  }
}

// A weight zero point of 3 values for 16 output channels: one error naming the node.
TEST(QdqTasks, WeightZeroPointOfTheWrongShapeIsAnError) {
  const Graph g = load_onnx(model("qop_zp_shape.onnx"));
  try {
    extract_tasks(g, avx512());
    FAIL() << "took a weight zero point of 3 values for 16 channels";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("(QLinearConv): the weights' zero point"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("has 3 elements, the scale 16"), std::string::npos)
        << e.what();
  }
}

// ONNX Runtime's contrib operators QLinearAdd and QLinearGlobalAveragePool (domain com.microsoft)
// load with their shapes and are generated uint8 kernels.
TEST(QdqTasks, ContribQLinearAddAndGlobalPoolAreGenerated) {
  const Graph g = load_onnx(model("qop_contrib.onnx"));
  EXPECT_EQ(g.shape("sum"), (std::vector<int64_t>{1, 24, 8, 8}));
  EXPECT_EQ(g.type("sum"), "uint8");
  EXPECT_EQ(g.shape("pooled"), (std::vector<int64_t>{1, 24, 1, 1}));
  const ModelTasks m = extract_tasks(g, avx512());
  EXPECT_TRUE(m.tasks.empty());
  EXPECT_EQ(generated(m, "QLinearAdd"), (std::map<std::string, int64_t>{{"quantized_add", 1}}));
  EXPECT_EQ(generated(m, "QLinearGlobalAveragePool"),
            (std::map<std::string, int64_t>{{"global_average_pool_u8", 1}}));
  ASSERT_EQ(m.quantized_adds.size(), 1u);
  EXPECT_TRUE(m.quantized_adds[0].prologue.empty() && m.quantized_adds[0].epilogue.empty());
  EXPECT_FALSE(m.quantized_adds[0].relu);
  EXPECT_EQ(m.quantized_global_pools.size(), 1u);
}

// Other contrib operators of the QOperator form are refused at load with what ktune reads
// instead.
TEST(QdqTasks, OtherContribQLinearOperatorIsRefusedWithTheReason) {
  try {
    load_onnx(model("qop_refused.onnx"));
    FAIL() << "loaded a model with com.microsoft::QLinearLeakyRelu";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find(
                  "'com.microsoft::QLinearLeakyRelu' is an ONNX Runtime contrib operator of the "
                  "QOperator form; ktune reads QLinearConv, QLinearMatMul, QLinearAdd and "
                  "QLinearGlobalAveragePool of it"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ktune::frontend
