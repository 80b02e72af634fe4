// Defines the loop-context features of a lowered program (versioned layout) and their extractor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cost_model/features.h"
#include "schedule_space/task.h"
#include "te/ir.h"

namespace ktune::cost_model {

// Bump when the layout below changes: a saved model is only valid for one version.
inline constexpr int kLoopFeatureVersion = 1;

// Layout of loop_context_features (every count x is given as log2(1 + x) unless said otherwise).
// It is read from the IR after storage flattening and simplification, before unrolling and
// vectorization (so loop kinds are still visible). The "main" statement is the Store with the
// most work, executions x (1 + loads in its value) (ties: the first): the compute, not a copy
// into a packed buffer run as often. Its enclosing loops and its buffers fill the slots.
//  [0, kGlobalFeatures) global:
//    0 lowering failed (1/0; everything else 0), 1 store executions (all stores), 2 stores,
//    3 loops (count), 4 max loop depth (count), 5 parallel / 6 vectorized / 7 unrolled loops
//    (counts), 8 product of unrolled extents around the main store, 9 extent of the innermost
//    vectorized loop around it, 10 allocations (count), 11 bytes allocated, 12 if statements
//    (count; guards of non-dividing splits).
//  then kLoopSlots slots of kPerLoop, slot 0 = the main store's innermost loop, going outward;
//    missing levels are zeros: extent, depth from the outside (1 = outermost; count),
//    product of extents of the enclosing loops, product of extents of the enclosed loops,
//    one-hot kind: serial, parallel, vectorized, unrolled.
//  then kBufferSlots slots of kPerBuffer: the stored buffer, then the loaded buffers in order of
//    first appearance (one slot per distinct buffer); missing are zeros: present (1/0),
//    written (1/0), |stride| along the innermost loop (elements), unit stride (1/0),
//    bytes touched by the innermost 1 / 2 / 4 loops and by the whole nest, reuse (accesses per
//    distinct element over the nest).
inline constexpr size_t kGlobalFeatures = 13;
inline constexpr size_t kLoopSlots = 12;
inline constexpr size_t kPerLoop = 8;
inline constexpr size_t kBufferSlots = 4;
inline constexpr size_t kPerBuffer = 9;
inline constexpr size_t kLoopContextLength =
    kGlobalFeatures + kLoopSlots * kPerLoop + kBufferSlots * kPerBuffer;

// Returns the kLoopContextLength loop-context features of a flat loop body (see the layout).
std::vector<float> loop_context_features(const te::Stmt& body);

// The features of a program that could not be lowered: the failure flag, zeros elsewhere.
std::vector<float> failed_loop_context_features();

// Returns loop_context_features of `config` of `task`: instantiate, lower up to (not including)
// unrolling, read the IR. A config that fails to instantiate or lower (Error kInstantiation or
// kInvalidSchedule) gets failed_loop_context_features(); other errors pass through.
std::vector<float> config_loop_features(const schedule_space::Task& task,
                                        const schedule_space::Config& config);

struct LoopFeatureParams {
  FeatureCacheParams cache;  // threads for extraction, cache bound
};

// Row of config i = config_loop_features(task, space.get(i)) followed by the space's knob
// features: kLoopContextLength + space.knob_feature_length() values for every config.
class LoopFeatureExtractor final : public FeatureExtractor {
 public:
  explicit LoopFeatureExtractor(schedule_space::Task task, LoopFeatureParams params = {});
  size_t length() const override { return cache_.length(); }
  FeatureMatrix extract(const std::vector<uint64_t>& indices) override {
    return cache_.extract(indices);
  }
  size_t computed_rows() const { return cache_.computed_rows(); }

 private:
  schedule_space::Task task_;
  CachedFeatureExtractor cache_;
};

}  // namespace ktune::cost_model
