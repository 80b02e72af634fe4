// Declares watch_job: follow a server-side tuning job with the local run's progress display and summary.
#pragma once

#include <cstdint>

#include "rpc_runner/service_client.h"

namespace ktune::tools {

// Streams the job's progress to stderr (the same bar or lines as a local `ktune tune`), then
// prints its summary (text, or JSON with `json`) to stdout. Returns when the job has ended.
// Throws Error(kRun) when the job failed, was cancelled or no config succeeded; what the
// client throws when the server cannot be reached for long.
void watch_job(rpc_runner::ServiceClient& client, uint64_t id, bool json);

}  // namespace ktune::tools
