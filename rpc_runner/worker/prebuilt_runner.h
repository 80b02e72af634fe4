// Defines PrebuiltRunner: checks and times kernels that arrive built (the server cross-built and
// linked them) in an isolated runner child, with the task references that come with them.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "rpc_runner/protocol/ktune.pb.h"
#include "support/error.h"

namespace ktune::rpc_runner {

class RunnerProcess;

// Needs no compiler: what a device without LLVM (ktune-device) measures with, and what a
// `ktune worker --no-build` uses. Not thread-safe: one caller at a time.
class PrebuiltRunner {
 public:
  // The child is `wrapper... runner_path --fd 3` (see RunnerProcess), started on first use and
  // again after a kernel crashed or hung it.
  explicit PrebuiltRunner(std::string runner_path, std::vector<std::string> wrapper = {});
  ~PrebuiltRunner();
  PrebuiltRunner(const PrebuiltRunner&) = delete;
  PrebuiltRunner& operator=(const PrebuiltRunner&) = delete;

  // Checks the candidate's kernel against its task's reference (computed here from the
  // reference kernel that comes with it, once per child) and times it with the candidate's
  // measurement settings. `target` is this device's canonical target: a candidate of another
  // target comes back kUnsupported, unrun. Returns the typed result; never throws.
  rpc::CandidateResult run(const rpc::Candidate& candidate, const std::string& target);

  // Children started so far (1 + one per crash or hang, once used). Any thread.
  size_t started() const { return started_.load(); }
  // Candidates given to run().
  size_t measured() const { return measured_.load(); }

 private:
  std::string runner_path_;
  std::vector<std::string> wrapper_;
  std::unique_ptr<RunnerProcess> child_;
  std::set<std::string> references_;  // reference keys the current child holds
  std::atomic<size_t> started_{0}, measured_{0};
};

// Returns a result carrying `kind` and `message` for candidate `id`.
rpc::CandidateResult error_result(uint64_t id, ErrorKind kind, const std::string& message);

}  // namespace ktune::rpc_runner
