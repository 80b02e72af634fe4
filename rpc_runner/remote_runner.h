// Defines RemoteSession (a device leased from a tuning server) and RemoteRunner, the Measurer over it.
#pragma once

#include <memory>
#include <string>
#include <vector>

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
  size_t devices = 1;  // devices of the key to lease, each its own session, measured at once
};

// A ChannelRunner over one RemoteSession per leased device: builds for each task's target here
// (cross-compiling as needed) and runs each batch spread over the leased devices. Every task's
// target must equal the devices' target. Not thread-safe: one measure() at a time.
class RemoteRunner : public ChannelRunner {
 public:
  // Leases options.devices devices of the key at once, each waiting up to the lease timeout.
  // When fewer are free in that time, runs on those leased (one warning line says how many).
  // Throws Error(kInvalidArgument) when options.devices is 0, Error(kUnsupported) naming them
  // when the leased devices have different targets, and otherwise as RemoteSession's
  // constructor does when no device at all could be leased.
  explicit RemoteRunner(const RemoteRunnerOptions& options);
  ~RemoteRunner() override;

  // The first leased device.
  const DeviceInfo& device() const { return sessions_.front()->device(); }
  // Every leased device, in lease order.
  std::vector<DeviceInfo> devices() const;

 private:
  RemoteRunner(const RemoteRunnerOptions& options, std::vector<std::unique_ptr<RunnerChannel>> sessions);

  std::vector<RemoteSession*> sessions_;  // owned by the base class
};

}  // namespace ktune::rpc_runner
