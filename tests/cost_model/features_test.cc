// Tests of the loop-context features: exact values on a hand-built nest, and one fixed length
// for every config of the matmul template.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <set>

#include "cost_model/loop_features.h"
#include "schedule_space/task.h"
#include "schedule_space/workload.h"

namespace ktune::cost_model {
namespace {

float log2p(double x) { return static_cast<float>(std::log2(1.0 + x)); }

// for i in [0, 4) parallel: for j in [0, 8) vectorized: C[i*8 + j] = A[i*8 + j] + B[j]
te::Stmt small_nest() {
  te::Buffer a = te::Buffer::make("A", te::Float(32)), b = te::Buffer::make("B", te::Float(32)),
             c = te::Buffer::make("C", te::Float(32));
  te::Var i("i"), j("j");
  te::Expr row = te::Add::make(te::Mul::make(i, te::IntImm::make(8)), j);
  te::Stmt store =
      te::Store::make(c, te::Add::make(te::Load::make(a, row), te::Load::make(b, j)), row);
  te::Stmt inner =
      te::For::make(j, te::IntImm::make(0), te::IntImm::make(8), te::ForKind::kVectorized, store);
  return te::For::make(i, te::IntImm::make(0), te::IntImm::make(4), te::ForKind::kParallel, inner);
}

TEST(LoopFeatures, ExactValuesOnAHandBuiltNest) {
  std::vector<float> f = loop_context_features(small_nest());
  ASSERT_EQ(f.size(), kLoopContextLength);
  EXPECT_EQ(f[0], 0.0f);             // lowered fine
  EXPECT_FLOAT_EQ(f[1], log2p(32));  // store executions
  EXPECT_EQ(f[3], 2.0f);             // loops
  EXPECT_EQ(f[4], 2.0f);             // depth
  EXPECT_EQ(f[5], 1.0f);             // parallel
  EXPECT_EQ(f[6], 1.0f);             // vectorized
  EXPECT_FLOAT_EQ(f[9], log2p(8));   // vector lanes
  const float* inner = &f[kGlobalFeatures];
  EXPECT_FLOAT_EQ(inner[0], log2p(8));
  EXPECT_EQ(inner[1], 2.0f);            // depth 2
  EXPECT_FLOAT_EQ(inner[2], log2p(4));  // product above
  EXPECT_FLOAT_EQ(inner[3], log2p(1));  // nothing below
  EXPECT_EQ(inner[6], 1.0f);            // vectorized
  const float* outer = inner + kPerLoop;
  EXPECT_FLOAT_EQ(outer[0], log2p(4));
  EXPECT_FLOAT_EQ(outer[3], log2p(8));
  EXPECT_EQ(outer[5], 1.0f);  // parallel
  const float* unused = inner + 2 * kPerLoop;
  for (size_t k = 0; k < kPerLoop; ++k) EXPECT_EQ(unused[k], 0.0f);

  const float* buffers = &f[kGlobalFeatures + kLoopSlots * kPerLoop];
  const float* c = buffers;  // written
  const float* a = buffers + kPerBuffer;
  const float* b = buffers + 2 * kPerBuffer;
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], 1.0f);
  EXPECT_EQ(a[1], 0.0f);
  EXPECT_EQ(a[3], 1.0f);                     // unit stride along j
  EXPECT_FLOAT_EQ(a[4], log2p(8 * 4));       // 8 floats in the innermost loop
  EXPECT_FLOAT_EQ(a[7], log2p(32 * 4));      // 32 floats over the nest
  EXPECT_FLOAT_EQ(a[8], log2p(1));           // no reuse
  EXPECT_FLOAT_EQ(b[7], log2p(8 * 4));       // B[j]: 8 floats
  EXPECT_FLOAT_EQ(b[8], log2p(4));           // each read 4 times
  EXPECT_EQ(buffers[3 * kPerBuffer], 0.0f);  // no fourth buffer
}

schedule_space::Task matmul_task() {
  auto target = schedule_space::make_target_traits("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4",
                                                   "x86_64-linux-gnu", 512, 1);
  return schedule_space::Task::create("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}, target);
}

TEST(LoopFeatures, OneLengthForEveryConfigOfATemplate) {
  schedule_space::Task task = matmul_task();
  const auto& space = task.space();
  LoopFeatureExtractor features(task, LoopFeatureParams{.cache = {.threads = 2}});
  EXPECT_EQ(features.length(), kLoopContextLength + space.knob_feature_length());

  std::mt19937_64 rng(7);
  std::vector<uint64_t> indices = space.sample(200, rng);
  ASSERT_EQ(indices.size(), 200u);
  auto start = std::chrono::steady_clock::now();
  FeatureMatrix m = features.extract(indices);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("ms_per_config", std::to_string(1e3 * seconds / 200));
  ASSERT_EQ(m.rows, 200u);
  ASSERT_EQ(m.cols, features.length());
  // Every row is the extractor's row of the same width and says "lowered" for valid configs;
  // the features really differ between configs.
  // (Configs that the template cannot schedule carry the failure flag and zeros.)
  std::set<std::vector<float>> distinct;
  size_t lowered = 0;
  std::vector<float> failed = failed_loop_context_features();
  for (size_t r = 0; r < m.rows; ++r) {
    auto row = m.row(r);
    std::vector<float> context(row.begin(), row.begin() + kLoopContextLength);
    if (row[0] != 0.0f) {
      EXPECT_EQ(context, failed);
      continue;
    }
    ++lowered;
    distinct.insert(context);
    // The matmul's main store (the accumulation) sits under at least 3 loops, and it touches
    // three buffers (C, A and B or its packed copy).
    EXPECT_GE(row[4], 3.0f);
    EXPECT_EQ(row[kGlobalFeatures + kLoopSlots * kPerLoop + 2 * kPerBuffer], 1.0f);
  }
  RecordProperty("lowered", std::to_string(lowered));
  EXPECT_GE(lowered, 50u);
  EXPECT_GT(distinct.size(), lowered / 2);

  // Cached: the same configs again compute nothing.
  size_t computed = features.computed_rows();
  FeatureMatrix again = features.extract(indices);
  EXPECT_EQ(features.computed_rows(), computed);
  EXPECT_EQ(again.data, m.data);
}

}  // namespace
}  // namespace ktune::cost_model
