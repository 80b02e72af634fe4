// The local runner: a ChannelRunner over a ktune-runner child of this process.
#include "rpc_runner/runner/local_runner.h"

#include <filesystem>

namespace ktune::rpc_runner {
namespace {

LocalRunnerOptions with_runner_path(LocalRunnerOptions options) {
  if (options.runner_path.empty()) options.runner_path = default_runner_path();
  return options;
}

}  // namespace

std::string default_runner_path() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorKind::kIo, "cannot read /proc/self/exe: " + ec.message());
  return (exe.parent_path() / "ktune-runner").string();
}

LocalRunner::LocalRunner(const LocalRunnerOptions& options)
    : ChannelRunner(options,
                    std::make_unique<ProcessChannel>(with_runner_path(options).runner_path)),
      options_(with_runner_path(options)),
      process_(static_cast<ProcessChannel*>(&channel())) {}

LocalRunner::~LocalRunner() = default;

}  // namespace ktune::rpc_runner
