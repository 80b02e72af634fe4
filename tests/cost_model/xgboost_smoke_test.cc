// Smoke test of the XGBoost dependency: a rank:pairwise booster trained through the
// raw C API on synthetic data orders held-out pairs correctly at least 80% of the time.
#include <gtest/gtest.h>
#include <xgboost/c_api.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

constexpr int kFeatures = 6;

// The hidden quality of a row: monotone in x0 and x1, a bump in x2, the rest is noise.
float quality(const float* x) { return 2.0f * x[0] + x[1] - 3.0f * (x[2] - 0.5f) * (x[2] - 0.5f); }

std::vector<float> make_rows(int n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n) * kFeatures);
  for (auto& v : x) v = u(rng);
  return x;
}

TEST(XGBoostSmoke, PairwiseRankerOrdersHeldOutPairs) {
  std::mt19937 rng(42);
  const int n_train = 1000, n_test = 400;
  std::vector<float> train = make_rows(n_train, rng), test = make_rows(n_test, rng);
  std::vector<float> labels(n_train);
  for (int i = 0; i < n_train; ++i) labels[i] = quality(&train[i * kFeatures]);

  DMatrixHandle dtrain = nullptr, dtest = nullptr;
  ASSERT_EQ(XGDMatrixCreateFromMat(train.data(), n_train, kFeatures, NAN, &dtrain), 0);
  ASSERT_EQ(XGDMatrixSetFloatInfo(dtrain, "label", labels.data(), n_train), 0);
  unsigned group = n_train;
  ASSERT_EQ(XGDMatrixSetUIntInfo(dtrain, "group", &group, 1), 0);
  ASSERT_EQ(XGDMatrixCreateFromMat(test.data(), n_test, kFeatures, NAN, &dtest), 0);

  BoosterHandle booster = nullptr;
  ASSERT_EQ(XGBoosterCreate(&dtrain, 1, &booster), 0);
  ASSERT_EQ(XGBoosterSetParam(booster, "objective", "rank:pairwise"), 0);
  ASSERT_EQ(XGBoosterSetParam(booster, "max_depth", "3"), 0);
  ASSERT_EQ(XGBoosterSetParam(booster, "nthread", "1"), 0);
  ASSERT_EQ(XGBoosterSetParam(booster, "seed", "7"), 0);
  for (int r = 0; r < 60; ++r) ASSERT_EQ(XGBoosterUpdateOneIter(booster, r, dtrain), 0);

  bst_ulong len = 0;
  const float* out = nullptr;
  ASSERT_EQ(XGBoosterPredict(booster, dtest, 0, 0, 0, &len, &out), 0);
  ASSERT_EQ(len, static_cast<bst_ulong>(n_test));

  int right = 0, pairs = 0;
  for (int i = 0; i < n_test; ++i) {
    for (int j = i + 1; j < n_test; ++j) {
      float qi = quality(&test[i * kFeatures]), qj = quality(&test[j * kFeatures]);
      if (std::fabs(qi - qj) < 1e-6f) continue;
      ++pairs;
      if ((qi > qj) == (out[i] > out[j])) ++right;
    }
  }
  double accuracy = static_cast<double>(right) / pairs;
  RecordProperty("pair_accuracy", std::to_string(accuracy));
  EXPECT_GE(accuracy, 0.8);

  XGBoosterFree(booster);
  XGDMatrixFree(dtest);
  XGDMatrixFree(dtrain);
}

}  // namespace
