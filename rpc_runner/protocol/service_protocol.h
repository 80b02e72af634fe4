// Defines kProtocolVersion, the version of the tuning service's wire contract (proto/ktune.proto).
#pragma once

#include <cstdint>

namespace ktune::rpc_runner {

// Workers and clients of another version are refused with a message naming both.
// 3: workers say whether they are emulated; the server canonicalizes a worker's target and
//    sends devices that cannot build linked shared objects (not relocatable objects).
// 4: model jobs (JobSpec.model_json, JobSpec.strategy, JobEvent.model_report_json); a version-3
//    server would take a model job for a one-workload job without a template.
inline constexpr uint32_t kProtocolVersion = 4;

}  // namespace ktune::rpc_runner
