// Defines ModelPlan, what a whole-model build runs (every tensor with its layout and storage, every
// kernel call in order, the packed weights, one arena), and plan_model, which makes it from an ONNX
// graph and the tuning log.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "deploy/config_choice.h"
#include "frontend/onnx_graph.h"
#include "schedule_space/task.h"
#include "te/ir.h"

namespace ktune::frontend {
struct ModelTasks;  // frontend/model_tasks.h
}  // namespace ktune::frontend

namespace ktune::deploy {

// Where a tensor's bytes live while the model runs.
enum class Storage { kArena, kWeights, kInput, kOutput };

struct PlanTensor {
  std::string name;            // the ONNX tensor; a converted copy is "<name>@c<block>"
  std::vector<int64_t> shape;  // logical (ONNX) shape
  int64_t block = 0;           // 0: ONNX's layout; b > 0: NCHW[b]c, [n][ceil(c/b)][h][w][b]
  Storage storage = Storage::kArena;
  int64_t index = 0;      // kInput, kOutput: which one
  int64_t alias_of = -1;  // a view (Reshape, Flatten, ...): the tensor whose bytes it shares
  // A view: bytes from its root's start to its own (a Split's part, a Concat's operand).
  int64_t view_offset = 0;
  int64_t offset = 0;  // bytes into the arena (memory plan) or the weights; a view's, its own
  // The element type: float32, or uint8 / int8 / int32 on a quantized model's int8 path, or
  // int64 / int32 indices (a graph input of token ids).
  te::DataType dtype = te::Float(32);
  // An integer graph input that indexes constant tables (Gather): the fewest rows of those
  // tables, below which its values must stay (random inputs do); 0 = it indexes none.
  int64_t values_below = 0;
  // Elements it occupies (with the padded channel lanes of a blocked tensor).
  int64_t elements() const;
  // Bytes it occupies: elements() of dtype.
  int64_t bytes() const;
};

// One kernel call of the model, in order.
struct PlanStep {
  std::string layer;  // the ONNX nodes it runs, '+'-joined ("conv1+bn1+relu1")
  // "task" (a tuned template), "layout" (NCHW <-> NCHWc), "elementwise", "pool" (NCHWc), or
  // another generated kernel (model_nodes.h)
  std::string kind;
  std::string symbol;         // its kernel's entry symbol
  std::vector<int64_t> args;  // tensor ids in the kernel's argument order (the output last)
  te::LoweredFunc func;       // the kernel's loop IR
  double flop = 0;            // of the operator (tasks); 0 for data movement
  // kind "task": the workload and where its config came from. kind "pool": the tuned pool task
  // whose work this generated kernel does instead (no choice).
  std::optional<schedule_space::Task> task;
  std::optional<ConfigChoice> choice;
  // At most this many threads for its parallel loops (0: the runtime's count): a step measured
  // faster on one thread in the model's context (measure_step_threads).
  int max_threads = 0;
};

struct ModelPlan {
  std::string name;  // C prefix of the library's entry points
  std::vector<PlanTensor> tensors;
  std::vector<PlanStep> steps;
  std::vector<int64_t> inputs;     // tensor ids of the graph inputs (kInput), in order
  std::vector<int64_t> outputs;    // tensor ids of the graph outputs (kOutput), in order
  std::vector<uint8_t> weights;    // every packed weight, each 64-byte aligned
  int64_t arena_bytes = 0;         // intermediate tensors, reused by liveness
  int64_t tensor_bytes_total = 0;  // what the arena would be without reuse
};

struct PlanOptions {
  std::string target = "host";  // "host" or a TVM-style target string
  HistorySource history = HistorySource::log("ktune.db");
  bool require_tuned = false;  // a task without its own record is an error
  // Plan every task on its fallback config without reading `history`: what plan_verdict needs.
  bool verdict_only = false;
};

// A node that a model build has no path for, and why.
struct BlockedNode {
  std::string node, op, reason;
  // Graph nodes it stands for: itself and those it absorbs (its fused epilogue), none of which a
  // build computes without it.
  size_t nodes = 1;
};

// Plans `graph` (every shape known; `constants` its weights, frontend::read_onnx's) as
// the library `name`: each node becomes a tuned task (the best record of its workload, else the
// nearest tuned shape's config, else the fallback; epilogues and BatchNormalization folded in),
// a layout conversion, an elementwise kernel, or a view; channel-blocked layouts are kept between
// blocked operators and converted only where an operator needs another; weights are packed into
// each kernel's layout; intermediate tensors share one arena by liveness.
// Throws Error(kUnsupported) naming every node of an operator or form with no path in a model
// build (each as plan_verdict lists it), Error(kInvalidArgument) for a tensor without a known shape
// or a missing weight, Error(kNotFound) with require_tuned for a task without a record, and what
// choose_config throws.
ModelPlan plan_model(const frontend::Graph& graph,
                     const std::map<std::string, frontend::ConstantValue>& constants,
                     const std::string& name, const PlanOptions& options);

// The nodes of `graph` that a model build for `target` cannot compute: plan_model run to the end
// (every task on its fallback config, nothing compiled, no log read), each refusal collected and
// the nodes after it planned on as if it had been built. Empty: the model builds. Throws what
// plan_model throws besides Error(kUnsupported).
std::vector<BlockedNode> plan_verdict(
    const frontend::Graph& graph, const std::map<std::string, frontend::ConstantValue>& constants,
    const std::string& target);

// Marks the tasks of `tasks` that a model build of `graph` for `target` never runs from their
// template (every occurrence a generated kernel instead: a pool whose input is channel-blocked
// runs blocked) as not tunable, with that reason: tuning them would not change what ships. Plans
// as plan_verdict does. Returns how many were marked.
size_t untune_generated_tasks(frontend::ModelTasks& tasks, const frontend::Graph& graph,
                              const std::map<std::string, frontend::ConstantValue>& constants,
                              const std::string& target);

// "2 nodes cannot be built: node 'a' (Resize): why; node 'b' (...): why", the one line every
// refusal of a model gives.
std::string blocked_text(const std::vector<BlockedNode>& blocked);

// Where a plan's steps got their kernels; the four counts add up to the plan's steps.
struct StepSources {
  int tuned = 0;  // a task on its own best record
  // Of those, the ones whose best record is the template's fallback config (measured, and no
  // trial beat it, or none ran): a log tuned briefly has many.
  int tuned_fallback_config = 0;
  int nearest = 0;    // a task on the nearest tuned shape's config
  int fallback = 0;   // a task on its template's fallback config
  int generated = 0;  // layout, elementwise, pool and other generated kernels (nothing to tune)
  int tasks() const { return tuned + nearest + fallback; }
};
StepSources step_sources(const ModelPlan& plan);

// Places every arena tensor of `plan` (sets its offset, arena_bytes and tensor_bytes_total): each
// lives from the step that first uses it to the last step that reads it or a view of it, and
// tensors live at the same time never overlap; views take their root's offset.
void place_in_arena(ModelPlan& plan);

}  // namespace ktune::deploy
