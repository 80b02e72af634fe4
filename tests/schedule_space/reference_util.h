// Defines the reference check shared by template tests that build kernels: seeded inputs, the
// compute's outputs, NaN-filled run buffers, the configs to run, host runs, AArch64 batches under
// qemu, refused workloads, and the int8 requantization in double.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "codegen/artifact.h"
#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "support/error.h"
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

// The task's fallback config and `sampled` configs drawn from its space by a generator seeded
// `seed`: the configs a template's correctness test runs.
inline std::vector<Config> fallback_and_sampled(const Task& task, size_t sampled, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Config> configs = {task.fallback_config()};
  for (uint64_t i : task.space().sample(sampled, rng)) configs.push_back(task.space().get(i));
  return configs;
}

// Builds config `cfg` of `task` for `target` (one this host runs), runs it on fresh buffers of
// `ref` (outputs NaN) with one and then two threads, and calls check(buffers) after each run.
inline void run_on_host(const Task& task, const Config& cfg, const codegen::Target& target,
                        const Reference& ref,
                        const std::function<void(const std::vector<te::HostBuffer>&)>& check) {
  const Instantiated inst = task.instantiate(cfg);
  codegen::Kernel k =
      codegen::Kernel::load(codegen::build(te::lower(inst.schedule, inst.args, "k"), target));
  for (int threads : {1, 2}) {
    codegen::set_num_threads(threads);
    std::vector<te::HostBuffer> bufs = fresh_buffers(ref);
    std::vector<void*> ptrs;
    for (auto& b : bufs) ptrs.push_back(b.data());
    ASSERT_EQ(k.run(ptrs), 0) << task.workload_key() << " " << cfg.to_json_string();
    check(bufs);
  }
}

// The assembly of the fallback kernel of template `tmpl`'s workload `args` for target `key`.
inline std::string fallback_assembly(const std::string& tmpl,
                                     const std::map<std::string, std::string>& args,
                                     const std::string& key) {
  const codegen::Target target = codegen::Target::parse(key);
  const Task task = Task::create(tmpl, args, traits_of(target));
  const Instantiated inst = task.instantiate(task.fallback_config());
  return codegen::emit_assembly(te::lower(inst.schedule, inst.args, "k"), target);
}

// Expects Task::create of template `tmpl` to refuse every workload of `bad` as an invalid
// argument.
inline void expect_invalid_workloads(const std::string& tmpl,
                                     const std::vector<std::map<std::string, std::string>>& bad,
                                     const TargetTraits& traits) {
  for (const auto& a : bad) {
    try {
      Task::create(tmpl, a, traits);
      ADD_FAILURE() << tmpl << " accepted C=" << a.at("C") << " H=" << a.at("H");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    }
  }
}

// An int8 template's requantized output from its int32 accumulator, in double:
// clamp(nearbyint((acc + bias) * scale) + zero_point, lo, hi), [lo, hi] uint8's or int8's range,
// lo raised to zero_point by relu. near_half: the kernel's float32 product may round either way.
struct Requantized {
  int64_t value;
  bool near_half;
};
inline Requantized requantize(int64_t acc, int64_t bias, double scale, int64_t zero_point,
                              bool to_u8, bool relu) {
  const int64_t lo0 = to_u8 ? 0 : -128, hi = to_u8 ? 255 : 127;
  const int64_t lo = relu ? std::max(lo0, zero_point) : lo0;
  const double v = static_cast<double>(acc + bias) * scale;
  const double frac = v - std::floor(v);
  return {std::clamp(static_cast<int64_t>(std::nearbyint(v)) + zero_point, lo, hi),
          std::fabs(frac - 0.5) <= std::fabs(v) * 0x1p-22};
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
