// Tests of XGBoostModel, the ranking metrics and throughput_labels.
#include "cost_model/xgboost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "cost_model/ranking_metrics.h"
#include "support/error.h"

namespace ktune::cost_model {
namespace {

constexpr size_t kKnobs = 8;

// A synthetic "schedule landscape": each row is 8 knob values in 0..15 (like log2 tile sizes
// and annotation choices); the runtime has a known optimum and interactions, and some
// configs fail (inf cost), as real measurements do.
double synthetic_cost(std::span<const float> x) {
  double c = 1.0;
  c += 0.05 * (x[0] - 9) * (x[0] - 9);  // best tile near 9
  c += 0.03 * (x[1] - 4) * (x[1] - 4);
  c += (x[2] > 7 ? 0.4 : 0.0);               // a bad annotation
  c *= 1.0 + 0.02 * std::fabs(x[3] - x[4]);  // interaction
  c += 0.01 * x[5];
  return c;  // x[6], x[7]: irrelevant
}

FeatureMatrix random_rows(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> knob(0, 15);
  FeatureMatrix x(n, kKnobs);
  for (auto& v : x.data) v = static_cast<float>(knob(rng));
  return x;
}

std::vector<double> costs_of(const FeatureMatrix& x, bool with_failures) {
  std::vector<double> costs(x.rows);
  for (size_t r = 0; r < x.rows; ++r) {
    costs[r] = synthetic_cost(x.row(r));
    if (with_failures && x.row(r)[7] == 15) costs[r] = std::numeric_limits<double>::infinity();
  }
  return costs;
}

TEST(ThroughputLabels, NormalizesAndZeroesFailures) {
  std::vector<double> costs = {2.0, 1.0, -1.0, std::numeric_limits<double>::quiet_NaN(), 4.0};
  std::vector<float> y = throughput_labels(costs);
  ASSERT_EQ(y.size(), 5u);
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  EXPECT_FLOAT_EQ(y[1], 1.0f);
  EXPECT_FLOAT_EQ(y[2], 0.0f);
  EXPECT_FLOAT_EQ(y[3], 0.0f);
  EXPECT_FLOAT_EQ(y[4], 0.25f);
  std::vector<double> failed = {0.0, -2.0};
  EXPECT_EQ(throughput_labels(failed), (std::vector<float>{0.0f, 0.0f}));
}

TEST(RankingMetrics, NdcgSpearmanPairwise) {
  std::vector<float> labels = {3, 2, 1, 0};
  std::vector<float> perfect = {0.9f, 0.5f, 0.2f, 0.1f};
  std::vector<float> swapped = {0.5f, 0.9f, 0.2f, 0.1f};
  EXPECT_DOUBLE_EQ(ndcg_at_k(perfect, labels, 4), 1.0);
  double idcg = 3 + 2 / std::log2(3.0) + 1 / std::log2(4.0);
  double dcg = 2 + 3 / std::log2(3.0) + 1 / std::log2(4.0);
  EXPECT_NEAR(ndcg_at_k(swapped, labels, 4), dcg / idcg, 1e-12);
  EXPECT_NEAR(ndcg_at_k(swapped, labels, 1), 2.0 / 3.0, 1e-12);

  std::vector<double> a = {1, 2, 3, 4, 5}, b = {5, 6, 7, 8, 7};
  // ranks of b: 1, 2, 3.5, 5, 3.5 -> Pearson with 1..5.
  EXPECT_NEAR(spearman_correlation(a, b), 0.8207826816681233, 1e-12);
  std::vector<double> rev = {5, 4, 3, 2, 1};
  EXPECT_NEAR(spearman_correlation(a, rev), -1.0, 1e-12);
  std::vector<double> flat = {1, 1, 1, 1, 1};
  EXPECT_EQ(spearman_correlation(a, flat), 0.0);

  EXPECT_DOUBLE_EQ(pairwise_accuracy(perfect, labels), 1.0);
  EXPECT_DOUBLE_EQ(pairwise_accuracy(swapped, labels), 5.0 / 6.0);
  EXPECT_THROW(pairwise_accuracy(perfect, std::vector<float>{1.0f}), Error);
}

TEST(XGBoostModel, RanksASyntheticLandscapeWithAKnownOrder) {
  std::mt19937_64 rng(1);
  FeatureMatrix train = random_rows(512, rng);
  FeatureMatrix test = random_rows(3000, rng);
  std::vector<float> y = throughput_labels(costs_of(train, true));

  XGBoostModel model(XGBoostParams{.seed = 3});
  model.fit(train, y);
  ASSERT_TRUE(model.fitted());
  const FitReport& report = model.last_fit();
  EXPECT_GT(report.rounds, 0);
  EXPECT_LT(report.rounds, model.params().max_rounds);  // early stopping stopped it
  EXPECT_GT(report.best_metric, 0.8);

  std::vector<float> pred = model.predict(test);
  ASSERT_EQ(pred.size(), test.rows);
  std::vector<double> truth = costs_of(test, false), p(pred.begin(), pred.end());
  std::vector<double> throughput(truth.size());
  for (size_t i = 0; i < truth.size(); ++i) throughput[i] = 1.0 / truth[i];
  double rho = spearman_correlation(p, throughput);
  RecordProperty("spearman", std::to_string(rho));
  EXPECT_GT(rho, 0.85);

  // The 10 configs the model likes best are all among the best 5% of the held-out set.
  std::vector<size_t> order(test.rows);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return truth[a] < truth[b]; });
  double top5_cost = truth[order[test.rows / 20]];
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pred[a] > pred[b]; });
  for (size_t i = 0; i < 10; ++i) EXPECT_LE(truth[order[i]], top5_cost) << "pick " << i;
}

TEST(XGBoostModel, GroupsRankWithinEachGroup) {
  // Two tasks whose costs differ by 100x: within-group ranking must still be learned.
  std::mt19937_64 rng(5);
  FeatureMatrix train = random_rows(400, rng);
  std::vector<double> costs = costs_of(train, false);
  for (size_t r = 200; r < 400; ++r) costs[r] *= 100.0;
  std::vector<float> y(400);
  auto y0 = throughput_labels(std::span<const double>(costs).subspan(0, 200));
  auto y1 = throughput_labels(std::span<const double>(costs).subspan(200, 200));
  std::copy(y0.begin(), y0.end(), y.begin());
  std::copy(y1.begin(), y1.end(), y.begin() + 200);
  std::vector<uint32_t> groups = {200, 200};
  XGBoostModel model(XGBoostParams{.seed = 9});
  model.fit(train, y, groups);
  FeatureMatrix test = random_rows(500, rng);
  std::vector<float> pred = model.predict(test);
  std::vector<float> truth(test.rows);
  for (size_t r = 0; r < test.rows; ++r)
    truth[r] = static_cast<float>(1.0 / synthetic_cost(test.row(r)));
  EXPECT_GT(pairwise_accuracy(pred, truth), 0.8);
  std::vector<uint32_t> bad = {200, 100};
  EXPECT_THROW(model.fit(train, y, bad), Error);
}

TEST(XGBoostModel, SaveLoadRoundTripsPredictions) {
  std::mt19937_64 rng(2);
  FeatureMatrix train = random_rows(200, rng);
  XGBoostModel model(XGBoostParams{.seed = 4});
  model.fit(train, throughput_labels(costs_of(train, true)));
  FeatureMatrix test = random_rows(100, rng);
  std::vector<float> before = model.predict(test);
  std::vector<uint8_t> bytes = model.save();
  ASSERT_FALSE(bytes.empty());

  XGBoostModel other;
  EXPECT_FALSE(other.fitted());
  other.load(bytes);
  EXPECT_TRUE(other.fitted());
  EXPECT_EQ(other.predict(test), before);
  EXPECT_EQ(other.last_fit().rounds, model.last_fit().rounds);
}

TEST(XGBoostModel, SameSeedSameModel) {
  std::mt19937_64 rng(8);
  FeatureMatrix train = random_rows(300, rng);
  auto y = throughput_labels(costs_of(train, true));
  XGBoostModel a(XGBoostParams{.seed = 11}), b(XGBoostParams{.seed = 11});
  a.fit(train, y);
  b.fit(train, y);
  FeatureMatrix test = random_rows(50, rng);
  EXPECT_EQ(a.predict(test), b.predict(test));
}

TEST(XGBoostModel, SmallDataTrainsFixedRounds) {
  std::mt19937_64 rng(3);
  FeatureMatrix train = random_rows(16, rng);
  XGBoostModel model(XGBoostParams{.fixed_rounds = 30});
  model.fit(train, throughput_labels(costs_of(train, false)));
  EXPECT_EQ(model.last_fit().rounds, 30);
  EXPECT_EQ(model.last_fit().validation_rows, 0u);
}

TEST(XGBoostModel, TypedErrors) {
  XGBoostModel model;
  FeatureMatrix x(4, 3);
  auto kind_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kUnknown;
  };
  EXPECT_EQ(kind_of([&] { model.predict(x); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { model.save(); }), ErrorKind::kInvalidArgument);
  std::vector<float> short_labels = {1.0f};
  EXPECT_EQ(kind_of([&] { model.fit(x, short_labels); }), ErrorKind::kInvalidArgument);
  std::vector<uint8_t> junk = {1, 2, 3, 4, 5};
  EXPECT_EQ(kind_of([&] { model.load(junk); }), ErrorKind::kInvalidArgument);
  std::vector<float> y = {0.1f, 0.5f, 1.0f, 0.0f};
  for (size_t r = 0; r < 4; ++r) x.row(r)[r % 3] = static_cast<float>(r);
  model.fit(x, y);
  FeatureMatrix wide(2, 5);
  EXPECT_EQ(kind_of([&] { model.predict(wide); }), ErrorKind::kInvalidArgument);
  FeatureMatrix m;
  m.append(std::vector<float>{1, 2});
  EXPECT_EQ(kind_of([&] { m.append(std::vector<float>{1, 2, 3}); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(m.rows, 1u);
}

}  // namespace
}  // namespace ktune::cost_model
