// Tests of `ktune tasks`: the ResNet-18 table and JSON, the verdict (covered nodes, every node a
// build refuses, exit status 1 then), the graph dumped after each clean-up pass, and bad input as
// one line on stderr with exit status 1; what scripts/make-test-models says it wrote.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_util.h"
#include "tests/frontend/test_models.h"

namespace ktune {
namespace {

using testing_cli::ktune;
using testing_cli::quote;
using testing_models::model;

TEST(TasksCli, ResNet18TableAndJson) {
  const auto json = ktune("tasks " + quote(model("resnet18.onnx")) + " --json");
  ASSERT_EQ(json.status, 0);
  const auto j = nlohmann::json::parse(json.out);
  // 18 tasks and, for the 8 workloads of 3x3 stride-1 convs, Winograd as another algorithm:
  // F(4x4), and on the two 7x7 workloads F(2x2) and F(4x4).
  ASSERT_EQ(j["tasks"].size(), 28u);
  int64_t layers = 0, alternatives = 0, f2 = 0;
  for (const auto& t : j["tasks"]) {
    if (t.contains("alternative_of")) {
      ++alternatives;
      const auto& of = j["tasks"][t["alternative_of"].get<size_t>()];
      EXPECT_EQ(t["template"], "conv2d_winograd_nchwc") << t.dump();
      EXPECT_EQ(of["template"], "conv2d_nchwc") << of.dump();
      EXPECT_EQ(t["count"], of["count"]);
      EXPECT_EQ(t["flop"], of["flop"]);  // the direct convolution's, so that GFLOP/s compare
      EXPECT_EQ(t["layers"], of["layers"]);
      if (of["args"]["H"] != "7") {
        EXPECT_EQ(t["args"]["m"], "4") << t.dump();
      }
      f2 += t["args"]["m"] == "2";
      continue;
    }
    layers += t["count"].get<int64_t>();
  }
  EXPECT_EQ(alternatives, 10);
  EXPECT_EQ(f2, 2);
  EXPECT_EQ(layers, 23);  // 20 convs, 2 pools, 1 Gemm
  EXPECT_EQ(j["tasks"][2]["key"],
            "conv2d_nchwc(N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,dilation=1,"
            "dtype=float32,epilogue=bias_relu)");
  EXPECT_DOUBLE_EQ(j["tasks"][2]["flop"].get<double>(), 231211008.0);
  // total_gflop counts each layer once.
  EXPECT_NEAR(j["total_gflop"].get<double>(), 3.630, 0.001);
  EXPECT_EQ(j["unsupported"][0]["op"], "Flatten");

  const auto text = ktune("tasks " + quote(model("resnet18.onnx")));
  ASSERT_EQ(text.status, 0);
  EXPECT_NE(text.out.find("28 tasks (10 of them other algorithms)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("another algorithm for #3"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Flatten"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("epilogue=bias_add_relu"), std::string::npos) << text.out;
  // The pools a build runs as generated kernels on channel-blocked data are listed so, with why
  // (tune-model tunes none of them), in the table and in --json.
  size_t generated = 0;
  for (const auto& t : j["tasks"]) {
    if (!t.contains("built_generated")) continue;
    ++generated;
    EXPECT_NE(t["template"].get<std::string>().find("pool"), std::string::npos) << t.dump();
    EXPECT_NE(text.out.find("generated" + std::string(9, ' ') + t["key"].get<std::string>()),
              std::string::npos)
        << text.out;
  }
  EXPECT_GE(generated, 1u) << json.out.substr(0, 3000);
  EXPECT_NE(text.out.find("generated = a model build runs a generated kernel instead"),
            std::string::npos);
}

TEST(TasksCli, VerdictCountsCoveredNodes) {
  const auto text = ktune("tasks " + quote(model("resnet18.onnx")));
  ASSERT_EQ(text.status, 0) << text.err;
  // 20 convs, 20 BatchNormalization, 17 Relu, 8 Add, 2 pools, Flatten, Gemm.
  EXPECT_NE(
      text.out.find("\ncovered 69 of 69 nodes (a model build computes them: in a tuned task, a "
                    "generated kernel or a view)\nverdict: buildable\n"),
      std::string::npos)
      << text.out;
  const auto json = ktune("tasks " + quote(model("resnet18.onnx")) + " --json");
  ASSERT_EQ(json.status, 0);
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["nodes"], 69);
  EXPECT_EQ(j["covered"], 69);
  EXPECT_EQ(j["buildable"], true);
  EXPECT_TRUE(j["blocking"].empty());
}

// blocked_ops: a conv of 2 groups with its Relu and a conv dilated differently per axis, which
// generated convs compute (their Relu fused), then two nodes no build computes (Hardmax, Det): both
// are listed with what each lacks, the three nodes before them are covered, the status is 1, the
// error one line.
TEST(TasksCli, NotBuildableListsEveryBlockingNode) {
  const auto r = ktune("tasks " + quote(model("blocked_ops.onnx")), true);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("\ncovered 3 of 5 nodes (a model build computes them: in a tuned task, a "
                       "generated kernel or a view)\nverdict: not buildable, 2 nodes have no "
                       "path in a model build:\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  hardmax_6 (Hardmax): no template or generated kernel computes Hardmax"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  det_7 (Det): no template or generated kernel computes Det"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("cannot be built: 2 nodes have no path"), std::string::npos) << r.err;

  const auto json = ktune("tasks " + quote(model("blocked_ops.onnx")) + " --json", true);
  EXPECT_EQ(json.status, 1);
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["buildable"], false);
  EXPECT_EQ(j["nodes"], 5);
  EXPECT_EQ(j["covered"], 3);
  ASSERT_EQ(j["blocking"].size(), 2u);
  std::set<std::string> nodes;
  for (const auto& b : j["blocking"]) nodes.insert(b["node"].get<std::string>());
  EXPECT_EQ(nodes, (std::set<std::string>{"hardmax_6", "det_7"}));
  // The convs are no tuning task: each is a generated conv_blocked, the grouped one with its Relu.
  EXPECT_TRUE(j["tasks"].empty()) << j["tasks"].dump();
  std::map<std::string, std::string> generated;
  for (const auto& u : j["unsupported"])
    for (const auto& layer : u["layers"]) generated[layer] = u.value("generated", "");
  EXPECT_EQ(generated["conv_2+relu_3"], "conv_blocked") << j["unsupported"].dump();
  EXPECT_EQ(generated["conv_5"], "conv_blocked") << j["unsupported"].dump();
}

TEST(TasksCli, DumpGraphPrintsTheGraphAfterEachPass) {
  const auto r = ktune("tasks " + quote(model("resnet18.onnx")) + " --dump-graph", true);
  ASSERT_EQ(r.status, 0);
  for (const char* pass :
       {"read", "fold_constants", "inline_constant_if", "remove_identities", "remove_dead_nodes"})
    EXPECT_NE(r.err.find(std::string("graph after ") + pass + ": 69 nodes, 1 inputs, 1 outputs"),
              std::string::npos)
        << pass << ": " << r.err.substr(0, 2000);
  EXPECT_NE(r.err.find("  output "), std::string::npos);
  EXPECT_NE(r.err.find("Conv(input [1x3x224x224]"), std::string::npos) << r.err.substr(0, 2000);
}

// The models' writer says what it wrote, and writes nothing when asked for a model it does not
// know (one line naming it, exit status 2).
TEST(TasksCli, TestModelWriterSaysWhatItWrote) {
  const std::string dir = ::testing::TempDir() + "ktune_make_models_" + std::to_string(::getpid());
  const std::string script = std::string("/usr/bin/python3 ") + KTUNE_SOURCE_DIR_PATH +
                             "/scripts/make-test-models " + quote(dir);
  const auto unknown = testing_cli::shell(script + " --only op_matmul.onnx,nope.onnx");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("error: no test model named nope.onnx"), std::string::npos)
      << unknown.err;
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1) << unknown.err;
  EXPECT_FALSE(std::filesystem::exists(dir));

  // A name without .onnx is that model's file.
  const auto wrote = testing_cli::shell(script + " --only op_matmul,not_onnx.onnx");
  ASSERT_EQ(wrote.status, 0) << wrote.err;
  EXPECT_NE(wrote.out.find("wrote 2 files"), std::string::npos) << wrote.out;
  EXPECT_NE(wrote.out.find("not_onnx.onnx, op_matmul.onnx"), std::string::npos) << wrote.out;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2u);
  std::filesystem::remove_all(dir);
}

TEST(TasksCli, SymbolicInputWithInputOption) {
  const auto r =
      ktune("tasks " + quote(model("resnet18_dynamic.onnx")) + " --input input=4x3x224x224 --json");
  ASSERT_EQ(r.status, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tasks"][0]["args"]["N"], "4");
}

// --input on an input the model fixes replaces it (another batch, another image size) and says
// so in the output, the model's shape beside the given one; a symbolic dimension filled in or the
// model's own shape repeated is no replacement.
TEST(TasksCli, AReplacedFixedInputIsNamed) {
  const auto text = ktune("tasks " + quote(model("resnet18.onnx")) + " --input input=2x3x160x160");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("input input: --input 2x3x160x160 replaces the model's fixed shape "
                          "1x3x224x224\n"),
            std::string::npos)
      << text.out.substr(0, 600);
  const auto json =
      ktune("tasks " + quote(model("resnet18.onnx")) + " --input input=2x3x160x160 --json");
  ASSERT_EQ(json.status, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["replaced_inputs"].size(), 1u);
  EXPECT_EQ(j["replaced_inputs"][0]["input"], "input");
  EXPECT_EQ(j["replaced_inputs"][0]["model"], nlohmann::json({1, 3, 224, 224}));
  EXPECT_EQ(j["replaced_inputs"][0]["given"], nlohmann::json({2, 3, 160, 160}));
  for (const std::string& args :
       {quote(model("resnet18.onnx")) + " --input input=1x3x224x224 --json",
        quote(model("resnet18_dynamic.onnx")) + " --input input=4x3x224x224 --json"}) {
    const auto same = ktune("tasks " + args);
    ASSERT_EQ(same.status, 0) << args << ": " << same.err;
    EXPECT_TRUE(nlohmann::json::parse(same.out)["replaced_inputs"].empty()) << args;
  }
}

TEST(TasksCli, BadInputIsOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {quote(model("not_onnx.onnx")), "not an ONNX model"},
      {quote(model("truncated.onnx")), "not an ONNX model"},
      {quote(model("bad_opset.onnx")), "opset 999"},
      {quote(model("unknown_domain.onnx")), "com.example::FancyOp"},
      {quote(model("resnet18_dynamic.onnx")), "give it with --input input="},
      {quote(model("resnet18.onnx")) + " --input input=1x3", "rank 4"},
      {quote(model("resnet18.onnx")) + " --input bogus", "expected name=DIMS"},
      {quote(model("resnet18.onnx")) + " --input input=1x4x224x224",
       "the input has 4 channels, its weights take 3"},
      {quote(testing_models::missing("nothing_here.onnx")), "no such file"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = ktune("tasks " + args, true);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("ktune: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace ktune
