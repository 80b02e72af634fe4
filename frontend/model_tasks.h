// Defines ModelTasks, the tuning tasks of a model (template, arguments, fused epilogue, count,
// FLOPs) and the operators without a template, and extract_tasks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/epilogue_fusion.h"
#include "frontend/layer_norm.h"
#include "frontend/onnx_graph.h"
#include "frontend/qdq_fusion.h"
#include "frontend/scaled_softmax.h"
#include "schedule_space/task.h"
#include "schedule_space/workload.h"

namespace ktune::frontend {

// Whether today's templates accept a task (Task::create), and in which form.
enum class TaskStatus {
  kOk,               // the template takes the arguments as listed, epilogue included
  kEpilogueUnfused,  // the template takes the shape but not the epilogue argument: the bare
                     // operator is tuned
  kSubstitute,       // the template refuses the shape; `substitute` (another template) takes it
  kRefused,          // no template takes the shape today (`refused` says why)
};
std::string to_string(TaskStatus status);

// One distinct workload of the model.
struct ModelTask {
  std::string template_name;  // what it should use: conv2d_nchwc, depthwise_conv2d_nchwc, ...
  // What the model fixes: shape, dtype, "epilogue" when one is fused, and its activation's
  // parameters that differ from ONNX's defaults ("clip_min", "leaky_alpha", ...).
  std::map<std::string, std::string> args;
  // "" or steps joined by '_': bias, add (residual), then an activation (relu, relu6, clip,
  // hardswish, silu, gelu_erf, sigmoid, leaky_relu, hardsigmoid), e.g. bias_add_relu.
  std::string epilogue;
  int64_t count = 0;  // occurrences in the model
  double flop = 0;    // of one occurrence (the operator; the epilogue is not counted)
  // Names of the nodes it stands for: per occurrence, the operator's node, then the nodes fused
  // into its epilogue.
  std::vector<std::string> layers;
  // TaskOccurrence::layer of each occurrence when the task was read from JSON (a task list
  // without its graph: a server's model job); ModelTasks::layers_of gives them.
  std::vector<std::string> occurrence_layers;
  std::string note;  // e.g. "float32, not int8: ..."
  TaskStatus status = TaskStatus::kRefused;
  std::string
      substitute;  // a template that computes the same when `template_name` refuses ("" = none)
  std::string refused;  // the templates' errors ("; "-joined) when not kOk
  // The task that can be tuned today (kOk, kEpilogueUnfused, kSubstitute), else nullopt.
  std::optional<schedule_space::Task> tunable;
  // Another algorithm for the occurrences of tasks[*alternative_of] (Winograd for a 3x3 conv):
  // tuned under the same budget, and a model build runs whichever of them measured faster. Its
  // count and layers are those of that task; its flop is the direct operator's, so that GFLOP/s
  // compare. Only alternatives a template takes (kOk) are listed.
  std::optional<size_t> alternative_of;
  // Why a model build runs no kernel of this task's template ("" = it does): a pool on
  // channel-blocked data runs a generated blocked pool (deploy::untune_generated_tasks). Such a
  // task is not tuned: tunable is empty and `refused` says this.
  std::string built_generated;

  // "conv2d_nchwc(N=1,C=64,...,epilogue=bias_relu)" — the key it should have (args as listed).
  std::string key() const;
  // Marks it built_generated for `why`: not tunable, refused with that reason.
  void mark_built_generated(const std::string& why);
};

// An operator of the model that no task covers (and that no task fused), with its count.
struct UnsupportedOp {
  std::string op;  // the ONNX operator, or "LayerNorm" for a LayerNormGroup
  int64_t count = 0;
  std::string reason;  // "no template", "layout only (no kernel)", "asymmetric padding", ...
  // Names of its nodes, one per occurrence (a LayerNorm group's nodes '+'-joined, a generated
  // conv's with the nodes it fuses).
  std::vector<std::string> layers;
  // How a model build computes it without tuning: "view" (no kernel), "elementwise",
  // "batch_norm", "layer_norm", "softmax", "log_softmax", "reduce", "transpose", "concat",
  // "split", "slice", "pad", "gather", "resize", "pool", "conv_blocked" (a Conv with the nodes
  // fused into it: GeneratedConv); "" when it cannot.
  std::string generated;
};

// Where one task runs in the graph: the node it stands for and the nodes fused into it, in graph
// order (what a model build follows; the tuning tasks above merge these by workload).
struct TaskOccurrence {
  size_t task = 0;            // index into ModelTasks::tasks
  size_t node = 0;            // the anchor node (Conv, Gemm, MatMul, pooling)
  std::vector<size_t> fused;  // nodes fused into its epilogue (BatchNormalization, Add, Relu, ...)
  // Nodes before the anchor that it absorbs (the DequantizeLinear nodes of an int8 operator, the
  // Softmax a batch_matmul reads as a_softmax with its scaling Mul or Div).
  std::vector<size_t> prologue;
  // The names of the anchor, the fused and the prologue nodes, '+'-joined ("conv1+bn1+relu1"):
  // the layer as a model build labels its step.
  std::string layer;
  // What the kernel reads as its first operand when a prologue computes the anchor's own (the
  // scores under a_softmax); "" = the anchor's first input.
  std::string first_input = "";
};

// A Conv no template takes (2 to C-1 groups, dilations that differ per axis): a model build
// computes it with a generated kernel in the channel-blocked layout (deploy's conv_blocked), the
// nodes its epilogue takes with it. Listed as an UnsupportedOp "Conv" generated "conv_blocked".
struct GeneratedConv {
  size_t node = 0;            // the Conv
  FusedEpilogue epilogue;     // bias, BatchNormalization, residual Add, activation
  std::vector<int64_t> pads;  // top, left, bottom, right (auto_pad resolved)
};

struct ModelTasks {
  std::string model;             // the graph's name
  std::vector<ModelTask> tasks;  // in order of first occurrence
  std::vector<UnsupportedOp> unsupported;
  std::vector<TaskOccurrence> occurrences;  // in graph order; not part of to_json
  std::vector<LayerNormGroup>
      layer_norms;  // listed as unsupported "LayerNorm"; not part of to_json
  // Softmaxes of scaled scores, listed at the Softmax with its Mul or Div; not part of to_json.
  std::vector<ScaledSoftmax> scaled_softmaxes;
  // The int8 operators (tasks of conv2d_nchwc_u8s8s32 and matmul_u8s8s32, by anchor node); not
  // part of to_json.
  std::vector<QuantizedOp> quantized;
  // The uint8 Adds and max pools a model build generates (listed as unsupported "Add" and
  // "MaxPool" with generated "quantized_add" and "max_pool_u8"); not part of to_json.
  std::vector<QuantizedAdd> quantized_adds;
  std::vector<QuantizedMaxPool> quantized_max_pools;
  // The uint8 global average pools (DQ -> GlobalAveragePool [-> Flatten | Reshape] -> Q and
  // com.microsoft QLinearGlobalAveragePool; generated "global_average_pool_u8").
  std::vector<QuantizedGlobalAveragePool> quantized_global_pools;
  std::vector<GeneratedConv> generated_convs;  // not part of to_json
  // Sum over tasks (alternatives excluded: they compute the same) of count x flop.
  double total_flop() const;
  // The alternatives of tasks[task] (indexes; ModelTask::alternative_of == task).
  std::vector<size_t> alternatives_of(size_t task) const;
  // TaskOccurrence::layer of every occurrence of tasks[task] (of the task an alternative stands
  // in for), in graph order (for tasks read from JSON, which carry no occurrences, the labels the
  // JSON listed).
  std::vector<std::string> layers_of(size_t task) const;
};

// Extracts the tuning tasks of `graph` on `target`: Conv (groups = 1: conv2d_nchwc, with
// conv2d_winograd_nchwc as an alternative for 3x3 stride 1; depthwise:
// depthwise_conv2d_nchwc; other groups and dilations that differ per axis: no task, a
// GeneratedConv with its epilogue), Gemm / MatMul (matmul, or
// dense_bias_relu for Gemm + bias + Relu), MaxPool / AveragePool / GlobalAveragePool
// (max_pool2d / avg_pool2d). What follows a conv or matmul is fused as its epilogue (see
// EpilogueFuser::fuse): BatchNormalization folded into a bias, a bias Add, a residual Add, and
// Relu, Clip (relu6 or bounds), HardSwish, Sigmoid, LeakyRelu, HardSigmoid, HardSigmoid-Mul or
// Sigmoid-Mul (silu), the Erf form of GELU (gelu_erf). In a quantized model, DequantizeLinear ->
// Conv | Gemm | MatMul [-> Relu] -> QuantizeLinear, and QLinearConv and QLinearMatMul
// (QuantizedOp), are one conv2d_nchwc_u8s8s32 (input channels padded to a multiple of 4),
// depthwise_conv2d_nchwc_u8s8s32 or matmul_u8s8s32 task with its requantize epilogue; a Conv, Gemm
// or MatMul with dequantized inputs that does not take that form runs in float32 and its note says
// why (a QLinearConv or QLinearMatMul that does not is an UnsupportedOp with the reason). DQ + DQ
// -> Add [-> Relu] -> Q of uint8 tensors (QuantizedAdd) is an UnsupportedOp "Add" generated as
// "quantized_add" (com.microsoft QLinearAdd too), DQ -> MaxPool -> Q of one scale
// (QuantizedMaxPool) a "MaxPool" generated as "max_pool_u8", DQ -> GlobalAveragePool [-> Flatten |
// Reshape] -> Q and com.microsoft QLinearGlobalAveragePool (QuantizedGlobalAveragePool) a
// "GlobalAveragePool" or "QLinearGlobalAveragePool" generated as "global_average_pool_u8" (the view
// a rename of its output); other QuantizeLinear and DequantizeLinear nodes are generated kernels
// ("quantize", "dequantize"; a DequantizeLinear of a constant is folded at build time: "folded").
// Identical workloads are merged with a count. Every other node is an
// UnsupportedOp (a LayerNormGroup is one, "LayerNorm"), with the generated kernel a model build
// computes it with, if any: nothing is dropped. Each task is tried with Task::create (typed errors
// are caught into `refused`). Throws Error(kInvalidArgument) for a model that cannot run although
// ONNX's checker and shape inference pass it: a Conv whose input channels differ from its weights',
// a Gemm whose operands do not multiply (e.g. after a wrong --input).
ModelTasks extract_tasks(const Graph& graph, const schedule_space::TargetTraits& target);

// {"model", "total_gflop", "tasks": [{template, args, epilogue, count, flop, gflop_total, layers,
// occurrences (layers_of: one label per occurrence), note, status, refused, substitute, tuned_as,
// alternative_of}], "unsupported": [{op, count, reason, layers, generated (when not "")}]}.
nlohmann::json to_json(const ModelTasks& tasks);

// The inverse of to_json on another machine: the tasks as listed (template, args, epilogue,
// count, flop, layers, occurrences, note, substitute) with status, refused and tunable decided
// again by the templates on `target` (a tuning server rebuilds a client's model for its devices).
// Throws Error(kInvalidArgument) naming what is missing or malformed.
ModelTasks tasks_from_json(const nlohmann::json& j, const schedule_space::TargetTraits& target);

}  // namespace ktune::frontend
