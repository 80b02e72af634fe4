// The prebuilt runner: references first, then the candidate, on a child replaced after a crash.
#include "rpc_runner/worker/prebuilt_runner.h"

#include <chrono>

#include "rpc_runner/protocol/measure_convert.h"
#include "rpc_runner/runner/runner_process.h"
#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

constexpr double kReferenceTimeoutS = 120;  // a plain, untiled kernel: slow, but it must end

}  // namespace

rpc::CandidateResult error_result(uint64_t id, ErrorKind kind, const std::string& message) {
  rpc::CandidateResult r;
  r.set_id(id);
  r.set_error_kind(std::string(to_string(kind)));
  r.set_error_message(message);
  return r;
}

PrebuiltRunner::PrebuiltRunner(std::string runner_path, std::vector<std::string> wrapper)
    : runner_path_(std::move(runner_path)), wrapper_(std::move(wrapper)) {}

PrebuiltRunner::~PrebuiltRunner() = default;

rpc::CandidateResult PrebuiltRunner::run(const rpc::Candidate& c, const std::string& target) {
  const tuner::MeasureOptions m = from_proto(c.measure());
  ++measured_;
  if (c.task().target() != target)
    return error_result(c.id(), ErrorKind::kUnsupported,
                        "this device runs '" + target + "', not '" + c.task().target() + "'");
  if (c.artifact().empty())
    return error_result(c.id(), ErrorKind::kUnsupported,
                        "this device cannot build: the candidate came without its kernel");
  const std::string reference_key =
      c.task().template_name() + c.task().args_json() + "|" + c.task().target();
  const auto start = std::chrono::steady_clock::now();
  try {
    if (!child_ || !child_->alive()) {
      // A fresh child holds no reference.
      child_.reset();
      references_.clear();
      child_ = std::make_unique<RunnerProcess>(runner_path_, wrapper_);
      ++started_;
    }
    if (m.check_correctness && !references_.count(reference_key)) {
      if (c.reference_artifact().empty())
        return error_result(c.id(), ErrorKind::kUnknown,
                            "no reference kernel came with the candidate");
      Request ref;
      ref.type = RequestType::kReference;
      ref.reference_key = reference_key;
      ref.artifact.assign(c.reference_artifact().begin(), c.reference_artifact().end());
      ref.measure = m;
      const Reply reply = child_->call(ref, kReferenceTimeoutS);
      if (reply.error) {
        // Code for another architecture is the device's answer about every kernel of the task.
        const ErrorKind kind =
            *reply.error == ErrorKind::kUnsupported ? ErrorKind::kUnsupported : ErrorKind::kUnknown;
        return error_result(c.id(), kind, "reference failed: " + reply.message);
      }
      references_.insert(reference_key);
    }
    Request request;
    request.type = RequestType::kMeasure;
    request.reference_key = reference_key;
    request.artifact.assign(c.artifact().begin(), c.artifact().end());
    request.measure = m;
    const Reply reply = child_->call(request, m.run_timeout_s);
    rpc::CandidateResult r;
    r.set_id(c.id());
    if (reply.error) {
      r.set_error_kind(std::string(to_string(*reply.error)));
      r.set_error_message(reply.message);
    } else {
      for (double cost : reply.costs) r.add_costs(cost);
      r.set_outputs(reply.outputs);
    }
    r.set_run_s(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return r;
  } catch (const Error& e) {
    // A crash or hang took the child down (it is restarted for the next candidate).
    const ErrorKind kind = e.kind() == ErrorKind::kRun || e.kind() == ErrorKind::kRunTimeout
                               ? e.kind()
                               : ErrorKind::kUnknown;
    rpc::CandidateResult r = error_result(c.id(), kind, e.what());
    r.set_run_s(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return r;
  }
}

}  // namespace ktune::rpc_runner
