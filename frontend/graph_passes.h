// Declares the graph clean-up that runs between reading a model and extracting its tasks: each
// pass, the pipeline (simplify_graph) and load_model, which reads a model and runs it.
//
// Exporters write graphs for a runtime that evaluates everything at run time: Constant nodes,
// shape arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape), Identity and Dropout,
// If on a condition fixed by the input's shape. Once --input fixes every dimension all of that is
// known at build time; the passes turn it into constants, so that what remains is the computation
// the operator table maps.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frontend/onnx_graph.h"

namespace ktune::frontend {

// An INTS attribute (what a pass writes when it rewrites a node's pads, strides or axes).
inline Attribute ints_attr(std::vector<int64_t> v) { return Attribute{std::move(v), {}, {}, {}}; }

// Called after each pass with its name and the model it left.
using PassObserver = std::function<void(const std::string& pass, const Model& model)>;

// Replaces each If whose condition is a constant by the nodes of the branch it takes (the
// branch's outputs renamed to the If's). pass_inline_if.cc.
void inline_constant_if(Model& model);

// Evaluates every node whose inputs are all constants, and every Shape and Size of a tensor of
// known shape, when its operator is one of the shape and arithmetic operators exporters use on
// constants (constant_eval.h); its outputs become constants and the node goes. Constant nodes go
// too (their values are in Model::constants). pass_fold_constants.cc.
void fold_constants(Model& model);

// Removes Identity, inference-mode Dropout and a Cast to the type its input already has: their
// readers read the input instead (a graph output keeps its node, planned as a view).
// pass_remove_identities.cc.
void remove_identities(Model& model);

// Removes the nodes whose outputs nobody reads and that are no graph output (the shape arithmetic
// left behind, a Dropout's mask). pass_remove_dead_nodes.cc.
void remove_dead_nodes(Model& model);

// Rewrites each 1-D Conv, ConvTranspose, MaxPool and AveragePool (input [N, C, L], a conv's
// weights constant) as the 2-D one on [N, C, 1, L] between an Unsqueeze and a Squeeze, its padding
// explicit on the columns. pass_lift_1d.cc.
void lift_1d_windows(Model& model);

// Moves each Squeeze of axis 2 of a [N, C, 1, L] tensor below the elementwise nodes that read it
// (a constant operand of rank 2 or more gets the row axis too) and drops each Unsqueeze that
// restores such a tensor, so lifted 1-D convs and pools read each other's 4-D outputs.
// pass_sink_squeezes.cc.
void sink_squeezes(Model& model);

// True when `squeeze` drops axis 2 (of extent 1) of a 4-D tensor, whatever form its axes take (the
// row a lifted 1-D window added). pass_sink_squeezes.cc.
bool drops_row(const Graph& g, const Node& squeeze);

// Rewrites each 2-D ConvTranspose of strides (sh, sw) (any group count and dilation, pads explicit
// or given by output_shape or auto_pad, constant weights) as a Conv to K*sh*sw channels of
// ceil(k/s) taps (of its groups), the interleave of the phases (DepthToSpace DCR for one group and
// one stride, else Reshape, Transpose, Reshape) and, where its pads crop the output, a Slice.
// pass_conv_transpose.cc.
void conv_transpose_as_conv(Model& model);

// Moves a BatchNormalization of constant parameters and the unary activations (Relu, Clip,
// Sigmoid, ...) that alone read a DCR DepthToSpace's output above it, onto its input (the BN's
// parameters repeated per phase): a transposed conv's BN and activation then fuse into its phase
// conv. pass_hoist_over_depth_to_space.cc.
void hoist_over_depth_to_space(Model& model);

// Rewrites each float32 ReduceMean or ReduceMax over every spatial axis of [N, C, H, W] or
// [N, C, L] (keepdims 0 or 1) as GlobalAveragePool or GlobalMaxPool on [N, C, H, W] (a 3-D input
// read from before its row Squeeze, else through an Unsqueeze), then a Flatten or a Squeeze to the
// reduction's shape. pass_reduce_as_pool.cc.
void reduce_as_global_pool(Model& model);

// The axes a Reduce* node reduces: its `axes` attribute or its second input (a constant in
// Graph::values: ReduceSum from opset 13, the others from 18), made non-negative and sorted; every
// axis when none is given, none with noop_with_empty_axes. Nullopt when the input's shape is
// unknown, the axes input is not a known constant or an axis is out of range.
// pass_reduce_as_pool.cc.
std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n);

// Rewrites each float32 MatMul whose B is a Transpose of the last two axes (read by it alone) into
// com.microsoft FusedMatMul(A, B untransposed, transB=1), as ONNX Runtime's MatmulTransposeFusion
// does, when the product maps onto one matmul or batch_matmul (B a matrix, or the same batch axes
// as A); the Transpose goes. pass_matmul_transpose.cc.
void fold_transpose_into_matmul(Model& model);

// Moves a Mul or Div by a one-element float32 constant of an operand of a MatMul or FusedMatMul
// below the product when only a Softmax reads the product (paddle's q * scale before q k^T): the
// scaling then joins the Softmax's kernel (scaled_softmax.h). pass_scale_after_matmul.cc.
void move_scale_after_matmul(Model& model);

// Rewrites each float32 MatMul or FusedMatMul (transB) of [1, H, rows, cols] operands into
// HeadsMatMul (heads_matmul.h) when an operand is heads of a projection it can read in place (a
// group of a [1, S, G, H, D] Reshape: Gather, or Slice and Squeeze, of axis 0 of its Transpose
// to [G, 1, H, S, D]; or a [1, S, H, D] Reshape's Transpose to [1, H, S, D], or to [1, H, D, S]
// as B), or when only a Transpose to [1, S, H, D] reads its output (written so instead); the
// selections and Transposes go when nothing else reads them. pass_matmul_heads.cc.
void read_heads_in_place(Model& model);

// How many nodes read each tensor, a graph output counting as one more reader: what a pass checks
// before it folds a node into its only reader. graph_simplify.cc.
std::map<std::string, int> reader_counts(const Graph& g);

// The clean-up passes in order, `observe` (when set) called after each: rounds of fold_constants,
// inline_constant_if, remove_identities, remove_dead_nodes and infer_shapes until a round removes
// no node, then lift_1d_windows, sink_squeezes, reduce_as_global_pool, conv_transpose_as_conv,
// hoist_over_depth_to_space, fold_transpose_into_matmul, move_scale_after_matmul and
// read_heads_in_place. graph_simplify.cc.
void simplify_graph(Model& model, const PassObserver& observe = {});

// read_onnx then simplify_graph: the model as the operator table and a model build read it.
// Throws what read_onnx throws.
Model load_model(const std::string& path, const std::vector<InputShape>& inputs = {},
                 const PassObserver& observe = {});

// The graph as text, one node a line with its inputs' and outputs' shapes (constants marked), for
// `ktune tasks --dump-graph`.
std::string graph_text(const Model& model);

}  // namespace ktune::frontend
