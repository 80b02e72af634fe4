// Defines expect_tune_logs_every_trial(): `ktune tune` of a workload into a log, then the log's
// `db stats` checked against what the run must have written.
#pragma once

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli_util.h"

namespace ktune::testing_cli {

// Tunes `workload` ("TEMPLATE KEY=VALUE ...") for `trials` trials into the log `db` (shell-quoted),
// timing each candidate once, and expects the log to hold exactly the trials and the fallback as
// correct records (the runner checked each against the task's reference) of one workload, keyed
// `key`.
inline void expect_tune_logs_every_trial(const std::string& workload, const std::string& key,
                                         int trials, const std::string& db) {
  const auto tune = ktune("tune " + workload + " --trials " + std::to_string(trials) +
                              " --number 1 --repeat 1 --min-repeat-ms 0 --db " + db,
                          true);
  ASSERT_EQ(tune.status, 0) << tune.err;
  const auto stats = ktune("db stats --json --db " + db, true);
  ASSERT_EQ(stats.status, 0) << stats.err;
  const auto j = nlohmann::json::parse(stats.out);
  ASSERT_EQ(j["per_workload"].size(), 1u) << stats.out;
  const auto& w = j["per_workload"][0];
  EXPECT_EQ(w["workload"], key);
  EXPECT_EQ(w["records"], trials + 1) << stats.out;
  EXPECT_EQ(w["ok_records"], trials + 1) << stats.out;
  EXPECT_EQ(j["failed_records"], 0) << stats.out;
}

}  // namespace ktune::testing_cli
