// Defines FleetMeasurer, the Measurer of a server-side job: candidates go to the device workers of
// a key.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rpc_runner/server/device_pool.h"
#include "tuner/measure.h"

namespace ktune::rpc_runner {

struct FleetMeasurerOptions {
  tuner::MeasureOptions measure;  // run_threads 0: the device's default
};

// Each measure() queues its candidates (task + config; the worker builds the kernel) in the
// pool under the job's id and waits for all their results, in input order. When a device of
// the job's key cannot build (no LLVM: boards, phones), the server cross-builds each candidate
// for the task's target in a thread pool, and sends the kernel with the task's reference
// kernel; a candidate that fails to instantiate or build here gets its error without being
// sent, and a build over the build timeout is kBuildTimeout. The job's queue
// must be open (DevicePool::open_job) for as long as the measurer is used. Every result is
// checked (check_result in peer_checks.h: costs and times finite and in range, no faster than
// the device's ceiling) before the tuner sees it: a buggy or lying worker must not poison the
// log. A refused result becomes an error result of kind kUnknown naming the worker, and the
// worker is flagged in the pool. Not thread-safe: one measure() at a time.
class FleetMeasurer : public tuner::Measurer {
 public:
  // stop: polled while waiting; true makes measure() throw Error(kIo, "job stopped").
  FleetMeasurer(DevicePool& pool, uint64_t job_id, std::string device_key,
                FleetMeasurerOptions options, std::function<bool()> stop);
  ~FleetMeasurer() override;

  // Returns one result per input. Throws Error(kIo) when stopped before every result came.
  std::vector<tuner::MeasureResult> measure(
      const std::vector<tuner::MeasureInput>& inputs) override;

 private:
  struct CrossBuilder;
  DevicePool& pool_;
  uint64_t job_id_;
  std::string device_key_;
  FleetMeasurerOptions options_;
  std::function<bool()> stop_;
  std::unique_ptr<CrossBuilder> builder_;  // made on first need
};

}  // namespace ktune::rpc_runner
