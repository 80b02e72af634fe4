// Defines FeatureExtractor (config indices -> fixed-width rows): cache, knob features.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cost_model/cost_model.h"

namespace ktune::schedule_space {
class ConfigSpace;
}

namespace ktune::cost_model {

// Maps configs (indices of one space) to feature rows of one fixed length.
// Thread-safety: extract may be called from several threads at once.
class FeatureExtractor {
 public:
  virtual ~FeatureExtractor() = default;
  // Number of features per row; the same for every config of the space.
  virtual size_t length() const = 0;
  // Returns one row per index, in order. Throws Error(kInvalidArgument) for an index outside
  // the space; other errors of the underlying extraction pass through.
  virtual FeatureMatrix extract(const std::vector<uint64_t>& indices) = 0;
};

struct FeatureCacheParams {
  size_t threads = 1;                // rows computed in parallel (a pool of this size; 1 = inline)
  size_t max_cached_rows = 1 << 18;  // the cache is dropped when it would grow past this
};

// Computes rows with a per-index function, in parallel, and caches them by config index so
// annealing revisits and refits never recompute a row.
class CachedFeatureExtractor final : public FeatureExtractor {
 public:
  // row(index) must return exactly `length` values and be safe to call concurrently.
  CachedFeatureExtractor(size_t length, std::function<std::vector<float>(uint64_t)> row,
                         FeatureCacheParams params = {});
  ~CachedFeatureExtractor() override;

  size_t length() const override { return length_; }
  // Throws Error(kInternal) when row() returns a wrong length; row()'s own errors pass through.
  FeatureMatrix extract(const std::vector<uint64_t>& indices) override;

  // Rows computed so far (cache misses), for tests and telemetry.
  size_t computed_rows() const;

 private:
  struct Pool;
  size_t length_;
  std::function<std::vector<float>(uint64_t)> row_;
  FeatureCacheParams params_;
  std::unique_ptr<Pool> pool_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<float>> cache_;
  size_t computed_ = 0;
};

// The knob features of ConfigSpace::knob_features, as they are (tree models do not care about
// monotone rescaling). The space must outlive the extractor. Cheap, so not cached.
class KnobFeatureExtractor final : public FeatureExtractor {
 public:
  explicit KnobFeatureExtractor(const schedule_space::ConfigSpace& space);
  size_t length() const override;
  FeatureMatrix extract(const std::vector<uint64_t>& indices) override;

 private:
  const schedule_space::ConfigSpace& space_;
};

}  // namespace ktune::cost_model
