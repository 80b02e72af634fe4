// Declares route_grpc_log(): gRPC's own log lines go through spdlog instead of straight to stderr.
#pragma once

namespace ktune::rpc_runner {

// Sends gRPC's log lines to spdlog at debug level (shown with --verbose). gRPC otherwise prints
// its errors to stderr itself ("E1124 ... chttp2_server.cc ..."), beside the one line ktune gives
// for the same failure. Idempotent and thread-safe; the server and every channel call it.
void route_grpc_log();

}  // namespace ktune::rpc_runner
