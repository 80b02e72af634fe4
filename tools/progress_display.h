// Defines ProgressDisplay: the terminal view of a tuning run's progress (a redrawn bar, or plain
// lines).
#pragma once

#include <cstdio>

#include "tuner/tuning_session.h"

namespace ktune::tools {

// Shows trials done / budget, the best GFLOP/s so far, errors, the model's rank correlation and
// the ETA after each batch: one redrawn line on a terminal, otherwise one plain line per batch
// ("trials 16/64 best_gflops 12.34 errors 0 elapsed_s 1.2 eta_s 3.6"). The same display serves a
// local run and a job followed from a tuning server. Never throws.
class ProgressDisplay {
 public:
  explicit ProgressDisplay(std::FILE* out = stderr, bool force_plain = false);
  void show(const tuner::ProgressSnapshot& progress);
  // Ends a redrawn bar that did not reach its total with a newline.
  void finish();

 private:
  std::FILE* out_;
  bool terminal_;
  bool open_line_ = false;
};

}  // namespace ktune::tools
