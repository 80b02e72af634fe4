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
  // A result is refused (recorded as kUnknown, naming the worker) when it claims more than this
  // many times the device's stated peak: a buggy or lying worker must not poison the log.
  double max_over_peak = 100;
};

// Returns what a device of these traits can do at most in f32 GFLOP/s when it does not say:
// cores x lanes x 2 FMA units x 2 flops x 6 GHz, deliberately generous.
double generous_peak_gflops(int cores, int vector_bits);

// Each measure() queues its candidates (task + config; the worker builds the kernel) in the
// pool under the job's id and waits for all their results, in input order. When a device of
// the job's key cannot build (no LLVM: boards, phones), the server cross-builds each candidate
// for the task's target in a thread pool, and sends the kernel with the task's reference
// kernel; a candidate that fails to instantiate or build here gets its error without being
// sent, and a build over the build timeout is kBuildTimeout. The job's queue
// must be open (DevicePool::open_job) for as long as the measurer is used. A result with costs
// that are not finite and positive, or faster than max_over_peak x the worker's peak, becomes
// an error result. Not thread-safe: one measure() at a time.
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
