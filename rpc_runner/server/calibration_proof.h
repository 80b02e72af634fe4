// Defines the calibration proof: an fma_peak run a tuning server sizes to what a worker's own
// calibration claimed, times on its own clock and checks the outputs of, so that the speed that
// bounds the worker's results is a measurement, not its word (issue: a worker that says 1024
// cores and times itself to match).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ktune::rpc_runner {

// fma_peak's register rows and reduction depth in a proof (its defaults).
inline constexpr int64_t kProofRows = 12, kProofDepth = 256;
// Each output is a chain of sweeps x depth fused multiply-adds into one accumulator, which only
// the whole chain computes (each step rounds). The accumulator grows by about the sum of a sweep's
// products each sweep; past 2^23 times the largest product a step could leave it unchanged and a
// sweep be skipped. Chains of at most 200,000 sweeps (51.2 M steps) stay well below: more work
// takes more copies instead.
inline constexpr int64_t kMaxProofSweeps = 200000;
// Outputs of at most 4096 copies (3 MiB at 16 lanes): a claim that needs more is cut to that
// much work, which still takes the claimant's true speed times longer.
inline constexpr int64_t kMaxProofCopies = 4096;
// A proof may run this much slower than the claim it was sized to (a device's own timing keeps its
// fastest run; the proof is one run, with the transfer and the runner's start in the server's
// clock); slower, the device does not run at the speed it claims and is refused.
inline constexpr double kProofSlack = 4;

// The size of one proof: fma_peak with `copies` copies of `sweeps` sweeps on `lanes` lanes.
struct ProofShape {
  int64_t lanes = 1, copies = 1, sweeps = 1;
  double flop() const;
  // fma_peak's workload arguments.
  std::map<std::string, std::string> args() const;
};

// The proof for a device claiming `gflops` GFLOP/s on `threads` threads (1, or all its cores):
// gflops x seconds of work, at least one copy per thread (a multiple of `threads` copies), up to
// kMaxProofSweeps sweeps, then more copies, up to kMaxProofCopies.
ProofShape proof_shape(double gflops, double seconds, int lanes, int threads);

// Why `outputs` (fma_peak's C, float32 [copies, rows, lanes], as the device sent them) is not
// what the proof computes on inputs of `seed` (the runner's fill_input), or "" when it is: its
// size, and `checks` elements picked by `pick_seed`, each recomputed in the kernel's order with
// one fused multiply-add a step (or a multiply and an add rounded apart, where the target has no
// FMA) and compared bit for bit.
std::string check_proof(const ProofShape& shape, uint64_t seed, const std::string& outputs,
                        int checks, uint64_t pick_seed);

}  // namespace ktune::rpc_runner
