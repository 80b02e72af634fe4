// The local child implementation of RunnerChannel.
#include "rpc_runner/runner/runner_channel.h"

#include <unistd.h>

#include "codegen/target.h"
#include "rpc_runner/runner/runner_process.h"

namespace ktune::rpc_runner {

ProcessChannel::ProcessChannel(std::string runner_path) : runner_path_(std::move(runner_path)) {
  if (::access(runner_path_.c_str(), X_OK) != 0)
    throw Error(ErrorKind::kIo, "runner executable not found: " + runner_path_);
}

ProcessChannel::~ProcessChannel() = default;

void ProcessChannel::check_target(const std::string& target_key) const {
  if (!codegen::Target::parse(target_key).is_host_compatible())
    throw Error(ErrorKind::kUnsupported, "target cannot run on this host: " + target_key);
}

uint64_t ProcessChannel::ready() {
  if (!child_ || !child_->alive()) {
    child_.reset();
    child_ = std::make_unique<RunnerProcess>(runner_path_);
    ++started_;
  }
  return started_.load();
}

Reply ProcessChannel::call(const Request& request, double timeout_s) {
  ready();
  return child_->call(request, timeout_s);
}

}  // namespace ktune::rpc_runner
