// Defines Landscape (every measured config of one task, kept as a small text file) and
// ReplayMeasurer (a Measurer that answers from a landscape instead of running kernels).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "schedule_space/task.h"
#include "support/error.h"
#include "tuner/measure.h"
#include "tuner/tune.h"

namespace ktune::tuner {

// One measured config: its throughput, or the kind of error it failed with.
struct LandscapePoint {
  double gflops = 0;               // 0 when it failed
  std::optional<ErrorKind> error;  // nullopt = success
};

// File format: line 1 is a JSON header (template, args, the target traits the space was built
// with, space size, workload key, where and when it was measured); then one line per config,
// "<index> <gflops>" or "<index> 0 <error kind>".
struct Landscape {
  nlohmann::json header;
  std::unordered_map<uint64_t, LandscapePoint> points;

  // The task the landscape was measured for, restricted to the recorded configs (so every
  // tuner searches exactly the measured set). Throws Error(kInvalidArgument) when the template
  // changed since the recording (another space size or workload key).
  schedule_space::Task task() const;
  // The same task over its whole space (configs not recorded included). Throws as task().
  schedule_space::Task space_task() const;
  double best_gflops() const;
  // How many configs reach `fraction` of the best throughput.
  size_t count_within(double fraction) const;
};

// Throws Error(kIo) when the file cannot be read, Error(kInvalidArgument) when a line is malformed.
Landscape read_landscape(const std::string& path);
// The landscape of `past` (a task's measurements read from the tuning log). `note` says where
// it was measured. Throws Error(kIo) when `path` cannot be written.
void write_landscape(const std::string& path, const schedule_space::Task& task,
                     const std::vector<PastMeasurement>& past, const std::string& note);

// Replays a landscape: costs are flop / recorded throughput; a config that is not in the
// landscape is a kUnknown error (the restricted task never proposes one).
class ReplayMeasurer final : public Measurer {
 public:
  ReplayMeasurer(const Landscape& landscape, double flop) : landscape_(landscape), flop_(flop) {}
  std::vector<MeasureResult> measure(const std::vector<MeasureInput>& inputs) override;

 private:
  const Landscape& landscape_;
  double flop_;
};

}  // namespace ktune::tuner
