// Declares watch_job and follow_model_job: follow a server-side tuning job (one workload or a
// model) with the local run's progress display and summary.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "rpc_runner/client/service_client.h"
#include "tuner/model_tuning.h"

namespace ktune::tools {

// Validates `job` (one line for a bad spec) and submits it with this user as its owner. Returns
// its id to follow, or nullopt after printing "job N submitted" when `detach`. Throws what the
// client throws.
std::optional<uint64_t> submit_job(rpc_runner::ServiceClient& client, rpc_runner::JobSpec job,
                                   bool detach);

// Streams the job's progress to stderr (the same bar or lines as a local `ktune tune`, or for a
// model job the live per-task table of `ktune tune-model`), then prints its summary (text, or
// JSON with `json`) to stdout. Returns when the job has ended.
// Throws Error(kRun) when the job failed, was cancelled or no config succeeded; what the
// client throws when the server cannot be reached for long.
void watch_job(rpc_runner::ServiceClient& client, uint64_t id, bool json);

// Follows a model job: state changes as lines on stderr (unless quiet), each model report to
// on_report. Returns the last event, whose summary_json is the job's tuner::model_summary_json.
// Throws Error(kRun) when the job failed or was cancelled (one line, with the server's message);
// what the client throws.
rpc_runner::JobEvent follow_model_job(
    rpc_runner::ServiceClient& client, uint64_t id, bool quiet,
    const std::function<void(const tuner::ModelTuningReport&)>& on_report);

}  // namespace ktune::tools
