// Defines RemoteSession (a device leased from a tuning server) and RemoteRunner, the Measurer over it.
#pragma once

#include <memory>
#include <string>

#include "rpc_runner/channel_runner.h"
#include "rpc_runner/runner_channel.h"
#include "rpc_runner/tuning_server.h"

namespace ktune::rpc_runner {

struct RemoteSessionOptions {
  std::string server;             // "host:port" of the tuning server
  std::string device_key;         // lease a worker registered with this key
  double lease_timeout_s = 10;    // wait this long for a free device
  double connect_timeout_s = 10;  // wait this long for the server to answer at all
  // A reply is awaited for the request's own timeout plus this margin (transfer, queueing on
  // the worker) before the device is declared lost.
  double reply_margin_s = 30;
};

// A leased device: opened in the constructor, held until destruction. Every call is one frame
// to the worker, which runs it on its own ktune-runner child (and replaces that child after a
// crash or timeout, re-sending the references itself: the epoch never changes). A worker or
// server that goes away makes the session lost: call() then throws Error(kIo, "device lost...").
// Not thread-safe: one caller at a time.
class RemoteSession final : public RunnerChannel {
 public:
  // Leases a device. Throws Error(kIo) when the server cannot be reached, Error(kNotFound)
  // ("no free device with key K ...") when no device of the key is free within the lease timeout.
  explicit RemoteSession(const RemoteSessionOptions& options);
  // Ends the session (the device becomes free again).
  ~RemoteSession() override;

  // The device the session holds.
  const DeviceInfo& device() const;

  // Throws Error(kUnsupported), naming both, unless target_key equals the device's target.
  void check_target(const std::string& target_key) const override;
  // Returns 1; throws Error(kIo) once the session is lost.
  uint64_t ready() override;
  Reply call(const Request& request, double timeout_s) override;
  bool lost() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct RemoteRunnerOptions : ChannelRunnerOptions {
  RemoteSessionOptions session;
};

// A ChannelRunner over a RemoteSession: builds for each task's target here (cross-compiling as
// needed) and runs on the leased device. Every task's target must equal the device's target.
// Not thread-safe: one measure() at a time.
class RemoteRunner : public ChannelRunner {
 public:
  // Leases the device; throws as RemoteSession's constructor does.
  explicit RemoteRunner(const RemoteRunnerOptions& options);
  ~RemoteRunner() override;

  const DeviceInfo& device() const { return session_->device(); }

 private:
  RemoteSession* session_;  // owned by the base class
};

}  // namespace ktune::rpc_runner
