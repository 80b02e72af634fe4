// Defines the CostModel interface (fit, predict, save, load), FeatureMatrix and throughput_labels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ktune::cost_model {

// A dense row-major matrix of features: row r is data[r * cols, (r + 1) * cols).
struct FeatureMatrix {
  size_t rows = 0;
  size_t cols = 0;
  std::vector<float> data;

  FeatureMatrix() = default;
  FeatureMatrix(size_t rows_, size_t cols_) : rows(rows_), cols(cols_), data(rows_ * cols_) {}
  std::span<float> row(size_t r) { return {data.data() + r * cols, cols}; }
  std::span<const float> row(size_t r) const { return {data.data() + r * cols, cols}; }
  // Appends one row; throws Error(kInvalidArgument) when its length is not cols (or sets cols
  // when the matrix is empty).
  void append(std::span<const float> values);
};

// A model that ranks candidates: higher predictions mean faster programs. Only the order of
// the predictions is meaningful, not their scale.
// Thread-safety: implementations allow concurrent const calls (predict, save); fit and load
// need exclusive access.
class CostModel {
 public:
  virtual ~CostModel() = default;

  // Short stable name ("xgb").
  virtual std::string name() const = 0;

  // Fits the model from scratch. labels[r] is the quality of row r (higher is better, e.g.
  // from throughput_labels). groups, when not empty, are the sizes of consecutive query groups
  // (rows are only compared within their group) and must sum to x.rows.
  // Throws Error(kInvalidArgument) on mismatched sizes or an empty matrix, Error(kInternal) when
  // the underlying library fails.
  virtual void fit(const FeatureMatrix& x, std::span<const float> labels,
                   std::span<const uint32_t> groups = {}) = 0;

  // Returns one score per row of x. Throws Error(kInvalidArgument) before the first fit or load
  // or when x.cols differs from the fitted width, Error(kInternal) when the library fails.
  virtual std::vector<float> predict(const FeatureMatrix& x) const = 0;

  // True once fit or load succeeded.
  virtual bool fitted() const = 0;

  // Returns the fitted model as bytes that load() accepts (tuning_db stores them).
  // Throws Error(kInvalidArgument) when nothing is fitted.
  virtual std::vector<uint8_t> save() const = 0;

  // Replaces the model by one produced by save(). Throws Error(kInvalidArgument) for bytes that
  // are not such a model.
  virtual void load(std::span<const uint8_t> bytes) = 0;
};

// Returns training labels from measured mean costs (seconds): throughput 1 / cost, normalized
// so the best is 1. A failed measurement (cost <= 0, NaN or infinite) gets 0. When all failed,
// every label is 0. (flop cancels out within one task, so it is not needed.)
std::vector<float> throughput_labels(std::span<const double> mean_costs);

}  // namespace ktune::cost_model
