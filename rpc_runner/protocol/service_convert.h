// Declares the conversions between the service's plain types (job_types.h: jobs, devices; tasks and
// measurement settings) and their protobuf messages.
#pragma once

#include "rpc_runner/protocol/job_types.h"
#include "rpc_runner/protocol/ktune.pb.h"
#include "rpc_runner/protocol/measure_convert.h"
#include "rpc_runner/protocol/service_protocol.h"
#include "schedule_space/task.h"
#include "tuner/measure.h"

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
// Throws Error(kInvalidArgument) when the metrics do not read.
ServerStatus from_proto(const rpc::StatusReply& reply);

// The proto TaskSpec of a task (what a worker needs to rebuild it exactly).
void to_proto(const schedule_space::Task& task, rpc::TaskSpec* out);
// The task of a TaskSpec, rebuilt with exactly its traits so that config indices agree. Throws
// Error(kInvalidArgument) for arguments that are not a JSON object, and what Task::create throws.
schedule_space::Task from_proto(const rpc::TaskSpec& spec);
// A worker's result as a MeasureResult (an unknown error kind becomes kUnknown).
tuner::MeasureResult from_proto(const rpc::CandidateResult& r);

}  // namespace ktune::rpc_runner
