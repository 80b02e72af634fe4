// Declares print_tune_summary: the text a tuning run ends with, from its summary JSON (local run or
// server job).
#pragma once

#include <iosfwd>

#include <nlohmann/json.hpp>

namespace ktune::tools {

// Prints tuner::summary_json()'s object as `ktune tune` shows it: workload, target, measured
// (ok and errors by kind), best, config, fallback, speed-up, model.
void print_tune_summary(const nlohmann::json& summary, std::ostream& out);

}  // namespace ktune::tools
