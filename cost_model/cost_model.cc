// The label helper and FeatureMatrix methods of cost_model.h.
#include "cost_model/cost_model.h"

#include <algorithm>
#include <cmath>

#include "support/error.h"

namespace ktune::cost_model {

void FeatureMatrix::append(std::span<const float> values) {
  if (rows == 0 && data.empty()) cols = values.size();
  if (values.size() != cols) {
    throw Error(ErrorKind::kInvalidArgument, "feature row has " + std::to_string(values.size()) +
                                                 " values, the matrix has " + std::to_string(cols) +
                                                 " columns");
  }
  data.insert(data.end(), values.begin(), values.end());
  ++rows;
}

std::vector<float> throughput_labels(std::span<const double> mean_costs) {
  std::vector<float> labels(mean_costs.size(), 0.0f);
  double best = 0.0;
  for (size_t i = 0; i < mean_costs.size(); ++i) {
    double c = mean_costs[i];
    if (std::isfinite(c) && c > 0.0) best = std::max(best, 1.0 / c);
  }
  if (best <= 0.0) return labels;
  for (size_t i = 0; i < mean_costs.size(); ++i) {
    double c = mean_costs[i];
    if (std::isfinite(c) && c > 0.0) labels[i] = static_cast<float>((1.0 / c) / best);
  }
  return labels;
}

}  // namespace ktune::cost_model
