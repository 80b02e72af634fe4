// Task extraction on the MobileNet-family models of scripts/make-test-models (BN after every conv,
// ReLU6 as Clip, depthwise convs, residual Adds, HardSwish and SiLU): every conv fused with its
// epilogue and accepted as listed, the depthwise ones on depthwise_conv2d_nchwc, counts and the
// fused nodes in each task's layers, against lists written out here from the architectures.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"
#include "tests/frontend/test_models.h"

namespace ktune::frontend {
namespace {

using testing_models::model;

schedule_space::TargetTraits avx512() {
  return schedule_space::make_target_traits("test", "x86_64-linux-gnu", 512, 1);
}

std::string s(int64_t v) { return std::to_string(v); }

// Keys as ModelTask::key() writes them: the shape in declared order, dtype, then the epilogue.
// `stem`: the conv reads the graph input as the model gives it, one channel per block.
std::string conv_key(int64_t c, int64_t h, int64_t k, int64_t r, int64_t stride, int64_t pad,
                     const std::string& epi, bool stem = false) {
  return "conv2d_nchwc(N=1,C=" + s(c) + ",H=" + s(h) + ",W=" + s(h) + ",K=" + s(k) + ",R=" + s(r) +
         ",S=" + s(r) + ",stride=" + s(stride) + ",pad=" + s(pad) + ",dilation=1," +
         (stem ? "ic_block=1," : "") + "dtype=float32,epilogue=" + epi + ")";
}

std::string dw_key(int64_t c, int64_t h, int64_t stride, const std::string& epi) {
  return "depthwise_conv2d_nchwc(N=1,C=" + s(c) + ",H=" + s(h) + ",W=" + s(h) +
         ",R=3,S=3,stride=" + s(stride) + ",pad=1,dilation=1,dtype=float32,epilogue=" + epi + ")";
}

// What a model should give: each task's key, its count and the operators of one occurrence
// (the anchor, then the fused nodes).
struct Expected {
  std::map<std::string, int64_t> count;
  std::map<std::string, std::vector<std::string>> ops;
  double macs = 0;  // multiply-adds of the convs and the classifier (0: not compared)
  void add(const std::string& key, std::vector<std::string> o, double m = 0) {
    ++count[key];
    ops[key] = std::move(o);
    macs += m;
  }
};

const std::vector<std::string> kConvBnClip = {"Conv", "BatchNormalization", "Clip"};

// Stem conv, global average pool and classifier of both MobileNets.
void add_stem(Expected& e) {
  e.add(conv_key(3, 224, 32, 3, 2, 1, "bias_relu6", true), kConvBnClip, 112.0 * 112 * 32 * 3 * 9);
}
void add_head(Expected& e, int64_t c) {
  e.add("avg_pool2d(N=1,C=" + s(c) + ",H=7,W=7,R=7,S=7,stride=1,pad=0,dtype=float32)",
        {"GlobalAveragePool"});
  e.add("matmul(M=1,N=1000,K=" + s(c) + ",layout=nt,dtype=float32,epilogue=bias)", {"Gemm"},
        1000.0 * c);
}

Expected mobilenetv1_expected() {
  Expected e;
  add_stem(e);
  int64_t c = 32, h = 112;
  const std::vector<std::pair<int64_t, int64_t>> blocks = {
      {64, 1},  {128, 2}, {128, 1}, {256, 2}, {256, 1},  {512, 2}, {512, 1},
      {512, 1}, {512, 1}, {512, 1}, {512, 1}, {1024, 2}, {1024, 1}};
  for (const auto& [k, stride] : blocks) {
    const int64_t oh = stride == 2 ? h / 2 : h;
    e.add(dw_key(c, h, stride, "bias_relu6"), kConvBnClip, 9.0 * c * oh * oh);
    e.add(conv_key(c, oh, k, 1, 1, 0, "bias_relu6"), kConvBnClip, 1.0 * c * k * oh * oh);
    c = k, h = oh;
  }
  add_head(e, 1024);
  return e;
}

Expected mobilenetv2_expected() {
  Expected e;
  add_stem(e);
  int64_t c = 32, h = 112;
  struct Stage {
    int64_t t, k, n, s;
  };
  for (const Stage& st : std::vector<Stage>{{1, 16, 1, 1},
                                            {6, 24, 2, 2},
                                            {6, 32, 3, 2},
                                            {6, 64, 4, 2},
                                            {6, 96, 3, 1},
                                            {6, 160, 3, 2},
                                            {6, 320, 1, 1}}) {
    for (int64_t i = 0; i < st.n; ++i) {
      const int64_t stride = i == 0 ? st.s : 1, hidden = c * st.t, oh = stride == 2 ? h / 2 : h;
      if (st.t != 1)
        e.add(conv_key(c, h, hidden, 1, 1, 0, "bias_relu6"), kConvBnClip, 1.0 * c * hidden * h * h);
      e.add(dw_key(hidden, h, stride, "bias_relu6"), kConvBnClip, 9.0 * hidden * oh * oh);
      // The linear bottleneck takes the block's residual Add when the shapes allow one.
      const bool residual = stride == 1 && c == st.k;
      e.add(conv_key(hidden, oh, st.k, 1, 1, 0, residual ? "bias_add" : "bias"),
            residual ? std::vector<std::string>{"Conv", "BatchNormalization", "Add"}
                     : std::vector<std::string>{"Conv", "BatchNormalization"},
            1.0 * hidden * st.k * oh * oh);
      c = st.k, h = oh;
    }
  }
  e.add(conv_key(320, 7, 1280, 1, 1, 0, "bias_relu6"), kConvBnClip, 320.0 * 1280 * 49);
  add_head(e, 1280);
  return e;
}

// The task list against the expectation: keys and counts, every task accepted as listed, each
// task's layers the operators of its occurrences in order, and every node of the graph listed
// exactly once (in a task or as unsupported: nothing dropped, nothing counted twice).
void expect_tasks(const Graph& g, const ModelTasks& m, const Expected& e) {
  std::map<std::string, std::string> op_of;
  for (const auto& n : g.nodes) op_of[n.name] = n.op;
  std::map<std::string, int64_t> got;
  std::multiset<std::string> listed;
  double flop = 0;
  for (const auto& t : m.tasks) {
    SCOPED_TRACE(t.key());
    if (t.alternative_of) {  // another algorithm for the task it names: Winograd for a 3x3 conv
      EXPECT_EQ(t.template_name, "conv2d_winograd_nchwc");
      EXPECT_EQ(m.tasks[*t.alternative_of].args.at("R"), "3");
      EXPECT_EQ(t.count, m.tasks[*t.alternative_of].count);
      continue;
    }
    got[t.key()] = t.count;
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.refused;
    ASSERT_TRUE(t.tunable.has_value());
    EXPECT_EQ(t.tunable->template_name(), t.template_name);
    auto ops = e.ops.find(t.key());
    if (ops == e.ops.end()) continue;  // reported by the key comparison below
    ASSERT_EQ(t.layers.size(), ops->second.size() * static_cast<size_t>(t.count));
    for (size_t i = 0; i < t.layers.size(); ++i) {
      EXPECT_EQ(op_of[t.layers[i]], ops->second[i % ops->second.size()]) << t.layers[i];
      listed.insert(t.layers[i]);
    }
    flop += t.flop * static_cast<double>(t.count);
  }
  EXPECT_EQ(got, e.count);
  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_EQ(m.unsupported[0].op, "Flatten");
  listed.insert(m.unsupported[0].layers.begin(), m.unsupported[0].layers.end());
  EXPECT_EQ(listed.size(), g.nodes.size());
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()).size(), listed.size());
  // The templates' FLOPs of the convs and the classifier (pooling adds its window sums, the
  // epilogues a few operations per output): within 1% of the multiply-adds counted here.
  if (e.macs > 0) {
    EXPECT_NEAR(flop / 2, e.macs, e.macs * 0.01);
  }
}

TEST(MobileTasks, MobileNetV1) {
  const Graph g = load_onnx(model("mobilenetv1.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  const Expected e = mobilenetv1_expected();
  ASSERT_EQ(e.count.size(), 21u);  // stem, 9 depthwise and 9 pointwise shapes, pool, classifier
  expect_tasks(g, m, e);
  EXPECT_EQ(m.tasks.size(), 21u);
  // 27 convs (13 of them depthwise, 5 of those one shape), as MobileNetV1's ~569 million MACs.
  EXPECT_EQ(m.tasks[1].key(), dw_key(32, 112, 1, "bias_relu6"));
  EXPECT_EQ(e.count.at(dw_key(512, 14, 1, "bias_relu6")), 5);
  EXPECT_NEAR(e.macs, 569e6, 1e6);
}

TEST(MobileTasks, MobileNetV2) {
  const Graph g = load_onnx(model("mobilenetv2.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  const Expected e = mobilenetv2_expected();
  expect_tasks(g, m, e);
  int64_t convs = 0, residuals = 0;
  for (const auto& t : m.tasks) {
    if (t.template_name == "conv2d_nchwc" || t.template_name == "depthwise_conv2d_nchwc")
      convs += t.count;
    if (t.epilogue == "bias_add") residuals += t.count;
  }
  EXPECT_EQ(convs, 52);      // stem, 16 expansions, 17 depthwise, 17 projections, the 1x1 to 1280
  EXPECT_EQ(residuals, 10);  // every Add of the model fused into a projection
  EXPECT_NEAR(e.macs, 300e6, 2e6);  // MobileNetV2's ~300 million MACs
}

TEST(MobileTasks, SmallMobileFusesEveryActivation) {
  const Graph g = load_onnx(model("small_mobile.onnx"));
  const ModelTasks m = extract_tasks(g, avx512());
  Expected e;
  e.add(conv_key(8, 16, 16, 3, 1, 1, "bias_relu6", true), kConvBnClip);
  e.add(dw_key(16, 16, 1, "bias_relu6"), kConvBnClip);
  e.add(conv_key(16, 16, 8, 1, 1, 0, "bias_add"), {"Conv", "BatchNormalization", "Add"});
  e.add(conv_key(8, 16, 16, 1, 1, 0, "bias_hardswish"),
        {"Conv", "BatchNormalization", "HardSwish"});
  e.add(dw_key(16, 16, 2, "bias_silu"), {"Conv", "BatchNormalization", "Sigmoid", "Mul"});
  e.add(conv_key(16, 8, 16, 1, 1, 0, "bias_hardswish"),
        {"Conv", "BatchNormalization", "HardSigmoid", "Mul"});
  const std::string clip_key =
      "conv2d_nchwc(N=1,C=16,H=8,W=8,K=8,R=1,S=1,stride=1,pad=0,dilation=1,dtype=float32,"
      "epilogue=bias_clip,clip_min=-1,clip_max=1)";
  e.add(clip_key, {"Conv", "Clip"});
  e.add("avg_pool2d(N=1,C=8,H=8,W=8,R=8,S=8,stride=1,pad=0,dtype=float32)", {"GlobalAveragePool"});
  e.add("matmul(M=1,N=10,K=8,layout=nn,dtype=float32,epilogue=bias_relu6)",
        {"MatMul", "Add", "Clip"});
  expect_tasks(g, m, e);
  // 9 tasks and Winograd as another algorithm for the 3x3 conv (task 0).
  ASSERT_EQ(m.tasks.size(), 10u);
  EXPECT_EQ(m.tasks[1].alternative_of, 0u);
  EXPECT_EQ(m.tasks[1].key(),
            "conv2d_winograd_nchwc(N=1,C=8,H=16,W=16,K=16,R=3,S=3,stride=1,pad=1,dilation=1,m=4,"
            "dtype=float32,epilogue=bias_relu6)");
  // The clip bounds reach the tuned workload, whose key names them in the template's order.
  EXPECT_EQ(m.tasks[7].key(), clip_key);
  EXPECT_EQ(
      m.tasks[7].tunable->workload_key(),
      "conv2d_nchwc(N=1,C=16,H=8,W=8,K=8,R=1,S=1,stride=1,pad=0,dilation=1,ic_block=16,oc_block=8,"
      "epilogue=bias_clip,clip_min=-1,clip_max=1,dtype=float32)");
  EXPECT_EQ(m.tasks[2].tunable->workload_key(),
            "depthwise_conv2d_nchwc(N=1,C=16,H=16,W=16,R=3,S=3,stride=1,pad=1,dilation=1,block=16,"
            "epilogue=bias_relu6,dtype=float32)");

  // The JSON a tuning server reads gives the same tasks, clip bounds included.
  const ModelTasks back = tasks_from_json(to_json(m), avx512());
  ASSERT_EQ(back.tasks.size(), m.tasks.size());
  for (size_t i = 0; i < m.tasks.size(); ++i) {
    SCOPED_TRACE(m.tasks[i].key());
    EXPECT_EQ(back.tasks[i].args, m.tasks[i].args);
    EXPECT_EQ(back.tasks[i].epilogue, m.tasks[i].epilogue);
    EXPECT_EQ(back.tasks[i].layers, m.tasks[i].layers);
    EXPECT_EQ(back.tasks[i].alternative_of, m.tasks[i].alternative_of);
    EXPECT_EQ(back.tasks[i].status, TaskStatus::kOk);
    ASSERT_TRUE(back.tasks[i].tunable.has_value());
    EXPECT_EQ(back.tasks[i].tunable->workload_key(), m.tasks[i].tunable->workload_key());
  }
}

}  // namespace
}  // namespace ktune::frontend
