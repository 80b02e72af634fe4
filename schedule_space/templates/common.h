// Defines helpers shared by the built-in templates: dtype arguments, applying split entities,
// fallback picks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule_space/config.h"
#include "schedule_space/config_space.h"
#include "schedule_space/workload.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::schedule_space::templates {

// The dtype argument every template takes (float32 default, float64).
ArgSpec dtype_arg();
// te type of a dtype argument value; throws Error(kInvalidArgument) for an unknown name.
te::DataType dtype_of(const std::string& name);

// Splits `axis` of `stage` into entity.values.size() loops by the split entity's factors
// (outermost first), resolving the remainder against `extent`. Returns the loops, outermost first.
// Throws Error(kInstantiation) for a non-split entity or non-positive factors.
std::vector<te::IterVar> apply_split(te::Stage stage, const te::IterVar& axis, const Entity& split,
                                     int64_t extent);

// Annotates `loop` as unrolled when `on`.
void unroll_if(te::Stage stage, const te::IterVar& loop, bool on);

// Fallback picking: the candidate of a split knob whose inner factors are closest to `inner`
// (log distance, ties to the earlier candidate).
uint64_t closest_split(const Knob& knob, const std::vector<int64_t>& inner);
// The candidate of a split knob with the largest innermost factor <= cap (ties to the earlier
// candidate); candidate 0 when none is.
uint64_t widest_split_at_most(const Knob& knob, int64_t cap);
// The candidate of an int knob closest to v.
uint64_t closest_int(const Knob& knob, int64_t v);
// The config of the digits chosen per knob by `pick` if it is valid; otherwise the first valid
// config in seed-0 sampling order. Throws Error(kInvalidArgument) when the space has none.
Config pick_fallback(const ConfigSpace& space, const std::vector<uint64_t>& digits);

// An integer argument (min_value 1 unless given).
ArgSpec int_arg(const char* name, const char* def, const char* doc, int64_t min_value = 1);

// stride_w, the column stride of a window whose strides differ per axis (ONNX's strides [2, 1]
// of text recognizers): 0, the default, is `stride`'s, and leaves the workload key as it was.
ArgSpec stride_w_arg();

// pad_left, pad_bottom and pad_right, the padding of a window whose sides differ (tf2onnx's SAME
// padding puts the odd unit at the end, a lifted 1-D conv pads only its columns): -1, the
// default, is `pad`'s (which is then the rows above), and leaves the workload key as it was.
std::vector<ArgSpec> side_pad_args();

// The sliding window of a convolution or pool: batch, channels, input extents, window extents,
// stride (rows; stride_w the columns'), padding (pad above, the other sides their own), dilation,
// and the output extents they give.
struct Window {
  int64_t n, c, h, w, r, s, stride, pad, dilation, oh, ow, stride_w;
  int64_t pad_left, pad_bottom, pad_right;
  // Whether any side is padded.
  bool padded() const { return pad > 0 || pad_left > 0 || pad_bottom > 0 || pad_right > 0; }
};
// The Window of a workload's arguments N, C, H, W, R, S, stride, pad and, when `has_dilation`,
// dilation (else 1); stride_w from a stride_w argument when the template declares one and it is
// not 0, else stride; each side's padding from its side_pad_args argument when the template
// declares it and it is not -1, else pad. Throws Error(kInvalidArgument), naming template `tmpl`,
// when the window does not fit the padded input.
Window window_of(const std::string& tmpl, const WorkloadArgs& a, bool has_dilation = true);

// Largest divisor of n that is <= cap (>= 1).
int64_t largest_divisor_at_most(int64_t n, int64_t cap);

int64_t ceil_div(int64_t a, int64_t b);

// Channel-blocked (NCHWc) templates: the block chosen from a channel count when the argument is
// 0: the whole count up to 16, else 16 or 8, whichever pads less (ties to 16). Target-independent
// on purpose: the block is part of the kernel's ABI (the layout), and a layer's input block
// (chosen from its C) matches the previous layer's output block (chosen from that layer's K).
int64_t auto_channel_block(int64_t channels);

// The resolve hook part of the channel-blocked convolutions: ic_block and oc_block of 0 become
// auto_channel_block of C and K.
void resolve_channel_blocks(WorkloadArgs& a);

// FLOPs of a direct convolution with N x K x OH x OW outputs, each a sum over C x window
// products, plus `epilogue_flop` per output.
double direct_conv_flop(int64_t n, int64_t k, int64_t oh, int64_t ow, int64_t c, int64_t window,
                        double epilogue_flop);

// The zero-padded copy (a compute stage "pad") of a blocked input I[N][CB][H][W][b]: `pad` rows
// and columns on each side, then `extra_h` more zero rows below and `extra_w` more zero columns
// to the right (Winograd's tiles round the output up to a multiple of the tile). `fill`, when
// defined, is the padding value instead of zero (a quantized input's zero point).
te::Tensor pad_blocked_input(const te::Tensor& in, int64_t n, int64_t cblocks, int64_t h, int64_t w,
                             int64_t block, int64_t pad, te::DataType dt, int64_t extra_h = 0,
                             int64_t extra_w = 0, const te::Expr& fill = te::Expr());

// The same padded by the window's four sides (Window::pad above, pad_left, pad_bottom, pad_right).
te::Tensor pad_blocked_window(const te::Tensor& in, const Window& win, int64_t cblocks,
                              int64_t block, te::DataType dt);

// Schedules a pad_blocked_input stage: inlined into its consumer, or computed once with whole
// blocks as vectors and (batch, channel block) in parallel when `parallel`.
void schedule_blocked_pad(te::Stage pad, bool inline_it, bool parallel);

// The parallel knob, {0, 1} on every target. A space depends on the workload and the target's
// instruction set, never on how many cores a device has: a record of a 4-core board must decode
// to the same config wherever it is read (an importer, a build host, a server). A one-core
// device's tuner finds parallel = 1 no faster; the default config takes 0 there.
void define_parallel(ConfigSpace& space);

// The channel-blocked convolutions' knobs after their unrolls, in this order: pad_inline (only
// when `pad_inline_knob`: {0, 1} when `padded`, else {0}), then parallel (define_parallel).
void define_pad_inline_and_parallel(ConfigSpace& space, bool pad_inline_knob, bool padded);

// The skip_taps knob of a template with a pad_inline knob: 1 has the lowering skip the taps of the
// inlined padding and run interior tiles unguarded (te's skip_padding_taps), 0 keeps the guarded
// select. Defined after every other knob of the template, {0, 1} with padding (1 only with
// pad_inline = 1), else {0}; configs logged before it mean 0.
void define_skip_taps(ConfigSpace& space, bool padded);
// Applies a config's skip_taps to the schedule (a config without the knob: 0).
void apply_skip_taps(te::Schedule& s, const Config& cfg);

}  // namespace ktune::schedule_space::templates
