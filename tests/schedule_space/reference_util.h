// Defines the reference check shared by template tests that build kernels: seeded inputs, the
// compute's outputs, NaN-filled run buffers, and AArch64 batches under qemu.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "codegen/artifact.h"
#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "te/host_buffer.h"
#include "te/interpreter.h"
#include "te/lower.h"
#include "tests/codegen/test_util.h"

namespace ktune::schedule_space::testing {

inline TargetTraits traits_of(const codegen::Target& t) {
  return make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores());
}

// Inputs of a task (seeded) and the outputs its compute definition gives (te's interpreter).
struct Reference {
  std::vector<te::HostBuffer> inputs, outputs;
  std::vector<te::Tensor> output_tensors;
};

inline Reference reference_of(const Task& task, uint64_t seed) {
  const ComputeDef def = task.template_def().compute(task.args());
  Reference ref;
  const size_t n_in = def.args.size() - def.outputs.size();
  std::vector<std::pair<te::Tensor, const te::HostBuffer*>> in;
  ref.inputs.reserve(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    ref.inputs.emplace_back(def.args[i].shape(), def.args[i].dtype());
    ref.inputs.back().fill_random(seed + i);
  }
  for (size_t i = 0; i < n_in; ++i) in.emplace_back(def.args[i], &ref.inputs[i]);
  ref.outputs = te::evaluate(def.outputs, in);
  ref.output_tensors = def.outputs;
  return ref;
}

// The argument buffers of one run: inputs copied, outputs all NaN.
inline std::vector<te::HostBuffer> fresh_buffers(const Reference& ref) {
  std::vector<te::HostBuffer> bufs;
  for (const auto& in : ref.inputs) {
    bufs.emplace_back(in.shape(), in.dtype());
    std::memcpy(bufs.back().data(), in.data(), in.bytes());
  }
  for (const auto& out : ref.outputs) {
    bufs.emplace_back(out.shape(), out.dtype());
    // An element never written shows: NaN for floats, a byte pattern for integers (a NaN has no
    // integer value).
    if (out.dtype().is_float()) {
      for (int64_t i = 0; i < out.num_elements(); ++i)
        bufs.back().set(i, std::numeric_limits<double>::quiet_NaN());
    } else {
      std::memset(bufs.back().data(), 0x5a, out.bytes());
    }
  }
  return bufs;
}

// Largest relative error of the output buffers against the reference (infinite where a NaN
// stands for a number).
inline double max_error(const std::vector<te::HostBuffer>& bufs, const Reference& ref) {
  double err = 0;
  for (size_t o = 0; o < ref.outputs.size(); ++o)
    err = std::max(err, te::max_relative_error(bufs[ref.inputs.size() + o], ref.outputs[o]));
  return err;
}

// One kernel to check: a task, its reference and a config of the task's space.
struct Case {
  std::shared_ptr<const Task> task;
  std::shared_ptr<const Reference> ref;
  Config config;
};

// The artifact of `c` for `target`, its entry named `entry`.
inline codegen::Artifact build_case(const Case& c, const codegen::Target& target,
                                    const std::string& entry) {
  const Instantiated inst = c.task->instantiate(c.config);
  return codegen::build(te::lower(inst.schedule, inst.args, entry), target);
}

// Runs every case's AArch64 artifact (entries distinct) under qemu in one batch
// (codegen::testing::run_batch_on_aarch64) on fresh buffers and returns each case's max_error.
// Throws std::runtime_error when linking or the emulator fails.
inline std::vector<double> aarch64_errors(const std::vector<Case>& cases,
                                          const std::vector<codegen::Artifact>& artifacts) {
  std::vector<codegen::testing::Aarch64Case> batch;
  for (size_t i = 0; i < cases.size(); ++i) {
    codegen::testing::Aarch64Case ac{artifacts[i], {}};
    for (const auto& b : fresh_buffers(*cases[i].ref)) {
      const auto* p = static_cast<const uint8_t*>(b.data());
      ac.buffers.emplace_back(p, p + b.bytes());
    }
    batch.push_back(std::move(ac));
  }
  const auto results = codegen::testing::run_batch_on_aarch64(batch);
  std::vector<double> errors;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Reference& ref = *cases[i].ref;
    std::vector<te::HostBuffer> bufs = fresh_buffers(ref);
    for (size_t o = 0; o < ref.outputs.size(); ++o) {
      const size_t a = ref.inputs.size() + o;
      if (results[i][a].size() != bufs[a].bytes())
        throw std::runtime_error("output size differs under qemu");
      std::memcpy(bufs[a].data(), results[i][a].data(), bufs[a].bytes());
    }
    errors.push_back(max_error(bufs, ref));
  }
  return errors;
}

}  // namespace ktune::schedule_space::testing
