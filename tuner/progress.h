// Defines the progress callback of the tuning loop: a terminal progress bar or plain lines.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <optional>

#include "schedule_space/task.h"
#include "tuner/tune.h"

namespace ktune::tuner {

struct ProgressOptions {
  std::FILE* out = stderr;  // where to write (not owned); a terminal gets a redrawn bar
  bool force_plain = false; // plain lines even on a terminal
  size_t done_before = 0;   // trials already counted (resume), shown in the totals
  // When set, called after each batch; a value is shown as the model's latest rank
  // correlation ("rho=0.41"). Must not throw.
  std::function<std::optional<double>()> rank_correlation = nullptr;
};

// Returns a callback that shows trials done / n_trial, the best GFLOP/s so far, errors and
// the ETA after each batch: one redrawn line on a terminal (isatty), otherwise one plain line
// per batch. The task must outlive the callback. Never throws.
Callback progress_callback(const schedule_space::Task& task, size_t n_trial,
                           const ProgressOptions& options = {});

}  // namespace ktune::tuner
