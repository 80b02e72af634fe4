// The exporter-faithful corpus of scripts/make-test-models (torch.onnx, paddle2onnx and tf2onnx
// forms: Constant nodes, shape subgraphs, symbolic dimensions): each model's verdict is
// "buildable" with every node covered, and the model built and run in process matches ONNX Runtime
// on the same random input (`ktune run --check`, no tuning log: every kernel on its fallback).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_util.h"
#include "tests/frontend/test_models.h"

namespace ktune {
namespace {

using testing_cli::ktune;
using testing_cli::quote;
using testing_models::model;

struct CorpusModel {
  const char* file;
  const char* input;  // --input for its symbolic dimensions
};

std::ostream& operator<<(std::ostream& os, const CorpusModel& m) { return os << m.file; }

class Corpus : public ::testing::TestWithParam<CorpusModel> {};

TEST_P(Corpus, BuildableAndMatchesOnnxRuntime) {
  const CorpusModel& m = GetParam();
  const std::string path = quote(model(m.file));
  const std::string input = std::string(" --input ") + m.input;
  const auto tasks = ktune("tasks " + path + input + " --json", true);
  ASSERT_EQ(tasks.status, 0) << tasks.out.substr(0, 4000) << tasks.err;
  const auto t = nlohmann::json::parse(tasks.out);
  EXPECT_EQ(t["buildable"], true);
  EXPECT_EQ(t["covered"], t["nodes"]);
  // Named by its file, not by the exporter's graph name (torch.onnx writes "main_graph" for all).
  const std::string file = m.file;
  EXPECT_EQ(t["model"], file.substr(0, file.rfind('.')));

  const auto run =
      ktune("run " + path + input + " --untuned --runs 1 --warmup 0 --check --json", true);
  ASSERT_EQ(run.status, 0) << run.err;
  const auto r = nlohmann::json::parse(run.out);
  EXPECT_EQ(r["outputs_finite"], true);
  ASSERT_FALSE(r["check_error"].empty());
  for (const auto& e : r["check_error"]) EXPECT_LE(e.get<double>(), 1e-4) << m.file;
}

INSTANTIATE_TEST_SUITE_P(
    Exporters, Corpus,
    ::testing::Values(CorpusModel{"mobilenetv3_small.onnx", "input=1x3x224x224"},
                      CorpusModel{"mobilenetv3_large.onnx", "x=1x3x224x224"},
                      CorpusModel{"efficientnet_b0.onnx", "input=1x3x224x224"},
                      CorpusModel{"efficientnet_b0_dynamo.onnx", "x=1x3x224x224"},
                      CorpusModel{"text_det_fpn.onnx", "x=1x3x320x320"},
                      CorpusModel{"yolo_neck.onnx", "images=1x3x256x256"},
                      CorpusModel{"text_rec.onnx", "x=1x3x32x320"},
                      CorpusModel{"audio_cnn1d.onnx", "input_1:0=1x16000x1"},
                      CorpusModel{"vit_tiny_block.onnx", "input=1x3x224x224"},
                      CorpusModel{"exporter_patterns.onnx", "input=1x8x16x16"},
                      CorpusModel{"exporter_patterns_opset9.onnx", "input.1=1x4x8x8"}),
    [](const ::testing::TestParamInfo<CorpusModel>& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

// Without --input, the error's example is the model's own shape with a batch of one (tf2onnx's
// [unk__0, 16000, 1] audio input), not an image's; dotted dimension names read as a list.
TEST(Corpus, ASymbolicInputsExampleIsItsOwnShape) {
  const auto tasks = ktune("tasks " + quote(model("audio_cnn1d.onnx")), true);
  EXPECT_NE(tasks.status, 0);
  EXPECT_NE(tasks.err.find("give it with --input input_1:0=<dims, e.g. 1x16000x1: 1 for each "
                           "symbolic dimension"),
            std::string::npos)
      << tasks.err;
  // paddle2onnx's dotted dimension names as a list, not joined by 'x'.
  const auto rec = ktune("tasks " + quote(model("text_rec.onnx")), true);
  EXPECT_NE(rec.status, 0);
  EXPECT_NE(rec.err.find("input 'x' has a symbolic shape ([p2o.DynamicDimension.0, 3, 32, "
                         "p2o.DynamicDimension.1]); give it with --input x=<dims, e.g. 1x3x32x1: "),
            std::string::npos)
      << rec.err;
}

}  // namespace
}  // namespace ktune
