// Defines the space of the channel-blocked convolutions (conv2d_nchwc and the 16-lane dot
// templates conv2d_nchwc_u8s8s32, conv2d_nchwc_bf16): knobs, register tile constraint, fallback
// and the loop structure a config gives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule_space/config.h"
#include "schedule_space/config_space.h"
#include "schedule_space/workload.h"
#include "te/schedule.h"

namespace ktune::schedule_space::templates {

// What the space depends on: the output's oc blocks, rows and columns, the input channel
// blocks, and the accumulator vectors of one oc block on the target.
struct NchwcConvDims {
  int64_t kblocks, oh, ow, cblocks;
  int64_t vectors;
};

// Knobs (stable names, in this order):
//   tile_ko  split of the output channel blocks in 2 [outer, register blocks <= 4]
//   tile_oh  split of output rows in 2 [outer, register rows <= 4]
//   tile_ow  split of output columns in 2 [outer, register columns <= 32]
//   tile_ci  split of the input channel blocks in 2 [outer, inner]
//   reduce_order  0: ci_o, ci_i, r, s, in   1: ci_o, r, s, ci_i, in   2: ci_o, r, ci_i, s, in
//            (`in` the innermost reduction loop over one input block)
//   <unroll_inner> 0/1: unroll that loop (conv2d_nchwc: unroll_cb, the dot templates:
//            unroll_cq over 4- or 2-channel groups)
//   unroll_s  0/1: unroll the window column loop
//   pad_inline 0/1 (when `pad_inline_knob`; {0} without padding): inline the padding into the
//            reduction, or pad once
//   parallel 0/1 (only 0 on one core): the fused (batch, ko outer, oh outer) loop
// Constraint: the accumulators (tile_ko inner x vectors x tile_oh inner x tile_ow inner) fit
// TargetTraits::accumulator_budget of the tile's weight vectors, tile_ko inner x vectors (x86: two
// registers free, a weight vector and a broadcast input; AArch64: every weight vector of the
// tile, which LLVM loads together, and the input scalar).
struct NchwcKnobs {
  std::string unroll_inner;  // the name of the inner reduction loop's unroll knob
  bool pad_inline_knob = false;
  bool padded = false;  // with pad_inline_knob: the workload pads
};
void define_nchwc_conv_space(const NchwcConvDims& d, const NchwcKnobs& k,
                             const TargetTraits& target, ConfigSpace& space);

// The fallback register tile and digits: x86: two oc blocks (each broadcast input feeds two
// FMAs) and two rows when the registers allow, then as many columns as fit in all but four
// registers; AArch64: the most accumulators that fit with every weight vector of the tile. All
// input channels in one reduction pass, the inner loops rolled, padding done once, parallel on
// more than one core; every other knob at its first value.
Config nchwc_conv_fallback(const NchwcConvDims& d, const TargetTraits& target,
                           const ConfigSpace& space);
// The digits (one per knob) nchwc_conv_fallback picks, for a template that changes some of them
// before pick_fallback.
std::vector<uint64_t> nchwc_conv_fallback_digits(const NchwcConvDims& d, const TargetTraits& target,
                                                 const ConfigSpace& space);

// Splits the output stage's (ko, oh, ow) axes by the tile knobs into (outer, inner), orders
// (batch, ko outer, oh outer, ow outer, ko inner, oh inner, ow inner, lane), fuses the first three
// (parallel when the config says so) and vectorizes the lane. Returns ow outer, where the
// accumulator is computed. Throws Error(kInstantiation), naming `tmpl`, for splits not in 2.
te::IterVar schedule_nchwc_output(te::Stage out, const Config& cfg, const NchwcConvDims& d,
                                  const std::string& tmpl);

// Orders the accumulator stage (axes batch, ko, y, x, lane) computed at the output's tile:
// batch, the reduction loops as reduce_order says (ci split by tile_ci), then the register tile
// (y, x, ko) unrolled, then `innermost` (the lane axis, and loops that go with it). `ci`, `r`,
// `s`, `in`: the reduction loops over input channel blocks, window rows and columns, and within
// a block. Throws Error(kInstantiation), naming `tmpl`, for a bad tile_ci or reduce_order.
void order_nchwc_accumulator(te::Stage acc, const te::IterVar& ci, const te::IterVar& r,
                             const te::IterVar& s, const te::IterVar& in,
                             const std::vector<te::IterVar>& innermost, const Config& cfg,
                             const NchwcConvDims& d, const std::string& tmpl);

}  // namespace ktune::schedule_space::templates
