// XGBoostModel: rank:pairwise through XGBoost's C API, with early stopping on held-out NDCG@k.
#include "cost_model/xgboost_model.h"

#include <spdlog/spdlog.h>
#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>

#include "cost_model/ranking_metrics.h"
#include "support/error.h"

namespace ktune::cost_model {
namespace {

// Throws Error(kind) carrying XGBoost's own message when a C API call failed.
void check(int rc, const char* what, ErrorKind kind = ErrorKind::kInternal) {
  if (rc != 0) throw Error(kind, std::string("xgboost: ") + what + ": " + XGBGetLastError());
}

// XGBoost prints to stdout by default; route its messages into spdlog instead, once per process.
void route_xgboost_log() {
  static std::once_flag once;
  std::call_once(once, [] {
    XGBRegisterLogCallback([](const char* message) { spdlog::debug("xgboost: {}", message); });
  });
}

class DMatrix {
 public:
  // Builds a matrix of the given rows of x (all rows when `rows` is null), with labels and
  // groups when they are not empty.
  DMatrix(const FeatureMatrix& x, const std::vector<size_t>* rows, std::span<const float> labels,
          std::span<const uint32_t> groups) {
    const float* data = x.data.data();
    size_t n = x.rows;
    std::vector<float> gathered;
    if (rows != nullptr) {
      n = rows->size();
      gathered.resize(n * x.cols);
      for (size_t i = 0; i < n; ++i) {
        auto src = x.row((*rows)[i]);
        std::copy(src.begin(), src.end(), gathered.begin() + static_cast<ptrdiff_t>(i * x.cols));
      }
      data = gathered.data();
    }
    check(
        XGDMatrixCreateFromMat(data, n, x.cols, std::numeric_limits<float>::quiet_NaN(), &handle_),
        "create DMatrix");
    if (!labels.empty()) {
      check(XGDMatrixSetFloatInfo(handle_, "label", labels.data(), labels.size()), "set labels");
    }
    if (!groups.empty()) {
      check(XGDMatrixSetUIntInfo(handle_, "group", groups.data(), groups.size()), "set groups");
    }
  }
  ~DMatrix() { XGDMatrixFree(handle_); }
  DMatrix(const DMatrix&) = delete;
  DMatrix& operator=(const DMatrix&) = delete;
  DMatrixHandle get() const { return handle_; }

 private:
  DMatrixHandle handle_ = nullptr;
};

// Predicts trees [begin, end) of the booster on m (end 0 = every tree).
std::vector<float> predict_range(BoosterHandle booster, const DMatrix& m, int begin, int end) {
  std::string config = R"({"type": 0, "training": false, "iteration_begin": )" +
                       std::to_string(begin) + R"(, "iteration_end": )" + std::to_string(end) +
                       R"(, "strict_shape": false})";
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* out = nullptr;
  check(XGBoosterPredictFromDMatrix(booster, m.get(), config.c_str(), &shape, &dim, &out),
        "predict");
  bst_ulong n = 1;
  for (bst_ulong d = 0; d < dim; ++d) n *= shape[d];
  return std::vector<float>(out, out + n);
}

}  // namespace

struct XGBoostModel::Booster {
  BoosterHandle handle = nullptr;

  Booster(const DMatrixHandle* cache, bst_ulong n) {
    check(XGBoosterCreate(cache, n, &handle), "create booster");
  }
  ~Booster() { XGBoosterFree(handle); }
  Booster(const Booster&) = delete;
  Booster& operator=(const Booster&) = delete;

  void set(const char* name, const std::string& value) {
    check(XGBoosterSetParam(handle, name, value.c_str()), name);
  }
  void configure(const XGBoostParams& p) {
    set("verbosity", "0");
    set("objective", p.objective);
    set("max_depth", std::to_string(p.max_depth));
    set("gamma", std::to_string(p.gamma));
    set("min_child_weight", std::to_string(p.min_child_weight));
    set("eta", std::to_string(p.eta));
    set("lambda", std::to_string(p.lambda));
    set("alpha", std::to_string(p.alpha));
    set("nthread", std::to_string(std::max(1, p.threads)));
    set("seed", std::to_string(p.seed & 0x7fffffffu));
    set("tree_method", p.tree_method);
  }
};

XGBoostModel::XGBoostModel(XGBoostParams params) : params_(std::move(params)) {
  route_xgboost_log();
}

XGBoostModel::~XGBoostModel() = default;

bool XGBoostModel::fitted() const {
  std::lock_guard lock(mutex_);
  return booster_ != nullptr;
}

namespace {

// Train and validation row indices, each with its group sizes, split inside every group.
struct Split {
  std::vector<size_t> train_rows, valid_rows;
  std::vector<uint32_t> train_groups, valid_groups;
  std::vector<float> train_labels, valid_labels;
};

Split split_rows(std::span<const float> labels, std::span<const uint32_t> groups, double fraction,
                 uint64_t seed) {
  Split s;
  std::mt19937_64 rng(seed);
  size_t start = 0;
  for (uint32_t g : groups) {
    std::vector<size_t> idx(g);
    std::iota(idx.begin(), idx.end(), start);
    std::shuffle(idx.begin(), idx.end(), rng);
    auto n_valid = static_cast<size_t>(std::floor(g * fraction));
    if (g - n_valid < 2) n_valid = 0;  // a group needs two rows to form a pair
    if (n_valid == 1) n_valid = 0;
    for (size_t i = 0; i < g; ++i) {
      bool valid = i < n_valid;
      (valid ? s.valid_rows : s.train_rows).push_back(idx[i]);
      (valid ? s.valid_labels : s.train_labels).push_back(labels[idx[i]]);
    }
    if (n_valid > 0) s.valid_groups.push_back(static_cast<uint32_t>(n_valid));
    s.train_groups.push_back(static_cast<uint32_t>(g - n_valid));
    start += g;
  }
  return s;
}

// Mean NDCG@k over consecutive groups.
double grouped_ndcg(std::span<const float> scores, std::span<const float> labels,
                    std::span<const uint32_t> groups, size_t k) {
  double sum = 0.0;
  size_t start = 0;
  for (uint32_t g : groups) {
    sum += ndcg_at_k(scores.subspan(start, g), labels.subspan(start, g), k);
    start += g;
  }
  return groups.empty() ? 0.0 : sum / static_cast<double>(groups.size());
}

}  // namespace

void XGBoostModel::fit(const FeatureMatrix& x, std::span<const float> labels,
                       std::span<const uint32_t> groups) {
  if (x.rows == 0 || x.cols == 0) throw Error(ErrorKind::kInvalidArgument, "fit on no data");
  if (x.data.size() != x.rows * x.cols || labels.size() != x.rows) {
    throw Error(ErrorKind::kInvalidArgument, "fit: features and labels disagree in size");
  }
  std::vector<uint32_t> all_groups(groups.begin(), groups.end());
  if (all_groups.empty()) all_groups.push_back(static_cast<uint32_t>(x.rows));
  if (std::accumulate(all_groups.begin(), all_groups.end(), size_t{0}) != x.rows) {
    throw Error(ErrorKind::kInvalidArgument, "fit: group sizes do not sum to the row count");
  }

  FitReport report;
  int rounds = params_.fixed_rounds;
  std::unique_ptr<Booster> booster;
  Split split;
  bool validate = x.rows >= params_.min_rows_for_validation && params_.validation_fraction > 0;
  if (validate) {
    split = split_rows(labels, all_groups, params_.validation_fraction, params_.seed);
    validate = !split.valid_rows.empty();
  }
  if (validate) {
    DMatrix dtrain(x, &split.train_rows, split.train_labels, split.train_groups);
    DMatrix dvalid(x, &split.valid_rows, {}, {});
    DMatrixHandle cache[] = {dtrain.get()};
    booster = std::make_unique<Booster>(cache, 1);
    booster->configure(params_);
    std::vector<float> margin(split.valid_rows.size(), 0.0f);
    double best = -1.0;
    int best_round = 0;
    size_t k = static_cast<size_t>(std::max(1, params_.eval_top_k));
    for (int r = 0; r < params_.max_rounds; ++r) {
      check(XGBoosterUpdateOneIter(booster->handle, r, dtrain.get()), "boost one round");
      // Only the new tree is predicted: the sum of per-tree outputs ranks like the full model.
      std::vector<float> delta = predict_range(booster->handle, dvalid, r, r + 1);
      for (size_t i = 0; i < margin.size(); ++i) margin[i] += delta[i];
      double metric = grouped_ndcg(margin, split.valid_labels, split.valid_groups, k);
      if (metric > best + 1e-9) {
        best = metric;
        best_round = r + 1;
      } else if (r + 1 - best_round >= params_.early_stopping_rounds) {
        break;
      }
    }
    rounds = best_round;
    report.best_metric = best;
    report.train_rows = split.train_rows.size();
    report.validation_rows = split.valid_rows.size();
    if (!params_.refit_on_all_rows) {
      BoosterHandle sliced = nullptr;
      check(XGBoosterSlice(booster->handle, 0, rounds, 1, &sliced), "slice booster");
      XGBoosterFree(booster->handle);
      booster->handle = sliced;
    }
  }
  if (!validate || params_.refit_on_all_rows) {
    DMatrix dall(x, nullptr, labels, all_groups);
    DMatrixHandle cache[] = {dall.get()};
    booster = std::make_unique<Booster>(cache, 1);
    booster->configure(params_);
    for (int r = 0; r < rounds; ++r) {
      check(XGBoosterUpdateOneIter(booster->handle, r, dall.get()), "boost one round");
    }
    report.train_rows = x.rows;
  }
  report.rounds = rounds;
  spdlog::debug("xgb fit: {} rows, {} rounds, held-out ndcg@{} {:.4f}", x.rows, rounds,
                params_.eval_top_k, report.best_metric);
  std::lock_guard lock(mutex_);
  booster_ = std::move(booster);
  num_features_ = x.cols;
  last_fit_ = report;
}

std::vector<float> XGBoostModel::predict(const FeatureMatrix& x) const {
  std::lock_guard lock(mutex_);
  if (!booster_) throw Error(ErrorKind::kInvalidArgument, "predict before fit or load");
  if (x.cols != num_features_ || x.data.size() != x.rows * x.cols) {
    throw Error(ErrorKind::kInvalidArgument, "predict: " + std::to_string(x.cols) +
                                                 " features, the model was fitted on " +
                                                 std::to_string(num_features_));
  }
  if (x.rows == 0) return {};
  DMatrix m(x, nullptr, {}, {});
  return predict_range(booster_->handle, m, 0, 0);
}

std::vector<uint8_t> XGBoostModel::save() const {
  std::lock_guard lock(mutex_);
  if (!booster_) throw Error(ErrorKind::kInvalidArgument, "save before fit or load");
  bst_ulong len = 0;
  const char* bytes = nullptr;
  check(XGBoosterSaveModelToBuffer(booster_->handle, R"({"format": "ubj"})", &len, &bytes),
        "save model");
  return std::vector<uint8_t>(bytes, bytes + len);
}

void XGBoostModel::load(std::span<const uint8_t> bytes) {
  if (bytes.empty()) throw Error(ErrorKind::kInvalidArgument, "load: no model bytes");
  auto booster = std::make_unique<Booster>(nullptr, 0);
  check(XGBoosterLoadModelFromBuffer(booster->handle, bytes.data(), bytes.size()), "load model",
        ErrorKind::kInvalidArgument);
  bst_ulong features = 0;
  check(XGBoosterGetNumFeature(booster->handle, &features), "feature count",
        ErrorKind::kInvalidArgument);
  int rounds = 0;
  check(XGBoosterBoostedRounds(booster->handle, &rounds), "boosted rounds",
        ErrorKind::kInvalidArgument);
  if (features == 0 || rounds == 0) {
    throw Error(ErrorKind::kInvalidArgument, "load: the bytes hold an empty model");
  }
  booster->set("nthread", std::to_string(std::max(1, params_.threads)));
  std::lock_guard lock(mutex_);
  booster_ = std::move(booster);
  num_features_ = features;
  last_fit_ = FitReport{.rounds = rounds};
}

}  // namespace ktune::cost_model
