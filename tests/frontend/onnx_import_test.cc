// Tests of frontend/: ONNX loading (shapes, --input, bad files) and task extraction on the
// ResNet-18 and MobileNetV2-fragment models of scripts/make-test-models, checked against layer
// lists written out by hand here.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "frontend/graph_passes.h"
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

ErrorKind load_error(const std::string& path, const std::vector<InputShape>& inputs = {},
                     std::string* message = nullptr) {
  try {
    load_onnx(path, inputs);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << path << " loaded";
  return ErrorKind::kUnknown;
}

// One conv task as the hand count says: input C x H (square), K outputs, R x R kernel.
struct ConvRow {
  int64_t c, h, k, r, stride, pad;
  std::string epilogue;
  int64_t count;
};

std::map<std::string, std::string> conv_args(const ConvRow& r, int64_t n) {
  std::map<std::string, std::string> a = {{"N", std::to_string(n)},
                                          {"C", std::to_string(r.c)},
                                          {"H", std::to_string(r.h)},
                                          {"W", std::to_string(r.h)},
                                          {"K", std::to_string(r.k)},
                                          {"R", std::to_string(r.r)},
                                          {"S", std::to_string(r.r)},
                                          {"stride", std::to_string(r.stride)},
                                          {"pad", std::to_string(r.pad)},
                                          {"dilation", "1"},
                                          {"dtype", "float32"}};
  if (!r.epilogue.empty()) a["epilogue"] = r.epilogue;
  if (r.c == 3) a["ic_block"] = "1";  // the stem reads the image as given, one channel per block
  return a;
}

double conv_flop(const ConvRow& r, int64_t n) {
  const int64_t out = (r.h + 2 * r.pad - r.r) / r.stride + 1;
  return 2.0 * n * r.k * out * out * r.c * r.r * r.r;
}

// ResNet-18 by hand: the stem, then per stage (after the first) a strided 3x3, the 3x3 of the
// second conv of each block (with the residual add: 2 per stage), the 1x1 downsample, and the
// second block's first 3x3. Stage 1 has no downsample: its two kinds of 3x3 occur twice each.
std::vector<ConvRow> resnet18_convs() {
  std::vector<ConvRow> rows = {{3, 224, 64, 7, 2, 3, "bias_relu", 1},
                               {64, 56, 64, 3, 1, 1, "bias_relu", 2},
                               {64, 56, 64, 3, 1, 1, "bias_add_relu", 2}};
  int64_t c = 64, h = 56;
  for (int64_t k : {128, 256, 512}) {
    rows.push_back({c, h, k, 3, 2, 1, "bias_relu", 1});
    rows.push_back({k, h / 2, k, 3, 1, 1, "bias_add_relu", 2});
    rows.push_back({c, h, k, 1, 2, 0, "bias", 1});
    rows.push_back({k, h / 2, k, 3, 1, 1, "bias_relu", 1});
    c = k;
    h /= 2;
  }
  return rows;
}

// The tasks without the other algorithms listed for them (alternative_of), in order.
ModelTasks without_alternatives(const ModelTasks& all) {
  ModelTasks m = all;
  m.tasks.clear();
  for (const auto& t : all.tasks)
    if (!t.alternative_of) m.tasks.push_back(t);
  return m;
}

void expect_resnet18_tasks(const ModelTasks& all, int64_t n) {
  // Each of the 8 workloads of 3x3 stride-1 convs has Winograd as another algorithm, right after
  // it, with its count, its layers and its (direct) FLOPs: F(4x4) on outputs of 14 and more, and
  // F(2x2) then F(4x4) on the 7x7 outputs.
  int alternatives = 0;
  size_t primary = 0;
  for (size_t i = 0; i < all.tasks.size(); ++i) {
    const ModelTask& t = all.tasks[i];
    if (!t.alternative_of) {
      primary = i;
      continue;
    }
    ++alternatives;
    ASSERT_EQ(*t.alternative_of, primary) << t.key();
    const ModelTask& of = all.tasks[primary];
    EXPECT_EQ(t.template_name, "conv2d_winograd_nchwc");
    EXPECT_EQ(of.args.at("R"), "3");
    EXPECT_EQ(of.args.at("stride"), "1");
    const bool small = of.args.at("H") == "7";
    EXPECT_EQ(t.args.at("m"), small && i == primary + 1 ? "2" : "4") << t.key();
    EXPECT_LE(i, primary + (small ? 2 : 1)) << t.key();
    EXPECT_EQ(t.count, of.count);
    EXPECT_EQ(t.layers, of.layers);
    EXPECT_DOUBLE_EQ(t.flop, of.flop);
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.refused;
  }
  EXPECT_EQ(alternatives, 10);
  const ModelTasks m = without_alternatives(all);
  EXPECT_DOUBLE_EQ(all.total_flop(), m.total_flop());
  const std::vector<ConvRow> convs = resnet18_convs();
  ASSERT_EQ(convs.size(), 15u);
  // 15 distinct convs + max pool + global avg pool + the classifier's Gemm.
  ASSERT_EQ(m.tasks.size(), 18u);
  int64_t conv_layers = 0;
  double flop = 0;
  // Order of first occurrence: stem, max pool, then the convs in the order above.
  for (size_t i = 0; i < convs.size(); ++i) {
    const ModelTask& t = m.tasks[i == 0 ? 0 : i + 1];
    SCOPED_TRACE(t.key());
    EXPECT_EQ(t.template_name, "conv2d_nchwc");
    EXPECT_EQ(t.args, conv_args(convs[i], n));
    EXPECT_EQ(t.epilogue, convs[i].epilogue);
    EXPECT_EQ(t.count, convs[i].count);
    EXPECT_DOUBLE_EQ(t.flop, conv_flop(convs[i], n));
    conv_layers += t.count;
    flop += t.flop * static_cast<double>(t.count);
  }
  EXPECT_EQ(conv_layers, 20);  // 1 stem + 16 in the basic blocks + 3 downsamples
  // A 3x3 conv of stage 1: 2 * N * 64 outputs channels * 56 * 56 * (64 * 3 * 3) inputs.
  EXPECT_DOUBLE_EQ(m.tasks[2].flop, 2.0 * n * 64 * 56 * 56 * 64 * 9);
  EXPECT_DOUBLE_EQ(m.tasks[2].flop, n * 231211008.0);

  const ModelTask& pool = m.tasks[1];
  EXPECT_EQ(pool.template_name, "max_pool2d");
  EXPECT_EQ(pool.key(), "max_pool2d(N=" + std::to_string(n) +
                            ",C=64,H=112,W=112,R=3,S=3,stride=2,pad=1,dtype=float32)");
  EXPECT_DOUBLE_EQ(pool.flop, n * 64.0 * 56 * 56 * 9);
  const ModelTask& gap = m.tasks[16];
  EXPECT_EQ(gap.key(), "avg_pool2d(N=" + std::to_string(n) +
                           ",C=512,H=7,W=7,R=7,S=7,stride=1,pad=0,dtype=float32)");
  const ModelTask& fc = m.tasks[17];
  EXPECT_EQ(fc.key(), "matmul(M=" + std::to_string(n) +
                          ",N=1000,K=512,layout=nt,dtype=float32,epilogue=bias)");
  EXPECT_DOUBLE_EQ(fc.flop, 2.0 * n * 1000 * 512);
  flop += fc.flop;
  // ResNet-18's well-known ~1.8 GMAC per image (convs and classifier).
  EXPECT_NEAR(flop / n / 2, 1.814e9, 0.002e9);

  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_EQ(m.unsupported[0].op, "Flatten");
  EXPECT_EQ(m.unsupported[0].count, 1);
  EXPECT_EQ(m.unsupported[0].reason, "layout only (no kernel)");
}

TEST(OnnxImport, ResNet18TasksMatchTheHandCount) {
  const Graph g = load_onnx(model("resnet18.onnx"));
  EXPECT_EQ(g.inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(g.shape(g.outputs.at(0)), (std::vector<int64_t>{1, 1000}));
  const ModelTasks m = extract_tasks(g, avx512());
  expect_resnet18_tasks(m, 1);

  // Every task is either accepted as listed or says why not; what the templates take today is
  // tuned (the stem: C=3 is no multiple of ic_block=16, conv2d substitutes).
  for (const auto& t : m.tasks) {
    SCOPED_TRACE(t.key());
    if (t.status != TaskStatus::kOk) {
      EXPECT_FALSE(t.refused.empty());
    }
    EXPECT_EQ(t.tunable.has_value(), t.status != TaskStatus::kRefused);
    if (t.template_name != "matmul") {
      EXPECT_NE(t.status, TaskStatus::kRefused);
    }
  }
  EXPECT_EQ(m.tasks[0].status == TaskStatus::kSubstitute,
            m.tasks[0].tunable->template_name() == "conv2d");
  const nlohmann::json j = to_json(without_alternatives(m));
  EXPECT_EQ(j["tasks"].size(), 18u);
  EXPECT_EQ(j["tasks"][2]["count"], 2);
  EXPECT_EQ(j["unsupported"][0]["op"], "Flatten");
}

TEST(OnnxImport, SymbolicBatchNeedsInput) {
  std::string message;
  EXPECT_EQ(load_error(model("resnet18_dynamic.onnx"), {}, &message), ErrorKind::kInvalidArgument);
  // The example fills the symbolic batch with 1 and keeps the known dimensions.
  EXPECT_NE(message.find("input 'input' has a symbolic shape (Nx3x224x224); give it with --input "
                         "input=<dims, e.g. 1x3x224x224: 1 for each symbolic dimension, or the "
                         "size the model is used at>"),
            std::string::npos)
      << message;
  // A misspelled name is named, with the model's inputs, rather than ignored.
  EXPECT_EQ(load_error(model("resnet18_dynamic.onnx"), {parse_input_shape("inptu=1x3x224x224")},
                       &message),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("--input inptu: the model has no such input (its inputs: input)"),
            std::string::npos)
      << message;
  const Graph g =
      load_onnx(model("resnet18_dynamic.onnx"), {parse_input_shape("input=2x3x224x224")});
  expect_resnet18_tasks(extract_tasks(g, avx512()), 2);

  EXPECT_EQ(
      load_error(model("resnet18_dynamic.onnx"), {parse_input_shape("input=2x3x224")}, &message),
      ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("rank 4"), std::string::npos) << message;
  // A fixed shape is overridden: a batch of 3 of 112x112 images through the same layers.
  const ModelTasks small = without_alternatives(extract_tasks(
      load_onnx(model("resnet18.onnx"), {parse_input_shape("input=3x3x112x112")}), avx512()));
  ASSERT_EQ(small.tasks.size(), 18u);
  EXPECT_EQ(small.tasks[2].key(),
            "conv2d_nchwc(N=3,C=64,H=28,W=28,K=64,R=3,S=3,stride=1,pad=1,dilation=1,"
            "dtype=float32,epilogue=bias_relu)");
  EXPECT_EQ(small.tasks[17].key(),
            "matmul(M=3,N=1000,K=512,layout=nt,dtype=float32,epilogue=bias)");
  EXPECT_EQ(load_error(model("resnet18.onnx"), {parse_input_shape("image=1x3x224x224")}, &message),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("no such input"), std::string::npos) << message;
}

TEST(OnnxImport, MobileNetV2DepthwiseTasks) {
  const ModelTasks m = extract_tasks(load_onnx(model("mobilenetv2_frag.onnx")), avx512());
  std::vector<std::string> depthwise;
  for (const auto& t : m.tasks)
    if (t.template_name == "depthwise_conv2d_nchwc") {
      depthwise.push_back(t.key());
      EXPECT_EQ(t.count, 1);
      EXPECT_EQ(t.status, TaskStatus::kOk) << t.refused;
      EXPECT_EQ(t.layers.size(), 3u);  // Conv, BatchNormalization, Clip
    }
  EXPECT_EQ(depthwise,
            (std::vector<std::string>{"depthwise_conv2d_nchwc(N=1,C=32,H=112,W=112,R=3,S=3,stride="
                                      "1,pad=1,dilation=1,dtype=float32,epilogue=bias_relu6)",
                                      "depthwise_conv2d_nchwc(N=1,C=96,H=112,W=112,R=3,S=3,stride="
                                      "2,pad=1,dilation=1,dtype=float32,epilogue=bias_relu6)",
                                      "depthwise_conv2d_nchwc(N=1,C=144,H=56,W=56,R=3,S=3,stride=1,"
                                      "pad=1,dilation=1,dtype=float32,epilogue=bias_relu6)"}));
  // 2 * C * OH * OW * 3 * 3 for the first one (a task's FLOPs leave its epilogue out).
  EXPECT_DOUBLE_EQ(m.tasks[1].flop, 2.0 * 32 * 112 * 112 * 9);
  EXPECT_EQ(m.tasks[1].template_name, "depthwise_conv2d_nchwc");
  // stem + 3 depthwise + 5 pointwise (the last one takes the block's residual add), all distinct.
  ASSERT_EQ(m.tasks.size(), 9u);
  EXPECT_EQ(m.tasks.back().key(),
            "conv2d_nchwc(N=1,C=144,H=56,W=56,K=24,R=1,S=1,stride=1,pad=0,dilation=1,"
            "dtype=float32,epilogue=bias_add)");
  for (const auto& t : m.tasks)
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.key() << ": " << t.refused;
  // ReLU6 (Clip with initializer bounds) is fused into every conv before it: nothing is left.
  EXPECT_TRUE(m.unsupported.empty());
}

TEST(OnnxImport, GroupedConvGemmMatMulAndStatedReasons) {
  // As builds read it: the Constant node that holds the BN's scale folded away.
  const ModelTasks m = extract_tasks(load_model(model("mixed_ops.onnx")).graph, avx512());
  ASSERT_EQ(m.tasks.size(), 4u);
  // Conv 32 -> 64, group 4: no task (no template binds a group's data and weights), a generated
  // conv with its BN (scale from a Constant node) and Relu.
  ASSERT_EQ(m.generated_convs.size(), 1u);
  EXPECT_EQ(m.generated_convs[0].epilogue.steps, "bias_relu");
  EXPECT_EQ(m.generated_convs[0].epilogue.nodes.size(), 2u);
  EXPECT_EQ(m.generated_convs[0].pads, (std::vector<int64_t>{1, 1, 1, 1}));
  // The 1x1 conv padded 0, 0, 1, 1 (top, left, bottom, right): the task takes the sides that
  // differ from the rows above (pad) as its own arguments, on the 16 x 16 input.
  EXPECT_EQ(m.tasks[0].key(),
            "conv2d_nchwc(N=1,C=64,H=16,W=16,K=64,R=1,S=1,stride=1,pad=0,dilation=1,"
            "pad_bottom=1,pad_right=1,dtype=float32)");
  EXPECT_DOUBLE_EQ(m.tasks[0].flop, 2.0 * 64 * 17 * 17 * 64);
  ASSERT_TRUE(m.tasks[0].tunable.has_value());
  EXPECT_EQ(m.tasks[0].status, TaskStatus::kOk) << m.tasks[0].refused;
  EXPECT_EQ(m.tasks[1].key(),
            "avg_pool2d(N=1,C=64,H=16,W=16,R=16,S=16,stride=1,pad=0,dtype=float32)");
  // Gemm (transB) + bias + Relu is dense_bias_relu, whose epilogue is built in.
  EXPECT_EQ(m.tasks[2].key(), "dense_bias_relu(M=1,N=32,K=64,dtype=float32)");
  EXPECT_EQ(m.tasks[2].epilogue, "");
  EXPECT_DOUBLE_EQ(m.tasks[2].flop, 2.0 * 32 * 64);
  EXPECT_EQ(m.tasks[3].key(), "matmul(M=1,N=16,K=32,layout=nn,dtype=float32)");
  ASSERT_EQ(m.unsupported.size(), 3u);
  EXPECT_EQ(m.unsupported[0].op, "Conv");
  EXPECT_EQ(m.unsupported[0].reason, "a conv of 4 groups, not depthwise");
  EXPECT_EQ(m.unsupported[0].generated, "conv_blocked");
  EXPECT_EQ(m.unsupported[0].layers, (std::vector<std::string>{"conv_2+bn_7+relu_9"}));
  EXPECT_EQ(m.unsupported[1].op, "AveragePool");
  EXPECT_EQ(m.unsupported[1].reason, "average excluding padding (count_include_pad=0)");
  EXPECT_EQ(m.unsupported[1].generated, "pool");
  EXPECT_EQ(m.unsupported[2].op, "Flatten");
}

TEST(OnnxImport, BadFilesAreOneTypedError) {
  std::string message;
  EXPECT_EQ(load_error(model("not_onnx.onnx"), {}, &message), ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("not an ONNX model"), std::string::npos) << message;
  EXPECT_EQ(load_error(model("truncated.onnx"), {}, &message), ErrorKind::kInvalidArgument);
  EXPECT_EQ(load_error(model("bad_opset.onnx"), {}, &message), ErrorKind::kUnsupported);
  EXPECT_NE(message.find("opset 999"), std::string::npos) << message;
  EXPECT_EQ(load_error(model("unknown_domain.onnx"), {}, &message), ErrorKind::kUnsupported);
  EXPECT_NE(message.find("com.example::FancyOp"), std::string::npos) << message;
  EXPECT_EQ(load_error(testing_models::missing("missing.onnx"), {}, &message),
            ErrorKind::kNotFound);
  for (const char* m :
       {"not_onnx.onnx", "truncated.onnx", "bad_opset.onnx", "unknown_domain.onnx"}) {
    load_error(model(m), {}, &message);
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(OnnxImport, InputShapeText) {
  const InputShape s = parse_input_shape("data=1x3x224x224");
  EXPECT_EQ(s.name, "data");
  EXPECT_EQ(s.dims, (std::vector<int64_t>{1, 3, 224, 224}));
  for (const char* bad : {"data", "=1x3", "data=", "data=1x", "data=1xx3", "data=0x3", "data=-1x3",
                          "data=1x3.5", "data=99999999999999999999"}) {
    try {
      parse_input_shape(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << bad;
    }
  }
}

// A tuning server rebuilds a client's tasks from their JSON for its devices' target: the listed
// tasks come back as they were, and the tuned forms are those extract_tasks gives on that target.
TEST(OnnxImport, TasksFromJsonAreDecidedAgainOnTheReadersTarget) {
  const Graph graph = load_onnx(model("mixed_ops.onnx"));
  const ModelTasks here = extract_tasks(graph, avx512());
  const auto neon = schedule_space::make_target_traits("neon", "aarch64-linux-gnu", 128, 4);
  const ModelTasks there = extract_tasks(graph, neon);
  for (const auto& [traits, expected] : {std::pair{avx512(), &here}, std::pair{neon, &there}}) {
    const ModelTasks m = tasks_from_json(to_json(here), traits);
    EXPECT_EQ(m.model, expected->model);
    ASSERT_EQ(m.tasks.size(), expected->tasks.size());
    for (size_t i = 0; i < m.tasks.size(); ++i) {
      const ModelTask& a = m.tasks[i];
      const ModelTask& b = expected->tasks[i];
      EXPECT_EQ(a.key(), b.key());
      EXPECT_EQ(a.count, b.count);
      EXPECT_DOUBLE_EQ(a.flop, b.flop);
      EXPECT_EQ(a.layers, b.layers);
      // Each occurrence's layer label travels too (a server's model job names its layers).
      EXPECT_EQ(m.layers_of(i), expected->layers_of(i)) << a.key();
      EXPECT_EQ(m.layers_of(i).size(), static_cast<size_t>(a.count)) << a.key();
      EXPECT_EQ(a.status, b.status) << a.key();
      ASSERT_EQ(a.tunable.has_value(), b.tunable.has_value()) << a.key();
      if (a.tunable) {
        EXPECT_EQ(a.tunable->workload_key(), b.tunable->workload_key());
      }
    }
    ASSERT_EQ(m.unsupported.size(), expected->unsupported.size());
    for (size_t i = 0; i < m.unsupported.size(); ++i) {
      EXPECT_EQ(m.unsupported[i].op, expected->unsupported[i].op);
      EXPECT_EQ(m.unsupported[i].count, expected->unsupported[i].count);
    }
  }
  auto kind = [](const nlohmann::json& j) {
    try {
      tasks_from_json(j, avx512());
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kUnknown;
  };
  nlohmann::json no_count = to_json(here);
  no_count["tasks"][0].erase("count");
  EXPECT_EQ(kind(no_count), ErrorKind::kInvalidArgument);
  nlohmann::json zero = to_json(here);
  zero["tasks"][0]["count"] = 0;
  EXPECT_EQ(kind(zero), ErrorKind::kInvalidArgument);
  nlohmann::json huge = to_json(here);
  huge["tasks"][0]["count"] = 1.8888e72;  // a float, not cast
  EXPECT_EQ(kind(huge), ErrorKind::kInvalidArgument);
  nlohmann::json extra = to_json(here);  // more occurrence labels than the count
  extra["tasks"][0]["occurrences"].push_back("another");
  EXPECT_EQ(kind(extra), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind(nlohmann::json::array()), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind({{"model", "m"}}), ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace ktune::frontend
