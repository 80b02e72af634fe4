// gRPC's log into spdlog.
#include "rpc_runner/protocol/grpc_log.h"

#include <grpc/support/log.h>

#include <mutex>

#include <spdlog/spdlog.h>

namespace ktune::rpc_runner {
namespace {

void to_spdlog(gpr_log_func_args* args) {
  spdlog::debug("grpc: {} ({}:{})", args->message, args->file, args->line);
}

}  // namespace

void route_grpc_log() {
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(to_spdlog); });
}

}  // namespace ktune::rpc_runner
