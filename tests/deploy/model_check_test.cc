// Tests of check_model_steps() and `ktune run --check-nodes`: every step of small built models
// against te's reference of it, a corrupted step reported alone, and the command's lines and exit
// status.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "codegen/model_driver.h"
#include "codegen/runtime.h"
#include "deploy/model_check.h"
#include "deploy/model_timing.h"
#include "tests/cli_util.h"
#include "tests/frontend/test_models.h"

namespace ktune::deploy {
namespace {

using testing_cli::ktune;
using testing_cli::quote;
using testing_models::model;

// max |step - reference| / max |reference| per step. A task's reference sums its reductions in
// another order than the tuned loop nest (float32: a few ulps times the depth of the sum, ~1e-6 of
// the magnitude here); the generated kernels compute the same expressions as the interpreter, up
// to the rounding of exp/erf in vector code. A wrong tap, weight, lane or epilogue is ~1.
constexpr double kTolerance = 1e-5;

BuiltModel build(const std::string& onnx) {
  ModelRequest r;
  r.model_path = model(onnx);
  r.name = "checked";
  r.plan.history = HistorySource::untuned();  // every task on its fallback (a tiled schedule)
  return build_model(r);
}

std::vector<StepCheck> failed(const std::vector<StepCheck>& checks) {
  std::vector<StepCheck> f;
  for (const StepCheck& c : checks)
    if (!c.passed(kTolerance)) f.push_back(c);
  return f;
}

class ModelCheck : public ::testing::TestWithParam<const char*> {
 protected:
  // The parallel loops on two threads (this also links the runtime into the test, where the
  // loaded model library finds ktune_parallel_for).
  static void SetUpTestSuite() { codegen::set_num_threads(2); }
};

TEST_P(ModelCheck, EveryStepMatchesItsReference) {
  const BuiltModel m = build(GetParam());
  ModelRunner runner(m);
  ModelBuffers buffers(m.plan, 7);
  const auto checks = check_model_steps(runner, m, buffers.inputs(), buffers.outputs());
  ASSERT_EQ(checks.size(), m.plan.steps.size());
  std::vector<std::string> references;
  double worst = 0;
  for (size_t i = 0; i < checks.size(); ++i) {
    const StepCheck& c = checks[i];
    EXPECT_EQ(c.step, i);
    EXPECT_EQ(c.layer, m.plan.steps[i].layer);
    EXPECT_EQ(c.elements, m.plan.steps[i].func.args.back().num_elements()) << c.layer;
    EXPECT_GT(c.elements, 0) << c.layer;
    EXPECT_EQ(c.nan_left, 0) << c.layer;
    EXPECT_LE(c.max_error, kTolerance) << i << " " << c.kind << " " << c.layer;
    EXPECT_EQ(c.reference, c.kind == "task"   ? "task reference"
                           : c.kind == "pool" ? "pool reference"
                                              : "interpreter")
        << c.layer;
    references.push_back(c.reference);
    worst = std::max(worst, c.max_error);
  }
  // Every model has tuned tasks and generated kernels (at least the copies to the graph outputs).
  EXPECT_NE(std::count(references.begin(), references.end(), "task reference"), 0);
  EXPECT_NE(std::count(references.begin(), references.end(), "interpreter"), 0);
  std::printf("%s: %zu steps, worst max error %.2e\n", GetParam(), checks.size(), worst);

  // Step by step is the model run once: the driver's run gives the same bits.
  const std::string stepped = buffers.output_bytes();
  for (float* out : buffers.outputs())
    std::fill(out, out + 1, std::numeric_limits<float>::quiet_NaN());
  runner.run(buffers.inputs(), buffers.outputs());
  EXPECT_EQ(buffers.output_bytes(), stepped);
}

// A step whose output is changed after it ran is the one step reported, whatever its kind; the
// steps after it read the changed values and, checked on those same values, pass (but a max pool
// that a NaN reaches, see below).
TEST_P(ModelCheck, CorruptedStepIsTheOneReported) {
  const BuiltModel m = build(GetParam());
  ModelRunner runner(m);
  ModelBuffers buffers(m.plan, 7);
  std::vector<size_t> victims;
  for (const char* kind : {"task", "layout", "elementwise", "pool"})
    for (size_t i = 0; i < m.plan.steps.size(); ++i)
      if (m.plan.steps[i].kind == kind) {
        victims.push_back(i);
        break;
      }
  ASSERT_GE(victims.size(), 2u);
  for (size_t victim : victims) {
    const int64_t count = m.plan.steps[victim].func.args.back().num_elements();
    for (bool nan : {false, true}) {
      CheckOptions o;
      o.after_step = [&](size_t step, const std::vector<void*>& args) {
        if (step != victim) return;
        float* out = static_cast<float*>(args.back());
        float magnitude = 0;
        for (int64_t k = 0; k < count; ++k) magnitude = std::max(magnitude, std::abs(out[k]));
        out[count / 2] =
            nan ? std::numeric_limits<float>::quiet_NaN() : out[count / 2] + 1 + magnitude;
      };
      const auto bad = failed(check_model_steps(runner, m, buffers.inputs(), buffers.outputs(), o));
      std::string reported;
      for (const StepCheck& b : bad)
        reported += " " + std::to_string(b.step) + " " + b.layer + " (" +
                    std::to_string(b.max_error) + ", " + std::to_string(b.nan_left) + " NaN);";
      ASSERT_FALSE(bad.empty()) << m.plan.steps[victim].layer;
      EXPECT_EQ(bad[0].step, victim) << reported;
      // A NaN may reach a max pool, whose kernel (maxnum) drops it where the reference keeps it:
      // the only other steps a NaN may fail are pools.
      for (size_t k = 1; k < bad.size(); ++k)
        EXPECT_TRUE(nan && bad[k].kind == "pool")
            << "corrupted " << victim << " " << m.plan.steps[victim].layer << ", reported"
            << reported;
      if (nan) {
        EXPECT_EQ(bad[0].nan_left, 1);
      } else {
        EXPECT_EQ(bad[0].nan_left, 0);
        EXPECT_GE(bad[0].max_error, 0.5) << bad[0].layer;
      }
    }
  }
}

// The alignment of the section of a relocatable ELF64 object (little-endian) that holds `bytes`
// bytes or more: the driver's weights are its one section that large. 0 when there is none.
uint64_t alignment_of_section_holding(const std::vector<uint8_t>& elf, uint64_t bytes) {
  const auto u64 = [&](size_t at) {
    uint64_t v = 0;
    std::memcpy(&v, elf.data() + at, 8);
    return v;
  };
  const auto u16 = [&](size_t at) {
    uint16_t v = 0;
    std::memcpy(&v, elf.data() + at, 2);
    return v;
  };
  const uint64_t shoff = u64(0x28);
  for (uint16_t i = 0; i < u16(0x3c); ++i) {
    const size_t header = shoff + size_t{i} * u16(0x3a);
    if (u64(header + 0x20) >= bytes) return u64(header + 0x30);  // sh_size, sh_addralign
  }
  return 0;
}

// Every tensor sits at the same offset within its page wherever the model runs: the driver's
// embedded weights start on a page, and so do the arena and weights `ktune run` times layer by
// layer and the buffers it passes (a linked program and ktune's estimate read one layout).
TEST_P(ModelCheck, WeightsArenaAndBuffersStartOnAPage) {
  const BuiltModel m = build(GetParam());
  ASSERT_GE(m.plan.weights.size(), size_t{4096});
  EXPECT_EQ(alignment_of_section_holding(m.driver.object, m.plan.weights.size()),
            uint64_t{codegen::kModelPageAlign});
  ModelRunner runner(m);
  ModelBuffers buffers(m.plan, 7);
  for (const void* p : buffers.inputs())
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % codegen::kModelPageAlign, 0u);
  for (const float* p : buffers.outputs())
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % codegen::kModelPageAlign, 0u);
  int placed = 0;
  for (size_t i = 0; i < m.plan.steps.size(); ++i) {
    const auto args = runner.step_buffers(i, buffers.inputs(), buffers.outputs());
    for (size_t a = 0; a < args.size(); ++a) {
      const PlanTensor* view = &m.plan.tensors[static_cast<size_t>(m.plan.steps[i].args[a])];
      const PlanTensor* t = view;
      if (t->alias_of >= 0) t = &m.plan.tensors[static_cast<size_t>(t->alias_of)];
      if (t->storage != Storage::kArena && t->storage != Storage::kWeights) continue;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(args[a]) % codegen::kModelPageAlign,
                static_cast<uintptr_t>(view->offset) % codegen::kModelPageAlign)
          << m.plan.steps[i].layer;
      ++placed;
    }
  }
  EXPECT_GT(placed, 0);
}

INSTANTIATE_TEST_SUITE_P(
    SmallModels, ModelCheck,
    ::testing::Values("small_cnn.onnx", "small_mobile.onnx", "tiny_bert.onnx",
                      "op_concat_split_v13.onnx", "op_conv_general.onnx"),
    [](const auto& info) {
      return std::string(info.param).substr(0, std::string(info.param).find('.'));
    });

size_t count_lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// op_concat_split's C2f, SPPF and nesting Concats of channel-blocked data have no concat kernel:
// their parts' producers write slices of the output (one part that the SPPF Concat holds already
// is copied into the nesting one), and the C2f Split's outputs are views. The Concats along other
// axes or with a constant part, and the Splits of a graph input or along H, keep their kernels.
// EveryStepMatchesItsReference checks the values of this model step by step.
TEST(ConcatInPlace, ChannelConcatsOfBlockedDataAreSlicesOfOneBuffer) {
  const BuiltModel m = build("op_concat_split_v13.onnx");
  int concats = 0, copies = 0, slices = 0;
  for (const PlanStep& s : m.plan.steps) {
    concats += ends_with(s.symbol, "_concat");
    copies += ends_with(s.symbol, "_concat_part");
    slices += ends_with(s.symbol, "_slice");
  }
  EXPECT_EQ(concats, 3);
  EXPECT_EQ(copies, 1);
  EXPECT_EQ(slices, 3 + 2 + 5);
  // Parts placed past the start of a Concat's output: C2f's second half and bottleneck, SPPF's
  // two pools, and within the nesting Concat the C2f's parts again (their root moved with it).
  int placed = 0;
  for (const PlanTensor& t : m.plan.tensors) {
    if (t.alias_of < 0 || t.view_offset == 0) continue;
    ++placed;
    EXPECT_EQ(t.view_offset % 64, 0) << t.name;
    EXPECT_LE(t.view_offset + t.bytes(), m.plan.tensors[static_cast<size_t>(t.alias_of)].bytes())
        << t.name;
  }
  EXPECT_GE(placed, 4);
}

// op_gather's q, k and v of a computed [3, 2, 4, 8] tensor (a scalar index on axis 0: 256
// contiguous bytes each) are views of it at offsets 0, 256 and 512, no kernel; those of the graph
// input (no view into the caller's buffer), of a class token (axis 1), of the last index of the
// last axis and of index lists keep their kernels. EveryOperatorTestModelMatchesOnnxRuntime
// (model_build_cli_test) checks its values against ONNX Runtime.
TEST(SliceAsView, ContiguousGathersAreViews) {
  const BuiltModel m = build("op_gather.onnx");
  int gathers = 0;
  for (const PlanStep& s : m.plan.steps) gathers += ends_with(s.symbol, "_gather");
  EXPECT_EQ(gathers, 7);
  std::vector<int64_t> offsets;
  for (const PlanTensor& t : m.plan.tensors)
    if (t.alias_of >= 0 && t.name.rfind("qkv", 0) == 0) offsets.push_back(t.view_offset);
  std::sort(offsets.begin(), offsets.end());
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 256, 512}));
}

// op_conv_general's head conv (20 channels: one whole block and one partly filled) read through a
// Reshape and a Transpose (YOLO's head), a Reshape to patches and a Transpose (ViT's), and a
// Transpose to NHWC: each is one kernel from the blocked layout (named after the Reshape and the
// Transpose it covers), with no conversion of the conv's output to ONNX's layout and no plain
// transpose. EveryStepMatchesItsReference checks their values step by step,
// EveryOperatorTestModelMatchesOnnxRuntime (model_build_cli_test) against ONNX Runtime.
TEST(BlockedTranspose, ConvOutputsAreTransposedFromTheBlockedLayout) {
  const BuiltModel m = build("op_conv_general.onnx");
  std::vector<std::string> layers;
  for (const PlanStep& s : m.plan.steps) {
    if (ends_with(s.symbol, "_transpose_blocked")) layers.push_back(s.layer);
    EXPECT_FALSE(ends_with(s.symbol, "_transpose")) << s.layer;
    EXPECT_NE(s.layer.rfind("layout head", 0), 0u) << s.layer;
  }
  EXPECT_EQ(layers,
            (std::vector<std::string>{"cells_33+anchors_34", "patches_37+tokens_38", "nhwc_39"}));
}

// op_conv_transpose's transposed convs of 2 to 4 output channels: their DepthToSpace writes ONNX's
// layout (blocked, most lanes would be padding), and no conversion follows it.
// EveryOperatorTestModelMatchesOnnxRuntime (model_build_cli_test) checks their values against
// ONNX Runtime.
TEST(BlockedTranspose, AFewChannelsDepthToSpaceWritesOnnxLayout) {
  const BuiltModel m = build("op_conv_transpose.onnx");
  int shuffles = 0;
  for (const PlanStep& s : m.plan.steps) {
    if (!ends_with(s.symbol, "_depth_to_space")) continue;
    ++shuffles;
    const PlanTensor& out = m.plan.tensors[static_cast<size_t>(s.args.back())];
    EXPECT_LT(out.shape.at(1), 8) << s.layer;
    EXPECT_EQ(out.block, 0) << s.layer;
    for (const PlanStep& t : m.plan.steps) EXPECT_NE(t.layer, "layout " + out.name) << s.layer;
  }
  EXPECT_EQ(shuffles, 4);
}

// op_matmul's attention scores (q times a Transpose of its last two axes, batched and 2-D) are
// FusedMatMul tasks that read B as it is (frontend's fold_transpose_into_matmul): the only
// transpose kernel left is the one of Gemm's transA.
TEST(FoldedTranspose, ScoresReadTheKeysUntransposed) {
  const BuiltModel m = build("op_matmul.onnx");
  std::vector<std::string> transposes, products;
  for (const PlanStep& s : m.plan.steps) {
    if (ends_with(s.symbol, "_transpose")) transposes.push_back(s.layer);
    if (s.layer == "scores_2" || s.layer == "gram_6") products.push_back(s.symbol);
  }
  EXPECT_EQ(transposes, std::vector<std::string>{"gemm_17 transA"});
  ASSERT_EQ(products.size(), 2u);
  EXPECT_TRUE(ends_with(products[0], "_batch_matmul")) << products[0];
  EXPECT_TRUE(ends_with(products[1], "_matmul")) << products[1];
}

TEST(ModelCheckCli, CheckNodesPrintsEveryStepAndFailsPastTheTolerance) {
  const std::string onnx = quote(model("small_cnn.onnx")) + " --untuned";
  const BuiltModel m = build("small_cnn.onnx");
  const auto ok = ktune("run " + onnx + " --check-nodes --tolerance 1e-5", true);
  ASSERT_EQ(ok.status, 0) << ok.out << ok.err;
  EXPECT_EQ(count_lines(ok.out), m.plan.steps.size() + 2)
      << ok.out;  // a heading, the steps, a summary
  for (const PlanStep& s : m.plan.steps)
    EXPECT_NE(ok.out.find(s.layer), std::string::npos) << s.layer;
  EXPECT_NE(ok.out.find("check-nodes: " + std::to_string(m.plan.steps.size()) +
                        " steps against te's reference, 0 past"),
            std::string::npos)
      << ok.out;

  // A tolerance no difference is below: every step is past it, and the first is named.
  const auto bad = ktune("run " + onnx + " --check-nodes --tolerance -1", true);
  testing_cli::expect_one_line_error(
      bad, "step 0 (" + m.plan.steps[0].layer + ") differs from its reference");
  size_t failed_lines = 0;
  for (size_t at = bad.out.find("FAILED"); at != std::string::npos;
       at = bad.out.find("FAILED", at + 1))
    ++failed_lines;
  EXPECT_EQ(failed_lines, m.plan.steps.size()) << bad.out;

  testing_cli::expect_one_line_error(ktune("run " + onnx + " --check-nodes --check", true),
                                     "--check");
}

}  // namespace
}  // namespace ktune::deploy
