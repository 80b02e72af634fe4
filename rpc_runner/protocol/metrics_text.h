// Defines MetricSample and the reader of Prometheus' text exposition format, in which the Status
// RPC and the server's metrics endpoint carry its metrics.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ktune::rpc_runner {

// One sample line: `name{label="value",...} value`. A histogram gives name_bucket (with its
// "le" label), name_sum and name_count samples.
struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Reads text format 0.0.4: # lines (HELP, TYPE, comments) and blank lines are skipped; a
// sample's optional timestamp is ignored; values may be NaN, +Inf, -Inf. Throws
// Error(kInvalidArgument) naming the line for one that does not read.
std::vector<MetricSample> parse_metrics_text(std::string_view text);

// The sum of the samples called `name` whose labels include every one of `match` (0 when none).
double metric_sum(const std::vector<MetricSample>& samples, std::string_view name,
                  const std::map<std::string, std::string>& match = {});

}  // namespace ktune::rpc_runner
