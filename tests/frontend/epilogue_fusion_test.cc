// The fusion rules of extract_tasks on graphs built here node by node (no ONNX file): Clip's
// bounds from attributes (opset 6) or constant inputs, what is left unfused and why, activations
// after Gemm and MatMul + Add, the channel block that lets a Concat's producers write in place.
#include <gtest/gtest.h>

#include <algorithm>

#include <map>
#include <string>
#include <vector>

#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"

namespace ktune::frontend {
namespace {

schedule_space::TargetTraits avx512() {
  return schedule_space::make_target_traits("test", "x86_64-linux-gnu", 512, 1);
}

// A graph under construction: input x [1, 8, 6, 6] -> Conv 8 -> 8 (3x3, pad 1, with bias) -> ...
struct GraphBuilder {
  Graph g;
  explicit GraphBuilder(int64_t opset, const std::vector<int64_t>& input = {1, 8, 6, 6}) {
    g.name = "fusion";
    g.opset = opset;
    g.inputs = {"x"};
    g.shapes["x"] = input;
  }
  std::string constant(const std::string& name, std::vector<int64_t> shape,
                       std::vector<double> values = {}) {
    g.constants.insert(name);
    g.shapes[name] = std::move(shape);
    if (!values.empty()) g.values[name] = std::move(values);
    return name;
  }
  // Adds a node whose single output has `shape`; returns the output's name.
  std::string node(const std::string& op, std::vector<std::string> inputs,
                   std::vector<int64_t> shape, std::map<std::string, Attribute> attrs = {}) {
    const std::string out = op + "_" + std::to_string(g.nodes.size());
    g.nodes.push_back({op, "", out, std::move(inputs), {out}, std::move(attrs)});
    g.shapes[out] = std::move(shape);
    return out;
  }
  // A 1x1 conv: one task per anchor (a 3x3 one would also list its Winograd alternative).
  std::string conv(const std::string& in) {
    const std::string w = constant("w" + std::to_string(g.nodes.size()), {8, 8, 1, 1});
    const std::string b = constant("b" + std::to_string(g.nodes.size()), {8});
    return node("Conv", {in, w, b}, {1, 8, 6, 6});
  }
  ModelTasks finish(const std::string& out) {
    g.outputs = {out};
    return extract_tasks(g, avx512());
  }
};

Attribute f(float v) { return {{}, {v}, ""}; }

TEST(EpilogueFusion, ClipBoundsFromAttributesBeforeOpset11) {
  {
    GraphBuilder b(6);
    const ModelTasks m =
        b.finish(b.node("Clip", {b.conv("x")}, {1, 8, 6, 6}, {{"min", f(0)}, {"max", f(6)}}));
    ASSERT_EQ(m.tasks.size(), 1u);
    EXPECT_EQ(m.tasks[0].epilogue, "bias_relu6");
    EXPECT_EQ(m.tasks[0].status, TaskStatus::kOk);
    EXPECT_TRUE(m.unsupported.empty());
  }
  {
    // Only a lower bound (max left at opset 6's default, float's largest): a clip with clip_min.
    GraphBuilder b(6);
    const ModelTasks m = b.finish(b.node("Clip", {b.conv("x")}, {1, 8, 6, 6}, {{"min", f(-0.5f)}}));
    ASSERT_EQ(m.tasks.size(), 1u);
    EXPECT_EQ(m.tasks[0].epilogue, "bias_clip");
    EXPECT_EQ(m.tasks[0].args.at("clip_min"), "-0.5");
    EXPECT_EQ(m.tasks[0].args.count("clip_max"), 0u);
    ASSERT_TRUE(m.tasks[0].tunable.has_value());
    EXPECT_NE(m.tasks[0].tunable->workload_key().find("epilogue=bias_clip,clip_min=-0.5,dtype"),
              std::string::npos);
  }
}

TEST(EpilogueFusion, ClipBoundsFromConstantInputs) {
  {
    // [0, inf) is a relu; a bound of 0.1 keeps float32's shortest text.
    GraphBuilder b(13);
    const std::string lo = b.constant("lo", {}, {0.0});
    ModelTasks m = b.finish(b.node("Clip", {b.conv("x"), lo, ""}, {1, 8, 6, 6}));
    EXPECT_EQ(m.tasks.at(0).epilogue, "bias_relu");
    GraphBuilder c(13);
    const std::string hi = c.constant("hi", {}, {static_cast<double>(0.1f)});
    m = c.finish(c.node("Clip", {c.conv("x"), "", hi}, {1, 8, 6, 6}));
    EXPECT_EQ(m.tasks.at(0).epilogue, "bias_clip");
    EXPECT_EQ(m.tasks.at(0).args.at("clip_max"), "0.1");
    EXPECT_EQ(m.tasks.at(0).status, TaskStatus::kOk);
  }
  {
    // A bound computed at run time cannot be a kernel argument: the Clip stays, with its reason.
    GraphBuilder b(13);
    const std::string conv = b.conv("x");
    const std::string hi = b.node("ReduceMax", {"x"}, {});
    const ModelTasks m = b.finish(b.node("Clip", {conv, "", hi}, {1, 8, 6, 6}));
    EXPECT_EQ(m.tasks.at(0).epilogue, "bias");
    EXPECT_EQ(m.tasks.at(0).layers.size(), 1u);
    ASSERT_EQ(m.unsupported.size(), 2u);
    EXPECT_EQ(m.unsupported[1].op, "Clip");
    EXPECT_EQ(m.unsupported[1].reason, "no template");
  }
}

// x * Sigmoid(x) fuses only when those two nodes are x's only readers: a third reader needs x
// itself, which a fused kernel never writes.
TEST(EpilogueFusion, SiluNeedsItsInputToItself) {
  GraphBuilder b(13);
  const std::string conv = b.conv("x");
  const std::string silu =
      b.node("Mul", {conv, b.node("Sigmoid", {conv}, {1, 8, 6, 6})}, {1, 8, 6, 6});
  ModelTasks m = b.finish(silu);
  ASSERT_EQ(m.tasks.size(), 1u);
  EXPECT_EQ(m.tasks[0].epilogue, "bias_silu");
  EXPECT_EQ(m.tasks[0].layers, (std::vector<std::string>{"Conv_0", "Sigmoid_1", "Mul_2"}));

  GraphBuilder c(13);
  const std::string conv2 = c.conv("x");
  const std::string gated =
      c.node("Mul", {conv2, c.node("Sigmoid", {conv2}, {1, 8, 6, 6})}, {1, 8, 6, 6});
  c.node("Relu", {conv2}, {1, 8, 6, 6});
  m = c.finish(gated);
  EXPECT_EQ(m.tasks.at(0).epilogue, "bias");
  EXPECT_EQ(m.unsupported.size(), 3u);  // Sigmoid, Mul, Relu: elementwise, no template of their own
}

// HardSwish as paddle2onnx writes it, x * Clip(x + 3, 0, 6) / 6 (or * 1/6), fuses whole; with
// another constant (+ 2) it is not a HardSwish and stays four generated nodes.
TEST(EpilogueFusion, ArithmeticHardSwishFuses) {
  for (const bool divide : {true, false}) {
    GraphBuilder b(11);
    const std::string conv = b.conv("x");
    const std::string clip =
        b.node("Clip",
               {b.node("Add", {conv, b.constant("three", {}, {3.0})}, {1, 8, 6, 6}),
                b.constant("zero", {}, {0.0}), b.constant("six", {}, {6.0})},
               {1, 8, 6, 6});
    const std::string product = b.node("Mul", {clip, conv}, {1, 8, 6, 6});
    const std::string out =
        divide ? b.node("Div", {product, b.constant("by", {}, {6.0})}, {1, 8, 6, 6})
               : b.node("Mul", {b.constant("by", {}, {1 / 6.0}), product}, {1, 8, 6, 6});
    const ModelTasks m = b.finish(out);
    ASSERT_EQ(m.tasks.size(), 1u);
    EXPECT_EQ(m.tasks[0].epilogue, "bias_hardswish") << divide;
    EXPECT_EQ(m.tasks[0].layers.size(), 5u) << divide;
    EXPECT_TRUE(m.unsupported.empty()) << divide;
  }
  GraphBuilder c(11);
  const std::string conv = c.conv("x");
  const std::string clip =
      c.node("Clip",
             {c.node("Add", {conv, c.constant("two", {}, {2.0})}, {1, 8, 6, 6}),
              c.constant("zero", {}, {0.0}), c.constant("six", {}, {6.0})},
             {1, 8, 6, 6});
  const ModelTasks m = c.finish(
      c.node("Div", {c.node("Mul", {conv, clip}, {1, 8, 6, 6}), c.constant("by", {}, {6.0})},
             {1, 8, 6, 6}));
  EXPECT_EQ(m.tasks.at(0).epilogue, "bias");
  EXPECT_EQ(m.unsupported.size(), 4u);  // Add, Clip, Mul, Div
}

// A Sigmoid that alone reads a conv's output (a squeeze-excite gate, a detector's score map) is
// its epilogue's activation.
// A conv reading a Concat of channel parts takes its data in blocks of 8 when the parts come in
// multiples of 8 but not 16 (an FPN's 24-channel branches: the default block of 16 for 72
// channels would cut a part), so that deploy writes each part into its slice; parts of 16s keep
// the default.
TEST(EpilogueFusion, AConcatOfPartsOf8ChannelsIsReadInBlocksOf8) {
  for (const int64_t part : {24, 32}) {
    GraphBuilder b(13, {1, part, 6, 6});
    const std::string w = b.constant("w", {16, 3 * part, 3, 3});
    const std::string cat = b.node("Concat", {"x", b.node("Relu", {"x"}, {1, part, 6, 6}), "x"},
                                   {1, 3 * part, 6, 6}, {{"axis", {{1}, {}, ""}}});
    const ModelTasks m =
        b.finish(b.node("Conv", {cat, w}, {1, 16, 6, 6}, {{"pads", {{1, 1, 1, 1}, {}, ""}}}));
    ASSERT_FALSE(m.tasks.empty());
    for (const auto& t : m.tasks) {
      const auto block = t.args.find("ic_block");
      if (part == 24) {
        ASSERT_NE(block, t.args.end()) << t.template_name;
        EXPECT_EQ(block->second, "8") << t.template_name;
      } else {
        EXPECT_EQ(block, t.args.end()) << t.template_name;
      }
    }
  }
}

TEST(EpilogueFusion, SigmoidAfterAConvFuses) {
  GraphBuilder b(13);
  const ModelTasks m = b.finish(b.node("Sigmoid", {b.conv("x")}, {1, 8, 6, 6}));
  ASSERT_EQ(m.tasks.size(), 1u);
  EXPECT_EQ(m.tasks[0].epilogue, "bias_sigmoid");
  EXPECT_TRUE(m.unsupported.empty());
}

// LeakyRelu and HardSigmoid alone after a conv are its activation, their attributes as
// parameters when they differ from ONNX's defaults (an audio CNN's slope 0.3; MobileNetV3's gate
// as paddle2onnx writes it, alpha 1/6).
TEST(EpilogueFusion, LeakyReluAndHardSigmoidFuseWithTheirAttributes) {
  GraphBuilder b(13);
  const std::string leaky = b.node("LeakyRelu", {b.conv("x")}, {1, 8, 6, 6});
  const std::string slope =
      b.node("LeakyRelu", {b.conv(leaky)}, {1, 8, 6, 6}, {{"alpha", f(0.3f)}});
  const std::string gate = b.node("HardSigmoid", {b.conv(slope)}, {1, 8, 6, 6},
                                  {{"alpha", f(1.0f / 6)}, {"beta", f(0.5f)}});
  const ModelTasks m = b.finish(gate);
  ASSERT_EQ(m.tasks.size(), 3u);
  EXPECT_EQ(m.tasks[0].epilogue, "bias_leaky_relu");
  EXPECT_EQ(m.tasks[0].args.count("leaky_alpha"), 0u);
  EXPECT_EQ(m.tasks[1].args.at("leaky_alpha"), "0.3");
  EXPECT_EQ(m.tasks[2].epilogue, "bias_hardsigmoid");
  EXPECT_EQ(m.tasks[2].args.at("hardsigmoid_alpha"), "0.16666667");
  EXPECT_EQ(m.tasks[2].args.count("hardsigmoid_beta"), 0u);
  for (const ModelTask& t : m.tasks) EXPECT_EQ(t.status, TaskStatus::kOk) << t.refused;
  EXPECT_NE(m.tasks[1].tunable->workload_key().find("leaky_alpha=0.3,"), std::string::npos);
  EXPECT_TRUE(m.unsupported.empty());
}

// Two branches joined by Max (tf2onnx's Maximum, as in a 1-D audio CNN): the second conv's
// epilogue keeps the larger of its value and the first branch's output, then its activation; a
// Max of a constant or of a tensor the conv itself feeds stays a generated kernel.
TEST(EpilogueFusion, MaxOfAnIndependentBranchIsAResidualStep) {
  GraphBuilder b(13);
  const std::string left = b.node("LeakyRelu", {b.conv("x")}, {1, 8, 6, 6});
  const std::string joined = b.node("Max", {left, b.conv("x")}, {1, 8, 6, 6});
  const std::string relu = b.node("Relu", {joined}, {1, 8, 6, 6});
  const std::string fed = b.conv(relu);
  const std::string own =
      b.node("Max", {fed, b.node("Sigmoid", {fed}, {1, 8, 6, 6})}, {1, 8, 6, 6});
  const ModelTasks m = b.finish(b.node("Max", {own, b.constant("floor", {}, {0.5})}, {1, 8, 6, 6}));
  ASSERT_EQ(m.tasks.size(), 3u);
  EXPECT_EQ(m.tasks[0].epilogue, "bias_leaky_relu");
  EXPECT_EQ(m.tasks[1].epilogue, "bias_max_relu");
  EXPECT_EQ(m.tasks[1].layers, (std::vector<std::string>{"Conv_2", "Max_3", "Relu_4"}));
  EXPECT_EQ(m.tasks[2].epilogue, "bias");
  ASSERT_EQ(m.unsupported.size(), 2u);  // Sigmoid; Max (two of them)
  for (const ModelTask& t : m.tasks) EXPECT_EQ(t.status, TaskStatus::kOk) << t.refused;
}

// A conv without a bias, its bias added separately, then a BatchNormalization and a Relu (a
// transposed conv's phase conv as paddle2onnx's decoders write it): one epilogue.
TEST(EpilogueFusion, SeparateBiasThenBatchNormFuse) {
  GraphBuilder b(11);
  const std::string conv = b.node("Conv", {"x", b.constant("w", {8, 8, 1, 1})}, {1, 8, 6, 6});
  const std::string biased = b.node("Add", {conv, b.constant("bias", {1, 8, 1, 1})}, {1, 8, 6, 6});
  const std::string bn = b.node("BatchNormalization",
                                {biased, b.constant("s", {8}), b.constant("t", {8}),
                                 b.constant("m", {8}), b.constant("v", {8})},
                                {1, 8, 6, 6});
  const ModelTasks m = b.finish(b.node("Relu", {bn}, {1, 8, 6, 6}));
  ASSERT_EQ(m.tasks.size(), 1u);
  EXPECT_EQ(m.tasks[0].epilogue, "bias_relu");
  EXPECT_EQ(m.tasks[0].layers,
            (std::vector<std::string>{"Conv_0", "Add_1", "BatchNormalization_2", "Relu_3"}));
  EXPECT_TRUE(m.unsupported.empty());
}

// Gemm's own bias and a MatMul's bias Add (as exporters write a Linear layer), then an activation.
TEST(EpilogueFusion, GemmAndMatMulTakeBiasAndActivation) {
  GraphBuilder b(14, {4, 16});
  const std::string w = b.constant("w", {32, 16}), bias = b.constant("bias", {32});
  const std::string gemm = b.node("Gemm", {"x", w, bias}, {4, 32}, {{"transB", {{1}, {}, ""}}});
  const std::string hs = b.node("HardSwish", {gemm}, {4, 32});
  const std::string w2 = b.constant("w2", {32, 8}), b2 = b.constant("b2", {1, 8});
  const std::string mm = b.node("MatMul", {hs, w2}, {4, 8});
  const std::string add = b.node("Add", {mm, b2}, {4, 8});
  const ModelTasks m = b.finish(b.node("Sigmoid", {add}, {4, 8}));
  ASSERT_EQ(m.tasks.size(), 2u);
  EXPECT_EQ(m.tasks[0].key(),
            "matmul(M=4,N=32,K=16,layout=nt,dtype=float32,epilogue=bias_hardswish)");
  EXPECT_EQ(m.tasks[0].status, TaskStatus::kOk);
  EXPECT_EQ(m.tasks[1].key(), "matmul(M=4,N=8,K=32,layout=nn,dtype=float32,epilogue=bias_sigmoid)");
  EXPECT_EQ(m.tasks[1].status, TaskStatus::kOk);
  EXPECT_EQ(m.tasks[1].layers.size(), 3u);  // MatMul, Add, Sigmoid
  EXPECT_TRUE(m.unsupported.empty());
}

Attribute text(const char* v) { return {{}, {}, v}; }

// An FPN's top-down step: a 1x1 lateral conv plus the coarser map upsampled by a nearest Resize
// that only the Add reads. The conv reads the coarse map in place (residual_upsample, the Resize
// in its layers); a Resize that another node also reads, a linear one, one whose rounding does not
// give y / f (asymmetric, round_prefer_floor at 3x: output row 2 reads row 1), or a 3x3 conv
// (its Winograd alternatives read the residual like the output) leaves the Resize a kernel of
// its own.
TEST(EpilogueFusion, ANearestUpsampledResidualIsReadInPlace) {
  struct Case {
    const char* name;
    int64_t factor;
    const char* mode;
    const char* coordinates;
    const char* nearest;
    bool shared, three_by_three, fuses;
  };
  const Case cases[] = {
      {"asymmetric floor 2x", 2, "nearest", "asymmetric", "floor", false, false, true},
      {"half_pixel 2x (opset default rounding)", 2, "nearest", "half_pixel", "round_prefer_floor",
       false, false, true},
      {"asymmetric floor 3x", 3, "nearest", "asymmetric", "floor", false, false, true},
      {"asymmetric round_prefer_floor 3x", 3, "nearest", "asymmetric", "round_prefer_floor", false,
       false, false},
      {"linear", 2, "linear", "asymmetric", "floor", false, false, false},
      {"read twice", 2, "nearest", "asymmetric", "floor", true, false, false},
      {"3x3 conv", 2, "nearest", "asymmetric", "floor", false, true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GraphBuilder b(13, {1, 8, 6, 6});
    const int64_t coarse = 6 / c.factor;
    b.g.inputs.push_back("top");
    b.g.shapes["top"] = {1, 8, coarse, coarse};
    const double f = static_cast<double>(c.factor);
    const std::string up =
        b.node("Resize", {"top", "", b.constant("scales", {4}, {1, 1, f, f})}, {1, 8, 6, 6},
               {{"mode", text(c.mode)},
                {"coordinate_transformation_mode", text(c.coordinates)},
                {"nearest_mode", text(c.nearest)}});
    std::string lateral;
    if (c.three_by_three)
      lateral = b.node("Conv", {"x", b.constant("w3", {8, 8, 3, 3})}, {1, 8, 6, 6},
                       {{"pads", {{1, 1, 1, 1}, {}, ""}}});
    else
      lateral = b.conv("x");
    const std::string sum = b.node("Add", {lateral, up}, {1, 8, 6, 6});
    b.g.outputs = {sum};
    if (c.shared) b.g.outputs.push_back(b.node("Relu", {up}, {1, 8, 6, 6}));
    const ModelTasks m = extract_tasks(b.g, avx512());
    ASSERT_FALSE(m.tasks.empty());
    const ModelTask& t = m.tasks[0];
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.refused;
    EXPECT_EQ(t.epilogue, c.three_by_three ? "add" : "bias_add");
    const auto factor = t.args.find("residual_upsample");
    const bool resize_listed = std::any_of(m.unsupported.begin(), m.unsupported.end(),
                                           [](const auto& u) { return u.op == "Resize"; });
    if (c.fuses) {
      ASSERT_NE(factor, t.args.end());
      EXPECT_EQ(factor->second, std::to_string(c.factor));
      EXPECT_EQ(t.layers.size(), 3u);  // Conv, Resize, Add
      EXPECT_FALSE(resize_listed);
      ASSERT_TRUE(t.tunable.has_value());
      EXPECT_NE(t.tunable->workload_key().find("residual_upsample=" + std::to_string(c.factor)),
                std::string::npos);
    } else {
      EXPECT_EQ(factor, t.args.end());
      EXPECT_TRUE(resize_listed);
    }
  }
}

// Attention's probabilities times its values: the Softmax over the last axis (with its scaling
// Mul or Div, a ScaledSoftmax) that only the batched MatMul reads becomes the product's a_softmax
// prologue, the product reading the scores; a Softmax another node also reads, one over another
// axis, or a product of one matrix (matmul, no batch) keeps the Softmax a kernel of its own.
TEST(EpilogueFusion, AttentionsSoftmaxIsTheProductsPrologue) {
  struct Case {
    const char* name;
    bool scaled, divide, shared, middle_axis, batched, taken;
  };
  const Case cases[] = {
      {"plain", false, false, false, false, true, true},
      {"scaled by a Mul", true, false, false, false, true, true},
      {"scaled by a Div", true, true, false, false, true, true},
      {"read twice", false, false, true, false, true, false},
      {"over the rows", false, false, false, true, true, false},
      {"one matrix", false, false, false, false, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<int64_t> scores_shape =
        c.batched ? std::vector<int64_t>{1, 2, 6, 6} : std::vector<int64_t>{6, 6};
    GraphBuilder b(13, scores_shape);
    b.g.inputs.push_back("v");
    b.g.shapes["v"] = c.batched ? std::vector<int64_t>{1, 2, 6, 4} : std::vector<int64_t>{6, 4};
    b.g.types["x"] = b.g.types["v"] = "float32";
    std::string scores = "x";
    if (c.scaled)
      scores = b.node(c.divide ? "Div" : "Mul", {"x", b.constant("c", {}, {c.divide ? 8.0 : 0.5})},
                      scores_shape);
    std::map<std::string, Attribute> axis;
    if (c.middle_axis) axis["axis"] = {{-2}, {}, ""};
    const std::string probabilities = b.node("Softmax", {scores}, scores_shape, axis);
    std::vector<int64_t> out_shape = b.g.shapes["v"];
    const std::string out = b.node("MatMul", {probabilities, "v"}, out_shape);
    b.g.outputs = {out};
    if (c.shared) b.g.outputs.push_back(b.node("Relu", {probabilities}, scores_shape));
    const ModelTasks m = extract_tasks(b.g, avx512());
    ASSERT_EQ(m.tasks.size(), 1u);
    const ModelTask& t = m.tasks[0];
    EXPECT_EQ(t.status, TaskStatus::kOk) << t.refused;
    ASSERT_EQ(m.occurrences.size(), 1u);
    const TaskOccurrence& occ = m.occurrences[0];
    const bool softmax_listed = std::any_of(m.unsupported.begin(), m.unsupported.end(),
                                            [](const auto& u) { return u.op == "Softmax"; });
    if (!c.taken) {
      EXPECT_EQ(t.args.count("a_softmax"), 0u);
      EXPECT_TRUE(occ.prologue.empty());
      EXPECT_TRUE(occ.first_input.empty());
      EXPECT_TRUE(softmax_listed);
      continue;
    }
    EXPECT_EQ(t.args.at("a_softmax"), "1");
    EXPECT_EQ(t.args.count("a_scale"), c.scaled ? 1u : 0u);
    if (c.scaled) {
      EXPECT_EQ(t.args.at("a_scale"), c.divide ? "0.125" : "0.5");
    }
    EXPECT_EQ(occ.first_input, "x");
    EXPECT_EQ(occ.prologue.size(), c.scaled ? 2u : 1u);
    EXPECT_FALSE(softmax_listed);
    EXPECT_TRUE(m.scaled_softmaxes.empty());
    ASSERT_TRUE(t.tunable.has_value());
    EXPECT_NE(t.tunable->workload_key().find("a_softmax=1"), std::string::npos);
  }
}

}  // namespace
}  // namespace ktune::frontend
