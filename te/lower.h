// Defines lower(): a schedule and its kernel arguments -> a LoweredFunc (see te/ir.h's contract).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "te/ir.h"
#include "te/schedule.h"

namespace ktune::te {

struct LowerOptions {
  // Log (spdlog info) the IR after each pass. Default off.
  bool dump_after_each_pass = false;
  // Called with (pass name, IR) after each pass when set; for tests and `ktune lower`.
  std::function<void(const std::string&, const Stmt&)> on_pass;
  // Keep kUnrolled loops as serial loops instead of copying bodies (for readable dumps).
  bool unroll = true;
  // Vectorize kVectorized loops; when false they become serial loops.
  bool vectorize = true;
  // Skip the taps of an inlined padding and run interior tiles unguarded (see skip_padding_taps)
  // where the schedule asks for it (Schedule::skip_padding_taps). Default on.
  bool skip_padding_taps = true;
  // Peel split tails so that main loops run without guards (see partition_loops). Default on.
  bool partition_loops = true;
};

// Lowers the schedule to a kernel whose arguments are `args` in this order (inputs and outputs;
// every placeholder that is read must be among them; compute tensors among them are outputs).
// Throws ktune::Error(kInvalidSchedule) for an invalid schedule and (kInvalidArgument) for bad
// arguments.
LoweredFunc lower(const Schedule& sched, const std::vector<Tensor>& args, const std::string& name,
                  const LowerOptions& options = {});

}  // namespace ktune::te
