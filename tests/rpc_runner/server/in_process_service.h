// Defines the options of a plaintext tuning service in one test process over 127.0.0.1: a
// TuningServer on a free port with its log in a TempDir, DeviceWorkers running kernels in real
// ktune-runner children (KTUNE_RUNNER_PATH), and ServiceClients that ride out short outages.
#pragma once

#include <string>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/server/tuning_server.h"
#include "rpc_runner/worker/device_worker.h"
#include "tests/rpc_runner/server/service_test_util.h"

#ifndef KTUNE_RUNNER_PATH
#error "tests using in_process_service.h need KTUNE_RUNNER_PATH"
#endif

namespace ktune::rpc_runner::testing {

// Short heartbeats, so that a lost worker is noticed within seconds.
inline TuningServerOptions server_options(const TempDir& dir) {
  TuningServerOptions o;
  o.port = 0;
  o.db_path = dir.file("server.db");
  o.heartbeat_s = 0.5;
  o.worker_timeout_s = 3;
  return o;
}

inline DeviceWorkerOptions worker_options(const TuningServer& server, const std::string& key,
                                          int slots = 1) {
  DeviceWorkerOptions o;
  o.server = "127.0.0.1:" + std::to_string(server.port());
  o.key = key;
  o.runner_path = KTUNE_RUNNER_PATH;
  o.slots = slots;
  o.reconnect_initial_s = 0.1;
  o.reconnect_max_s = 0.5;
  return o;
}

inline ServiceClientOptions client_options(const TuningServer& server) {
  ServiceClientOptions o;
  o.server = "127.0.0.1:" + std::to_string(server.port());
  o.reconnect_for_s = 20;
  return o;
}

}  // namespace ktune::rpc_runner::testing
