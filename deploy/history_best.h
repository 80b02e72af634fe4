// Declares apply_history_best(): for a program that compiles at run time, the best logged kernel of
// a task, JIT-loaded.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "codegen/kernel.h"
#include "deploy/config_choice.h"
#include "schedule_space/config.h"
#include "schedule_space/task.h"
#include "tuning_db/record.h"

namespace ktune {

// A kernel ready to call, and where its config came from.
struct AppliedKernel {
  codegen::Kernel kernel;  // kernel.run(buffers): buffers in the task's argument order
  schedule_space::Config config;
  using Source = deploy::ConfigChoice::Source;  // kTuned, kNearest or kFallback
  Source source;
  std::optional<tuning_db::Record> record;  // the record whose config was taken (tuned or nearest)
  std::string note;  // one line: which record / nearest workload / why fallback
};

// The best record of task's workload on task's target (this LLVM's records first), else the nearest
// tuned workload's config valid for it, else the fallback; built for the host and JIT-loaded.
// Warns once per workload (spdlog) when it serves nearest/fallback/older-toolchain/emulated.
// Throws Error: kNotFound (missing log file), kIo (unreachable server), kDatabase (not a ktune
// log), kUnsupported (a task whose target cannot run in this process: a JIT runs host code only),
// kInstantiation (a served config no longer instantiates), kBuild (LLVM failed).
// Thread-safe as far as its sources are (each call opens its own log or client).
AppliedKernel apply_history_best(const HistorySource& from, const schedule_space::Task& task);

// Convenience: the task from a template name, args and target text ("host" or "llvm -mtriple=...").
// Omitted args take the template's defaults. Throws Error(kInvalidArgument) for an unknown
// template, argument or bad target text, Error(kUnsupported) for a triple this LLVM has no backend
// for.
schedule_space::Task make_task(const std::string& template_name,
                               const std::map<std::string, std::string>& args,
                               const std::string& target = "host");

}  // namespace ktune
