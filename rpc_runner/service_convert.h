// Declares the conversions between the service's plain types (job_types.h, DeviceInfo) and their protobuf messages.
#pragma once

#include "rpc_runner/device_pool.h"
#include "rpc_runner/job_types.h"
#include "rpc_runner/proto/ktune.pb.h"
#include "rpc_runner/tuning_server.h"

namespace ktune::rpc_runner {

void to_proto(const JobSpec& spec, rpc::JobSpec* out);
// Throws Error(kInvalidArgument) for arguments that are not a JSON object of strings/numbers.
JobSpec from_proto(const rpc::JobSpec& spec);

void to_proto(const JobStatus& status, rpc::JobInfo* out);
JobStatus from_proto(const rpc::JobInfo& info);

void to_proto(const tuner::ProgressSnapshot& progress, rpc::Progress* out);
tuner::ProgressSnapshot from_proto(const rpc::Progress& progress);

void to_proto(const JobEvent& event, rpc::JobEvent* out);
JobEvent from_proto(const rpc::JobEvent& event);

void to_proto(const WorkerInfo& worker, rpc::Device* out);
DeviceInfo from_proto(const rpc::Device& device);

}  // namespace ktune::rpc_runner
