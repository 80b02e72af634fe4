// Defines DotConv, the channel-blocked conv2d in the layouts of a 16-lane dot intrinsic
// (conv2d_nchwc_u8s8s32: 4 channels per dot, conv2d_nchwc_bf16: 2): its shape, inputs,
// accumulator (reference and tiled), space and schedule. The templates add their epilogue.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "schedule_space/config.h"
#include "schedule_space/config_space.h"
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/nchwc_conv_space.h"
#include "schedule_space/workload.h"
#include "te/schedule.h"
#include "te/tensor.h"
#include "te/tensor_intrin.h"

namespace ktune::schedule_space::templates {

// Output channels per block: the 16 accumulator lanes of one dot instruction.
constexpr int64_t kDotLanes = 16;

// Data I[N][C/icb][H][W][icb], weights W[K/16][C/icb][R][S][icb/depth][16][depth] (input channel
// c, output channel k at [k/16][c/icb][r][s][c%icb/depth][k%16][c%depth]), accumulator
// [N][K/16][OH][OW][16]. The reduction runs over whole blocks of whole depth-channel groups.
struct DotConv : Window {  // dilation 1
  int64_t k, icb;
  int64_t depth;              // channels per dot group
  te::DataType data, weight;  // element types of I and W
  te::DataType acc;           // the accumulator's
  te::Expr pad_value;         // the padding taps' value, of type data
  bool shift_data = false;    // uint8 data: the products read x - 128 (requant.h)
  int64_t cblocks() const { return c / icb; }
  int64_t kblocks() const { return (k + kDotLanes - 1) / kDotLanes; }
  std::vector<int64_t> out_shape() const { return {n, kblocks(), oh, ow, kDotLanes}; }
  // A product of a data and a weight element in the accumulator's type.
  te::Expr product(const te::Expr& d, const te::Expr& wt) const;
};

// The input block of C channels when ic_block is 0: all of them up to 16, else the largest of
// 16, 8 that divides C, else `depth`.
int64_t auto_dot_block(int64_t c, int64_t depth);

// The workload's DotConv (arguments of dot_conv_args; ic_block 0 resolved); throws
// Error(kInvalidArgument), naming `tmpl`, when C is not a multiple of depth, the input block does
// not divide C or is not a multiple of depth, or the window does not fit.
DotConv dot_conv_of(const std::string& tmpl, const WorkloadArgs& a, int64_t depth,
                    te::DataType data, te::DataType weight, te::DataType acc,
                    const te::Expr& pad_value);

// The arguments N, C, H, W, K, R, S, stride, pad, ic_block; `pad_doc` says what fills the
// padding.
std::vector<ArgSpec> dot_conv_args(int64_t depth, const char* pad_doc);

// The input placeholders and the padded input (the input itself without padding).
struct DotConvInputs {
  te::Tensor in, weight, padded;
};
DotConvInputs dot_conv_inputs(const DotConv& d);

// What a template computes after the accumulator, in the tile loop: its inputs (kernel
// arguments between W and O) and an output element of type `out` from the accumulator's value
// at (n, ko, y, x, kb). Lanes past K are written as zeros. `none`: the output is the accumulator
// itself (when K is a block multiple).
struct DotConvEpilogue {
  std::vector<te::Tensor> inputs;
  te::DataType out;
  bool none = false;
  std::function<te::Expr(const te::Expr& acc, const std::vector<te::Var>& at)> value;
};

// A dot template's workload: the convolution, its inputs and its epilogue.
struct DotConvParts {
  DotConv conv;
  DotConvInputs in;
  DotConvEpilogue epilogue;
};

// Sets d's compute, define, fallback and apply from the workload's parts (`parts_of`). compute:
// the reference accumulator (one reduction over the C channels), then the epilogue. The space:
// the shared NCHWc conv space with unroll_cq, the icb/depth loop of channel groups, as the inner
// unroll, one 16-lane accumulator per oc block, then skip_taps (0/1, {0} unless the padding is
// zero, the data unshifted and has_intrin; configs without it mean 0). apply: the output stage
// tiled as the space says, the accumulator's 16 lanes tensorized with intrin(conv) where
// has_intrin(target, conv), else
// vectorized under the unrolled group; the padded input computed once, or with skip_taps inlined
// so that tensorize runs the dot only for the taps inside the input (unguarded in the tiles
// whose taps all are).
void set_dot_conv_template(TemplateDef& d, DotConvParts (*parts_of)(const WorkloadArgs&),
                           const te::TensorIntrin& (*intrin)(const DotConv&),
                           bool (*has_intrin)(const TargetTraits&, const DotConv&));

}  // namespace ktune::schedule_space::templates
