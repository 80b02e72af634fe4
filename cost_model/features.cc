// CachedFeatureExtractor and KnobFeatureExtractor.
#include "cost_model/features.h"

#include <algorithm>
#include <future>

#include "schedule_space/config_space.h"
#include "support/error.h"
#include "support/thread_pool.h"

namespace ktune::cost_model {

struct CachedFeatureExtractor::Pool {
  explicit Pool(size_t threads) : pool(threads) {}
  ThreadPool pool;
};

CachedFeatureExtractor::CachedFeatureExtractor(size_t length,
                                               std::function<std::vector<float>(uint64_t)> row,
                                               FeatureCacheParams params)
    : length_(length), row_(std::move(row)), params_(params) {
  if (params_.threads > 1) pool_ = std::make_unique<Pool>(params_.threads);
}

CachedFeatureExtractor::~CachedFeatureExtractor() = default;

size_t CachedFeatureExtractor::computed_rows() const {
  std::lock_guard lock(mutex_);
  return computed_;
}

FeatureMatrix CachedFeatureExtractor::extract(const std::vector<uint64_t>& indices) {
  FeatureMatrix out(indices.size(), length_);
  std::vector<size_t> missing;  // positions in `indices` whose row is not cached
  {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < indices.size(); ++i) {
      auto it = cache_.find(indices[i]);
      if (it == cache_.end()) {
        missing.push_back(i);
      } else {
        std::copy(it->second.begin(), it->second.end(), out.row(i).begin());
      }
    }
  }
  if (missing.empty()) return out;

  // Duplicates within one request are computed once.
  std::unordered_map<uint64_t, std::vector<float>> fresh;
  std::vector<uint64_t> todo;
  for (size_t pos : missing) {
    if (fresh.emplace(indices[pos], std::vector<float>{}).second) todo.push_back(indices[pos]);
  }
  std::vector<std::vector<float>> rows(todo.size());
  auto compute = [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) rows[t] = row_(todo[t]);
  };
  if (pool_ && todo.size() > 1) {
    size_t parts = std::min(todo.size(), pool_->pool.size() * 4);
    std::vector<std::future<void>> done;
    for (size_t p = 0; p < parts; ++p) {
      size_t begin = todo.size() * p / parts, end = todo.size() * (p + 1) / parts;
      done.push_back(pool_->pool.submit([&, begin, end] { compute(begin, end); }));
    }
    for (auto& f : done) f.get();  // rethrows the first failure
  } else {
    compute(0, todo.size());
  }
  for (size_t t = 0; t < todo.size(); ++t) {
    if (rows[t].size() != length_) {
      throw Error(ErrorKind::kInternal, "feature row of config " + std::to_string(todo[t]) +
                                            " has " + std::to_string(rows[t].size()) +
                                            " values, expected " + std::to_string(length_));
    }
    fresh[todo[t]] = std::move(rows[t]);
  }
  for (size_t pos : missing) {
    const auto& r = fresh[indices[pos]];
    std::copy(r.begin(), r.end(), out.row(pos).begin());
  }
  std::lock_guard lock(mutex_);
  computed_ += todo.size();
  if (cache_.size() + fresh.size() > params_.max_cached_rows) cache_.clear();
  for (auto& [index, r] : fresh) cache_.emplace(index, std::move(r));
  return out;
}

KnobFeatureExtractor::KnobFeatureExtractor(const schedule_space::ConfigSpace& space)
    : space_(space) {}

size_t KnobFeatureExtractor::length() const { return space_.knob_feature_length(); }

FeatureMatrix KnobFeatureExtractor::extract(const std::vector<uint64_t>& indices) {
  FeatureMatrix out(indices.size(), length());
  for (size_t i = 0; i < indices.size(); ++i) {
    std::vector<float> f = space_.knob_features(indices[i]);
    if (f.size() != out.cols) {
      throw Error(ErrorKind::kInternal, "knob features changed length");
    }
    std::copy(f.begin(), f.end(), out.row(i).begin());
  }
  return out;
}

}  // namespace ktune::cost_model
