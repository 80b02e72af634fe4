// proof_shape() and check_proof(): a calibration proof's size and the check of its outputs.
#include "rpc_runner/server/calibration_proof.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "rpc_runner/runner/input_data.h"

namespace ktune::rpc_runner {

double ProofShape::flop() const {
  return 2.0 * static_cast<double>(copies * kProofRows * lanes) *
         static_cast<double>(kProofDepth * sweeps);
}

std::map<std::string, std::string> ProofShape::args() const {
  return {{"lanes", std::to_string(lanes)},
          {"rows", std::to_string(kProofRows)},
          {"depth", std::to_string(kProofDepth)},
          {"sweeps", std::to_string(sweeps)},
          {"copies", std::to_string(copies)}};
}

ProofShape proof_shape(double gflops, double seconds, int lanes, int threads) {
  ProofShape s;
  s.lanes = std::max(lanes, 1);
  const int64_t per_copy_sweep = 2 * kProofRows * s.lanes * kProofDepth;  // flop of one sweep
  const double work = std::max(gflops, 0.0) * 1e9 * std::max(seconds, 0.0);
  const int64_t t = std::clamp<int64_t>(threads, 1, kMaxProofCopies);
  // Copies: one per thread, more (in multiples of the threads) once the chains reach their cap.
  const double rounds = work / (static_cast<double>(t) * kMaxProofSweeps * per_copy_sweep);
  const int64_t per_thread = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(std::min(rounds, double(kMaxProofCopies)))));
  s.copies = std::min(t * per_thread, kMaxProofCopies / t * t);
  const double sweeps = std::ceil(work / (static_cast<double>(s.copies) * per_copy_sweep));
  s.sweeps = std::clamp<int64_t>(static_cast<int64_t>(std::min(sweeps, 1e12)), 1, kMaxProofSweeps);
  return s;
}

std::string check_proof(const ProofShape& shape, uint64_t seed, const std::string& outputs,
                        int checks, uint64_t pick_seed) {
  const int64_t elements = shape.copies * kProofRows * shape.lanes;
  if (static_cast<int64_t>(outputs.size()) != elements * 4)
    return fmt::format("it sent {} bytes of results for {} values", outputs.size(), elements);
  // The inputs as the runner makes them: A [copies, rows, lanes] is argument 0, B [depth, lanes] 1.
  std::vector<float> a(static_cast<size_t>(elements)),
      b(static_cast<size_t>(kProofDepth * shape.lanes));
  fill_input(a.data(), a.size() * 4, "float32", seed, 0);
  fill_input(b.data(), b.size() * 4, "float32", seed, 1);
  std::mt19937_64 pick(pick_seed);
  std::uniform_int_distribution<int64_t> any(0, elements - 1);
  for (int c = 0; c < checks; ++c) {
    const int64_t e = any(pick), lane = e % shape.lanes;
    const float x = a[static_cast<size_t>(e)];
    // The chain in the kernel's order: sweeps, then the depth, from 0.
    const auto chain = [&](bool fused) {
      float acc = 0;
      for (int64_t s = 0; s < shape.sweeps; ++s)
        for (int64_t k = 0; k < kProofDepth; ++k) {
          const float y = b[static_cast<size_t>(k * shape.lanes + lane)];
          if (fused) {
            acc = std::fma(x, y, acc);
          } else {
            // Stored apart, so that no compiler contracts the two into a fused step.
            volatile float product = x * y;
            acc = acc + product;
          }
        }
      return acc;
    };
    float sent;
    std::memcpy(&sent, outputs.data() + e * 4, 4);
    const auto same = [&](float v) { return std::memcmp(&v, &sent, 4) == 0; };
    const float fused = chain(true);
    if (!same(fused) && !same(chain(false)))
      return fmt::format("result {} of {} is {:g}, not {:g}: it did not run the work it was sent",
                         e, elements, sent, fused);
  }
  return "";
}

}  // namespace ktune::rpc_runner
