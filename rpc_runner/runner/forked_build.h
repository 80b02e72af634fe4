// Defines build_in_children: candidates lowered and compiled in forked child processes, each
// killed when it exceeds the build timeout.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "codegen/artifact.h"
#include "schedule_space/template_registry.h"
#include "support/error.h"

namespace ktune::rpc_runner {

// One candidate to build: its scheduled program, the kernel's name and the target string.
struct BuildJob {
  schedule_space::Instantiated inst;
  std::string name;
  std::string target_key;
};

// What became of one build: an artifact, or the error (kBuild, kInstantiation, kBuildTimeout).
struct BuildOutcome {
  std::optional<codegen::Artifact> artifact;
  ErrorKind error = ErrorKind::kBuild;  // when there is no artifact
  std::string message;
  double seconds = 0;  // from the child's start to its end (or to the kill)
};

// Builds every job in a child process of its own (fork: the child sees the parent's templates and
// the instantiated program; it lowers, compiles, sends the serialized artifact through a pipe and
// exits), at most `parallel` children at once, so no thread of this process is ever held by a
// build. A child that runs past timeout_s is killed (SIGKILL) and its job is kBuildTimeout right
// then; a child that dies is kBuild. Timeouts count from the child's start, never the wait for a
// free slot. Returns one outcome per job, in order. Throws Error(kIo) when no child can be started.
// The child of a multi-threaded process may only find locks other threads held at the fork (a
// logger, LLVM's global state): such a child hangs and is killed at the timeout, never the parent.
std::vector<BuildOutcome> build_in_children(const std::vector<const BuildJob*>& jobs,
                                            size_t parallel, double timeout_s);

}  // namespace ktune::rpc_runner
