// Defines the space of the channel-blocked depthwise convolutions (depthwise_conv2d_nchwc and
// depthwise_conv2d_nchwc_u8s8s32): knobs, register tile constraint, fallback and the schedule
// of the output and accumulator stages.
#pragma once

#include <cstdint>
#include <string>

#include "schedule_space/config.h"
#include "schedule_space/config_space.h"
#include "schedule_space/workload.h"
#include "te/schedule.h"
#include "te/tensor.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {

// Knobs (stable names, in this order):
//   tile_oh  split of output rows in 2 [outer, register rows <= 4]
//   tile_ow  split of output columns in 2 [outer, register columns <= 16]
//   unroll_s 0/1: unroll the window column loop
//   pad_inline 0/1 (when `pad_inline_knob`; {0} without padding): inline the padding into the
//            reduction, or pad once
//   parallel 0/1 (only 0 on one core): the fused (batch, channel block, oh outer) loop
//   unroll_r 0/1: unroll the window row loop. With both unrolled, a tap's input vector that
//            another tap of the tile reads too (stride 2: column 2x+2 is the next column's 2x;
//            row 2y+2 the next row's 2y) is loaded once: fewer loads per FMA, which is what bounds
//            the strided shapes
// Constraint: the accumulators (rows x columns x `vectors` per block) fit
// TargetTraits::accumulator_budget of the step's operands, a weight and an input per vector.
struct DepthwiseKnobs {
  bool pad_inline_knob = false;
  bool padded = false;  // with pad_inline_knob: the workload pads
};
void define_depthwise_space(int64_t oh, int64_t ow, int64_t vectors, const DepthwiseKnobs& k,
                            const TargetTraits& target, ConfigSpace& space);

// One row of up to 8 columns (each weight vector of a tap feeds 8 FMAs), the window column loop
// unrolled, parallel on more than one core; dot_taps 0 where the space has it (see
// depthwise_dot_fallback for the spaces that take dot_taps 1); pad_inline and skip_taps 1 where the
// space has them (te skips the padding taps and runs interior tiles unguarded: measured 1.9-2.7x
// the padded copy's speed on MobileNetV2's 3x3 layers, stride 1 and 2, one core, where the copy
// costs as much as the FMAs).
Config depthwise_fallback(int64_t ow, const TargetTraits& target, const ConfigSpace& space);

// The fallback of a space whose dot_taps runs a window row per dot instruction (dot_taps 1):
// up to 16 accumulators as the largest divisor of the output rows up to 4 by the largest divisor
// of the columns that fills them, the window rows unrolled (the output rows of the tile that
// read an input row share its load and transpose), unroll_s 0, parallel on more than one core;
// measured 1.4-1.9x depthwise_fallback's speed on MobileNetV2's 3x3 layers (vpdpbusd, one
// thread, int32 output), where the widening code runs 16 multiply-adds per instruction and a
// row's dot 48.
Config depthwise_dot_fallback(int64_t oh, int64_t ow, const TargetTraits& target,
                              const ConfigSpace& space);

// Schedules the output stage `out` [N][C/b][OH][OW][b] and its accumulator `acc` (reduction
// axes r, s) as the config says: the register tile's (y, x) accumulators unrolled and the block
// vectorized innermost, the window loops outside, so every accumulator stays a register for the
// whole window. With `row_dot` (an intrinsic over a block's lanes and a window row's taps, which
// the knobs' unroll_s then leaves alone), only the window rows stay outside: the block's lanes,
// then the row's taps, tensorized under the tile. Throws Error(kInstantiation), naming `tmpl`,
// for splits not in 2.
void schedule_depthwise(te::Schedule& s, const te::Tensor& out, const te::Tensor& acc, int64_t oh,
                        int64_t ow, const Config& cfg, const std::string& tmpl,
                        const te::TensorIntrin* row_dot = nullptr);

}  // namespace ktune::schedule_space::templates
