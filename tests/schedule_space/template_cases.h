// Defines the small template instances the template tests enumerate, and the reference-check and
// config helpers they share.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "schedule_space/task.h"
#include "te/host_buffer.h"
#include "te/interpreter.h"

namespace ktune::schedule_space::testing {

// The fastest of `repeat` runs of a loaded kernel (any type with int run(args)), in seconds;
// a run that returns non-zero fails the test.
template <typename Kernel>
double best_seconds(const Kernel& k, const std::vector<void*>& args, int repeat) {
  double best = 1e30;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(k.run(args), 0);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

struct TemplateCase {
  std::string name;  // test label
  std::string template_name;
  std::map<std::string, std::string> args;
};

// cfg with each named knob at the given candidate position (its digit in
// ConfigSpace::knob_indices), every other knob kept.
inline Config with_knobs(const Task& task, const Config& cfg,
                         const std::map<std::string, uint64_t>& digits) {
  std::vector<uint64_t> d = task.space().knob_indices(cfg.index());
  for (const auto& [knob, digit] : digits) d[task.space().knob_position(knob)] = digit;
  return task.space().get(task.space().index_of(d));
}

// A 128-bit, 2-core target: 4 float lanes, so small shapes still have several vector widths.
inline TargetTraits small_target() {
  TargetTraits t;
  t.key = "test-128";
  t.vector_bits = 128;
  t.cores = 2;
  t.arch = "x86_64";
  return t;
}

// Every built-in template, small enough that the whole space is enumerated, by the interpreter
// and by the compiler: under 400 configs each (a conv2d config takes ~0.1 s to build at O3).
// Odd extents of 5 or 7 get power-of-two splits with tails too
// (SplitParams::tail_when_few_divisors), which multiplies a space; the even cases keep extents of 3
// and 4 to stay small.
inline std::vector<TemplateCase> small_cases() {
  return {
      {"matmul_nn", "matmul", {{"M", "8"}, {"N", "16"}, {"K", "8"}}},
      {"matmul_nt", "matmul", {{"M", "4"}, {"N", "8"}, {"K", "12"}, {"layout", "nt"}}},
      {"dense_bias_relu",
       "dense_bias_relu",
       {{"M", "4"}, {"N", "8"}, {"K", "8"}}},  // with the dot form (M <= 16)
      {"batch_matmul", "batch_matmul", {{"batch", "3"}, {"M", "4"}, {"N", "8"}, {"K", "6"}}},
      // Rows and columns past every tile (ViT's 197 tokens), the tails peeled by rows_parallel.
      {"batch_matmul_tails", "batch_matmul", {{"batch", "2"}, {"M", "5"}, {"N", "7"}, {"K", "3"}}},
      // Operands read in place from the heads of a packed projection, the output written with
      // the heads side by side (an attention's scores and values without Transposes).
      {"batch_matmul_heads_nt",
       "batch_matmul",
       {{"batch", "2"},
        {"M", "5"},
        {"N", "7"},
        {"K", "3"},
        {"layout", "nt"},
        {"a_heads", "3"},
        {"a_head", "1"},
        {"b_heads", "4"},
        {"b_head", "2"},
        {"c_heads", "2"}}},
      {"batch_matmul_heads_nn",
       "batch_matmul",
       {{"batch", "2"}, {"M", "5"}, {"N", "7"}, {"K", "3"}, {"b_heads", "6"}, {"b_head", "4"}}},
      // Attention's probabilities times its values with the softmax read as A (a_softmax): the
      // row reductions in vector lanes with their tree (K = 32), or plain with a lane tail
      // (K = 17), the scaled scores, B read in place and C written with the heads side by side.
      {"batch_matmul_softmax",
       "batch_matmul",
       {{"batch", "2"}, {"M", "3"}, {"N", "4"}, {"K", "32"}, {"a_softmax", "1"}}},
      {"batch_matmul_softmax_heads",
       "batch_matmul",
       {{"batch", "2"},
        {"M", "3"},
        {"N", "5"},
        {"K", "17"},
        {"a_softmax", "1"},
        {"a_scale", "0.125"},
        {"b_heads", "3"},
        {"b_head", "1"},
        {"c_heads", "2"}}},
      {"conv2d_pad", "conv2d", {{"C", "2"}, {"H", "3"}, {"W", "3"}, {"K", "2"}, {"pad", "1"}}},
      {"conv2d_stride_dilation",
       "conv2d",
       {{"N", "2"},
        {"C", "2"},
        {"H", "5"},
        {"W", "5"},
        {"K", "2"},
        {"stride", "2"},
        {"dilation", "2"},
        {"pad", "2"}}},
      {"depthwise",
       "depthwise_conv2d",
       {{"C", "4"}, {"H", "8"}, {"W", "8"}, {"stride", "2"}, {"pad", "1"}}},
      {"max_pool",
       "max_pool2d",
       {{"N", "2"}, {"C", "4"}, {"H", "5"}, {"W", "5"}, {"R", "3"}, {"S", "3"}, {"pad", "1"}}},
      {"avg_pool", "avg_pool2d", {{"C", "4"}, {"H", "8"}, {"W", "12"}}},
      {"conv2d_nchwc_pad",
       "conv2d_nchwc",
       {{"C", "4"},
        {"H", "2"},
        {"W", "4"},
        {"K", "8"},
        {"pad", "1"},
        {"ic_block", "4"},
        {"oc_block", "8"}}},
      {"conv2d_nchwc_stride_dilation",
       "conv2d_nchwc",
       {{"N", "2"},
        {"C", "2"},
        {"H", "5"},
        {"W", "5"},
        {"K", "4"},
        {"stride", "2"},
        {"dilation", "2"},
        {"pad", "1"},
        {"ic_block", "2"},
        {"oc_block", "4"}}},
      // Odd shapes: primes and 1, extents just past a vector (4 lanes here, 16 on AVX-512 hosts),
      // channels that are not a block multiple, fused epilogues.
      {"matmul_prime", "matmul", {{"M", "3"}, {"N", "17"}, {"K", "5"}}},
      {"matmul_gemv_bias_gelu",
       "matmul",
       {{"M", "1"}, {"N", "7"}, {"K", "3"}, {"epilogue", "bias_gelu"}}},
      {"dense_odd", "dense_bias_relu", {{"M", "5"}, {"N", "6"}, {"K", "7"}}},
      {"dense_gemv_dot",
       "dense_bias_relu",
       {{"M", "1"}, {"N", "9"}, {"K", "17"}, {"epilogue", "bias_gelu"}}},
      {"matmul_nt_gemv_dot", "matmul", {{"M", "1"}, {"N", "9"}, {"K", "17"}, {"layout", "nt"}}},
      {"matmul_nt_dot_bias",
       "matmul",
       {{"M", "2"}, {"N", "5"}, {"K", "9"}, {"layout", "nt"}, {"epilogue", "bias_relu"}}},
      {"conv2d_odd", "conv2d", {{"C", "1"}, {"H", "5"}, {"W", "3"}, {"K", "3"}, {"pad", "1"}}},
      {"depthwise_odd", "depthwise_conv2d", {{"C", "3"}, {"H", "3"}, {"W", "5"}, {"pad", "1"}}},
      {"conv2d_nchwc_tails",
       "conv2d_nchwc",
       {{"C", "5"},
        {"H", "3"},
        {"W", "4"},
        {"K", "6"},
        {"ic_block", "4"},
        {"oc_block", "4"},
        {"epilogue", "bias_add_relu"}}},
      {"conv2d_nchwc_auto",
       "conv2d_nchwc",
       {{"C", "3"}, {"H", "4"}, {"W", "5"}, {"K", "5"}, {"epilogue", "bias_relu"}}},
      {"depthwise_nchwc_stride_pad",
       "depthwise_conv2d_nchwc",
       {{"C", "8"}, {"H", "6"}, {"W", "7"}, {"stride", "2"}, {"pad", "1"}, {"block", "4"}}},
      {"depthwise_nchwc_tails",
       "depthwise_conv2d_nchwc",
       {{"C", "5"}, {"H", "5"}, {"W", "6"}, {"pad", "1"}, {"block", "4"}}},
      // Sides padded differently (tf2onnx's SAME padding of a stride-2 window: the odd unit at
      // the end), the padding inlined or not, its taps skipped or not.
      {"depthwise_nchwc_sides",
       "depthwise_conv2d_nchwc",
       {{"C", "8"},
        {"H", "6"},
        {"W", "7"},
        {"stride", "2"},
        {"pad", "0"},
        {"pad_bottom", "1"},
        {"pad_right", "2"},
        {"block", "4"}}},
      {"conv2d_nchwc_sides",
       "conv2d_nchwc",
       {{"C", "4"},
        {"H", "3"},
        {"W", "6"},
        {"K", "4"},
        {"pad", "0"},
        {"pad_left", "3"},
        {"pad_right", "1"},
        {"ic_block", "4"},
        {"oc_block", "4"}}},
      // The epilogue stage of depthwise (bias, residual, clip, zeroed padding lanes) after its own
      // register tile.
      {"depthwise_nchwc_epilogue",
       "depthwise_conv2d_nchwc",
       {{"C", "5"},
        {"H", "3"},
        {"W", "6"},
        {"pad", "1"},
        {"block", "4"},
        {"epilogue", "bias_add_clip"},
        {"clip_min", "-0.5"},
        {"clip_max", "0.5"}}},
  };
}

// Random inputs and the reference outputs of a task (its compute evaluated directly).
class Oracle {
 public:
  Oracle(const Task& task, uint64_t seed) {
    const ComputeDef def = task.template_def().compute(task.args());
    std::vector<std::pair<te::Tensor, const te::HostBuffer*>> inputs;
    const size_t n_in = def.args.size() - def.outputs.size();
    inputs_.reserve(n_in);
    for (size_t i = 0; i < n_in; ++i) {
      inputs_.emplace_back(def.args[i].shape(), def.args[i].dtype());
      inputs_.back().fill_random(seed + i);
    }
    for (size_t i = 0; i < n_in; ++i) inputs.emplace_back(def.args[i], &inputs_[i]);
    expected_ = te::evaluate(def.outputs, inputs);
  }

  // Runs `run` on fresh argument buffers (inputs copied, outputs all NaN, so an element the
  // kernel never writes fails) and returns the largest relative error against the reference.
  double check(const std::function<void(const std::vector<void*>&)>& run) const {
    std::vector<te::HostBuffer> bufs;
    for (const auto& in : inputs_) {
      bufs.emplace_back(in.shape(), in.dtype());
      for (int64_t i = 0; i < in.num_elements(); ++i) bufs.back().set(i, in.get(i));
    }
    for (const auto& out : expected_) {
      bufs.emplace_back(out.shape(), out.dtype());
      for (int64_t i = 0; i < out.num_elements(); ++i)
        bufs.back().set(i, std::numeric_limits<double>::quiet_NaN());
    }
    std::vector<void*> ptrs;
    for (auto& b : bufs) ptrs.push_back(b.data());
    run(ptrs);
    double err = 0;
    for (size_t i = 0; i < expected_.size(); ++i)
      err = std::max(err, te::max_relative_error(bufs[inputs_.size() + i], expected_[i]));
    return err;
  }

 private:
  std::vector<te::HostBuffer> inputs_;
  std::vector<te::HostBuffer> expected_;
};

}  // namespace ktune::schedule_space::testing
