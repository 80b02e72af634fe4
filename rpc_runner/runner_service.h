// Defines the loop of the ktune-runner child process: load kernels, check them, time them.
#pragma once

namespace ktune::rpc_runner {

// Serves requests on the connected socket `fd` until EOF: kReference loads the artifact, runs
// it on seeded inputs and caches its outputs under the reference key; kMeasure loads a
// candidate, runs it on the same inputs, compares its outputs with the cached reference and
// times it. Every request gets one reply; failures are typed replies (kBuild: cannot load,
// kRun: non-zero status, kWrongAnswer, kUnknown: missing reference or bad signature).
// A kernel that crashes or hangs takes this process down: that is what the parent handles.
// Returns the process exit status (0 on EOF, 2 on a broken channel). Never throws.
int serve(int fd);

}  // namespace ktune::rpc_runner
