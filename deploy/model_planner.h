// Defines Planner, the state of one plan_model call (model_plan.h): the graph walk and tensor
// forms (model_plan.cc), the tuned tasks (model_plan_tasks.cc) and the int8 path of a quantized
// model (model_plan_int8.cc). Private to those files.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/target.h"
#include "deploy/model_nodes.h"
#include "deploy/model_plan.h"
#include "frontend/model_tasks.h"
#include "support/error.h"

namespace ktune::deploy {

class Planner {
 public:
  Planner(const frontend::Graph& g, const std::map<std::string, frontend::ConstantValue>& constants,
          const std::string& name, const PlanOptions& options);

  // The plan; with PlanOptions::verdict_only, what could be planned (blocked() says what not).
  // Throws Error(kUnsupported) listing every blocked node otherwise.
  ModelPlan run();
  const std::vector<BlockedNode>& blocked() const { return blocked_; }

  static int64_t product(const std::vector<int64_t>& v) {
    int64_t p = 1;
    for (int64_t d : v) p *= d;
    return p;
  }

 private:
  static constexpr int64_t kAlign = 64;
  static int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

  // Whether every tensor that node i and the nodes it absorbs (group_) read from outside exists.
  bool ready(size_t i) const;
  // Whether a graph output's step can write the caller's output buffer itself: an arena tensor
  // of float32 in ONNX's layout, no view of another, whose views all cover it whole (an Identity,
  // a Reshape), written by one step.
  bool writable_as_output(int64_t id) const;

  void plan_node(size_t i, const frontend::TaskOccurrence* occ);

  // plan_node, a refusal (Error(kUnsupported)) recorded in blocked_ instead of thrown.
  void plan_or_block(size_t i, const frontend::TaskOccurrence* occ);

  Error unsupported(const frontend::Node& n, const std::string& why) const;

  std::string reason_of(const frontend::Node& n) const;

  std::vector<int64_t> known_shape(const std::string& tensor) const;

  const frontend::ConstantValue& constant(const frontend::Node& n, const std::string& tensor) const;

  std::string symbol(const std::string& what) const;

  int64_t add(PlanTensor t);

  // A packed weight: its bytes appended to the weights, 64-byte aligned.
  template <typename T>
  int64_t weight(const std::string& name, std::vector<int64_t> shape, const std::vector<T>& data,
                 te::DataType dtype = te::Float(32)) {
    PlanTensor t{name, std::move(shape), 0, Storage::kWeights};
    t.dtype = dtype;
    t.offset = static_cast<int64_t>(plan_.weights.size());
    plan_.weights.resize(
        static_cast<size_t>(align_up(t.offset + static_cast<int64_t>(data.size() * sizeof(T)))));
    std::memcpy(plan_.weights.data() + t.offset, data.data(), data.size() * sizeof(T));
    return add(std::move(t));
  }

  // The tensor holding `onnx` in layout `block`, converting (one kernel per conversion, made once)
  // from the form that exists.
  int64_t form(const std::string& onnx, int64_t block);

  // The element type of tensor `onnx`: float32 unless the graph says uint8, int8 or int32.
  te::DataType dtype_of(const std::string& onnx) const;

  // A new tensor for the value `onnx`, which becomes its current form.
  int64_t define(const std::string& onnx, int64_t block);

  // The channel block a generated kernel in the blocked layout (a pool, a DepthToSpace, a
  // generated conv) reads `onnx` in: the one its producer wrote, so no conversion comes before
  // it, else kGeneratedBlock (16: an AVX-512 register of float32).
  static constexpr int64_t kGeneratedBlock = 16;
  int64_t written_block(const std::string& onnx) const;

  // Whether a channel-blocked tensor holds its values in ONNX's order already: [N, C, 1, 1] with
  // one image or whole blocks (a pooled tensor), its padded lanes past the end.
  static bool blocked_is_nchw(const PlanTensor& t);
  // Whether 4-D `t` holds the same bytes in channel block `block` (0: NCHW): a block of 1 is
  // NCHW, and a pooled [N, C, 1, 1] is the same in either layout (blocked_is_nchw).
  static bool same_bytes(const PlanTensor& t, int64_t block);

  void plan_view(const frontend::Node& n);

  // `to` (of its graph shape) as a view of `from` in ONNX's layout; node `n` names an error.
  void view(const std::string& from, const std::string& to, const frontend::Node& n);

  void plan_elementwise(const frontend::Node& n);

  // A generated kernel on ONNX's layout: constants packed into the weights, activations converted
  // from a blocked layout where one is.
  void plan_generated(const GeneratedStep& g);

  // What the nodes fused into a task add to its operator, per output channel: y = scale * op +
  // shift (BatchNormalization, bias Adds; the scale folds into the weights), and the residual
  // tensor.
  struct Affine {
    std::vector<float> scale, shift;
    bool shifted = false;  // a bias or BN: the kernel needs its bias argument
    std::string residual;  // "" = none
  };

  // `fused`: the nodes fused into the anchor, in the order they follow it.
  Affine fused_affine(const frontend::Node& anchor, const std::vector<size_t>& fused,
                      int64_t channels, const std::string& anchor_bias);

  void plan_task(const frontend::TaskOccurrence& occ);

  // An Add, Sub, Mul or Div of a channel-blocked [N, C, H, W] activation and a per-channel
  // vector as one kernel in that layout (model_plan_broadcast.cc); false, planning nothing, for
  // any other node.
  bool plan_channel_broadcast(const frontend::Node& n);

  // A BatchNormalization of float32 data in a channel-blocked layout as one kernel in that layout
  // (model_plan_broadcast.cc); false, planning nothing, for data in ONNX's layout.
  bool plan_blocked_batch_norm(const frontend::Node& n);

  // The block the float convs that read `tensor` take their data in (conv2d_nchwc's ic_block,
  // depthwise_conv2d_nchwc's block), or 0 when none reads it, one pads it first, or two read it in
  // different blocks (model_plan_tasks.cc).
  int64_t conv_data_block(const std::string& tensor) const;

  // A Concat whose parts are contiguous slices of its output (one image's channels in the blocked
  // layout, or behind leading 1s in ONNX's): each part's producer writes its slice (its tensor
  // becomes a view of the output), a part that cannot is copied there (model_plan_concat.cc);
  // false, planning nothing, for any other.
  bool plan_concat_in_place(const frontend::Node& n);

  // A Split whose outputs are contiguous slices of its input (as above): views, no kernel; false,
  // planning nothing, for any other (model_plan_concat.cc).
  bool plan_split_as_views(const frontend::Node& n);

  // A Slice or Gather that takes one contiguous range of its input (single_axis_range, the axes
  // before it all 1, in ONNX's layout: q, k and v out of an attention's packed projection): a
  // view, no kernel; false, planning nothing, for any other (model_plan_concat.cc).
  bool plan_slice_as_view(const frontend::Node& n);

  // Makes arena tensor `root` and every view of it views of `onto`, `root` starting `offset` bytes
  // into it (model_plan_concat.cc).
  void place_in(int64_t root, int64_t onto, int64_t offset);

  // DepthToSpace as one generated kernel between channel-blocked layouts (model_plan_shuffle.cc).
  void plan_depth_to_space(const frontend::Node& n);

  // A Reshape, Flatten, Squeeze or Unsqueeze of a float32 channel-blocked 4-D tensor that only a
  // Transpose reads (a detection head's [N, A*85, H, W] -> [N, A, 85, H, W] -> [N, A, H, W, 85],
  // ViT's patches [N, C, H*W] -> [N, H*W, C], a text recognizer's [N, C, 1, W] -> [N, C, W] ->
  // [N, W, C]): planned as nothing, remembered in deferred_views_ for
  // plan_blocked_transpose (model_plan_shuffle.cc); false, planning nothing, for any other.
  bool defer_blocked_view(const frontend::Node& n);

  // A Transpose of a float32 channel-blocked 4-D tensor, or of a deferred view of one, as one
  // generated kernel reading the blocked layout and writing ONNX's (model_plan_shuffle.cc); false,
  // planning nothing, for any other.
  bool plan_blocked_transpose(const frontend::Node& n);

  // A Resize or Upsample of float32 data in a channel-blocked layout as one generated kernel in
  // that layout (model_plan_resize.cc); false, planning nothing, for data in ONNX's layout.
  bool plan_blocked_resize(const frontend::Node& n);

  // A MaxPool or AveragePool without a task: a generated pool in the channel-blocked layout (its
  // input's block, else 16) with the window as the node gives it (model_plan_windows.cc).
  void plan_pool(const frontend::Node& n);

  // A Conv no template takes as one generated conv_blocked with its fused nodes, in the input's
  // block (else 16) (model_plan_windows.cc).
  void plan_conv_blocked(const frontend::GeneratedConv& c);

  void bind_conv(PlanStep& s, const frontend::Node& conv, const frontend::TaskOccurrence& occ,
                 const std::string& out_name, const std::vector<te::Tensor>& args);

  // The int8 kernel of a QuantizedOp: the uint8 data (blocked as a conv reads it), the int8
  // weights packed, the requantize epilogue's inputs and the input sums' (plan_input_sums). With
  // the data's zero point zx the kernel's int32 sum is that of x * w, i.e. (x - zx) * w + zx *
  // sum(w): the bias takes -zx * sum(w[k]) per output channel (a conv's padding taps read zx, so
  // the same holds at the borders). The scale is ONNX Runtime's, s_x * s_w[k] / s_y in float32.
  void bind_quantized(PlanStep& s, const frontend::Node& anchor,
                      const std::vector<te::Tensor>& args);

  // The input sums of a QuantizedOp with input_sums (int32 of `shape`), computed by a generated
  // kernel planned here (before the int8 kernel that reads them): a conv's input window sums
  // (input_window_sums, on the data in `block` as the conv reads it; the window from the task's
  // arguments `a`), a matrix product's row sums (input_row_sums).
  int64_t plan_input_sums(const frontend::Node& anchor, const frontend::QuantizedOp& q,
                          const schedule_space::WorkloadArgs& a, int64_t block,
                          const std::vector<int64_t>& shape);

  // The block the int8 convs that read `tensor` take their data in (conv2d_nchwc_u8s8s32's
  // ic_block, depthwise_conv2d_nchwc_u8s8s32's 16), or 0 when no int8 conv reads it or two read it
  // in different blocks.
  int64_t int8_data_block(const std::string& tensor) const;

  // A QuantizeLinear per tensor of 4-D float32 data whose output only int8 convs read, in one
  // kernel that writes their blocked layout (quantize_linear_blocked): false, planning nothing,
  // for any other.
  bool plan_blocked_quantize(const frontend::Node& n);

  // An integer constant (int8, uint8, int32, int64 values).
  const frontend::ConstantValue& integer_constant(const frontend::Node& n,
                                                  const std::string& tensor) const;

  // The value of a one-element constant, float or integer ("" reads as 0).
  double scalar_constant(const frontend::Node& n, const std::string& tensor) const;

  // A uint8 Add as one generated kernel (quantized_add) on its operands' layout: the first
  // operand's, blocked or not, the second converted to it.
  void plan_quantized_add(const frontend::QuantizedAdd& a);

  // A uint8 max pool as one generated kernel in the channel-blocked layout (the data's block, or
  // conv2d_nchwc_u8s8s32's 16 when the data is in ONNX's layout).
  void plan_quantized_max_pool(const frontend::QuantizedMaxPool& p);

  // A uint8 global average pool as one generated kernel in the channel-blocked layout, as the max
  // pool chooses it; a Flatten or Reshape before its QuantizeLinear makes the output a view of
  // the pooled [N, C, 1, 1] (no copy when blocked_is_nchw).
  void plan_quantized_global_pool(const frontend::QuantizedGlobalAveragePool& p);

  // The block a generated uint8 pool of `data` runs in: its current one, else the int8 convs'.
  int64_t uint8_pool_block(const std::string& data) const;

  void bind_gemm(PlanStep& s, const frontend::Node& gemm, const frontend::TaskOccurrence& occ,
                 const std::string& out_name, const std::vector<te::Tensor>& args);

  const frontend::Graph& g_;
  const std::map<std::string, frontend::ConstantValue> constants_;  // with folded DequantizeLinear
  const PlanOptions& options_;
  codegen::Target target_;
  frontend::ModelTasks tasks_;
  ModelPlan plan_;
  std::map<std::string, int64_t> current_;  // ONNX tensor -> its latest form
  // A Reshape's output planned by the Transpose that reads it -> the blocked tensor it reshapes
  // and the Reshape's name (defer_blocked_view).
  struct DeferredView {
    std::string source, node;
  };
  std::map<std::string, DeferredView> deferred_views_;
  std::map<std::pair<std::string, int64_t>, int64_t>
      forms_;  // (ONNX tensor, block) -> converted copy
  std::map<size_t, const frontend::LayerNormGroup*> layer_norm_at_;     // first node -> its group
  std::map<size_t, const frontend::ScaledSoftmax*> scaled_softmax_at_;  // Softmax node -> it
  // A node planned with others (a task's fused and prologue nodes, a uint8 Add's or max pool's
  // Q/DQ nodes): node -> those others, whose inputs must exist before it is planned.
  std::map<size_t, std::vector<size_t>> group_;
  std::map<size_t, const frontend::QuantizedAdd*> quantized_add_at_;
  std::map<size_t, const frontend::QuantizedMaxPool*> quantized_max_pool_at_;
  std::map<size_t, const frontend::QuantizedGlobalAveragePool*> quantized_global_pool_at_;
  std::map<size_t, const frontend::GeneratedConv*> generated_conv_at_;
  std::vector<BlockedNode> blocked_;  // the nodes refused so far, in planning order
};

}  // namespace ktune::deploy
