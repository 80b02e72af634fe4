// The calibration proof (rpc_runner/server/calibration_proof.h): its size for a claim, and the
// check of its outputs against fma_peak run here for real.
#include "rpc_runner/server/calibration_proof.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/target.h"
#include "rpc_runner/runner/input_data.h"
#include "schedule_space/task.h"
#include "te/host_buffer.h"
#include "te/lower.h"

namespace ktune::rpc_runner {
namespace {

// fma_peak of `shape` built for this machine and run once on the runner's inputs of `seed`: its
// outputs, as a worker sends them.
std::string run_here(const ProofShape& shape, uint64_t seed) {
  const codegen::Target host = codegen::Target::host();
  const auto traits =
      schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), 1);
  const auto task = schedule_space::Task::create("fma_peak", shape.args(), traits);
  const auto inst = task.instantiate(task.fallback_config());
  const codegen::Kernel kernel =
      codegen::Kernel::load(codegen::build(te::lower(inst.schedule, inst.args, "proof"), host));
  std::vector<te::HostBuffer> buffers;
  std::vector<void*> args;
  for (size_t i = 0; i < inst.args.size(); ++i) {
    buffers.emplace_back(inst.args[i].shape(), inst.args[i].dtype());
    if (i + 1 < inst.args.size())
      fill_input(buffers.back().data(), static_cast<size_t>(buffers.back().num_elements()) * 4,
                 "float32", seed, i);
  }
  for (auto& b : buffers) args.push_back(b.data());
  EXPECT_EQ(kernel.run(args), 0);
  const te::HostBuffer& c = buffers.back();
  return std::string(static_cast<const char*>(c.data()), static_cast<size_t>(c.num_elements()) * 4);
}

// The work is the claim times the seconds, one copy per thread at least, chains capped.
TEST(CalibrationProof, IsSizedToTheClaim) {
  const ProofShape one = proof_shape(100, 1, 16, 1);
  EXPECT_LE(one.sweeps, kMaxProofSweeps);
  EXPECT_NEAR(one.flop() / 100e9, 1, 0.05);
  // 3,200 GFLOP/s on 32 threads for a second: a multiple of 32 copies, chains at the cap.
  const ProofShape all = proof_shape(3200, 1, 16, 32);
  EXPECT_EQ(all.copies % 32, 0);
  EXPECT_LE(all.sweeps, kMaxProofSweeps);
  EXPECT_NEAR(all.flop() / 3200e9, 1, 0.05);
  // 766,771 GFLOP/s on 1024 claimed cores: cut at kMaxProofCopies, 80 TFLOP, minutes on two real
  // cores, past the proof's run timeout.
  const ProofShape huge = proof_shape(766771, 1, 16, 1024);
  EXPECT_EQ(huge.copies, kMaxProofCopies);
  EXPECT_EQ(huge.sweeps, kMaxProofSweeps);
  EXPECT_GT(huge.flop(), 8e13);
  // A tiny claim still runs one sweep of one copy per thread.
  const ProofShape tiny = proof_shape(0.001, 0.01, 4, 2);
  EXPECT_EQ(tiny.copies, 2);
  EXPECT_EQ(tiny.sweeps, 1);
}

// The outputs of the kernel run here pass; one changed bit, zeros, or a short answer fail with
// one line.
TEST(CalibrationProof, AcceptsTheRunAndRefusesForgeries) {
  ProofShape shape;
  shape.lanes = codegen::Target::host().vector_bits() / 32;
  shape.copies = 2;
  shape.sweeps = 40;
  const std::string sent = run_here(shape, 7);
  EXPECT_EQ(check_proof(shape, 7, sent, 64, 1), "");
  // Another seed's inputs are other work.
  EXPECT_NE(check_proof(shape, 8, sent, 4, 1), "");
  std::string flipped = sent;
  for (size_t i = 0; i < flipped.size(); i += 4) flipped[i] ^= 1;  // every value, in its last bit
  EXPECT_NE(check_proof(shape, 7, flipped, 1, 1).find("did not run the work it was sent"),
            std::string::npos);
  EXPECT_NE(check_proof(shape, 7, std::string(sent.size(), '\0'), 1, 1), "");
  EXPECT_EQ(check_proof(shape, 7, sent.substr(4), 1, 1),
            "it sent " + std::to_string(sent.size() - 4) + " bytes of results for " +
                std::to_string(sent.size() / 4) + " values");
}

}  // namespace
}  // namespace ktune::rpc_runner
