// Defines TaskExtractor, the pass of extract_tasks (model_tasks.h) over a Graph: each anchor
// family maps its nodes onto templates in a file of its own (tasks_conv.cc, tasks_matmul.cc,
// tasks_pool.cc, tasks_quantized.cc); model_tasks.cc walks the graph, hands each anchor to the
// family the operator table names (OperatorInfo::tasks) and merges the workloads.
// Internal to frontend/.
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "frontend/epilogue_fusion.h"
#include "frontend/model_tasks.h"

namespace ktune::frontend {

using Args = std::map<std::string, std::string>;

// What one anchor node (Conv, Gemm, pooling ...) becomes, before merging.
struct Candidate {
  std::string template_name;
  Args args;               // without the epilogue
  std::string substitute;  // a template that computes the same with these args ("" = none)
  FusedEpilogue epilogue;
  double flop = 0;
  std::string note;
  std::vector<Candidate> alternatives;  // other algorithms for the same node (ModelTask's)
  std::string dtype = "float32";        // the dtype argument ("" = the template takes none)
  std::vector<size_t> prologue;         // TaskOccurrence::prologue
  std::string first_input;              // TaskOccurrence::first_input
};

// An anchor that cannot become a task: the reason goes to the unsupported list, with the
// generated kernel a model build computes it with ("" = none).
struct NotMapped {
  std::string reason;
  std::string generated = "";
  // The node and the nodes its generated kernel fuses, '+'-joined ("" = the node alone).
  std::string layer = "";
};

// What a node maps to: a task, a reason it is none (with the generated kernel), or nothing to
// say (not an anchor).
using Mapped = std::variant<Candidate, NotMapped, std::monostate>;

inline std::string i2s(int64_t v) { return std::to_string(v); }

inline bool all_equal(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v.front(); });
}

// Sets status, refused and tunable (model_tasks.cc).
void resolve(ModelTask& t, const schedule_space::TargetTraits& target);

class TaskExtractor {
 public:
  TaskExtractor(const Graph& graph, const schedule_space::TargetTraits& target);

  ModelTasks run();

 private:
  Mapped map_anchor(size_t i);
  // A Conv, or the conv of an int8 operator `q` (its data and weights; nothing fused here)
  // (tasks_conv.cc).
  Mapped map_conv(size_t i, const QuantizedOp* q = nullptr);
  // A float32 Conv no template takes, for the generated conv_blocked (GeneratedConv), with the
  // epilogue the templates' would fuse (tasks_conv.cc).
  NotMapped generated_conv(size_t i, const std::vector<int64_t>& pads, const std::string& reason);
  // A Conv, Gemm or MatMul with dequantized inputs that runs in float32 says why
  // (tasks_quantized.cc).
  void note_not_int8(size_t i, Candidate& c) const;
  // The int8 kernel of a QuantizedOp (tasks_quantized.cc).
  Mapped map_quantized(size_t i);
  // matmul_u8s8s32 of the data's rows times the weights (tasks_matmul.cc).
  Mapped map_quantized_matmul(const QuantizedOp& q);
  // Gemm and MatMul (tasks_matmul.cc).
  Mapped map_gemm(size_t i);
  // Makes the Softmax (with its scaling, a ScaledSoftmax) that computes batch_matmul candidate
  // `c`'s A, and that node `i` alone reads, its a_softmax prologue (tasks_matmul.cc).
  void take_softmax_prologue(size_t i, Candidate& c);
  // The pools (tasks_pool.cc).
  Mapped map_pool(const Node& n);
  // The listed form of a candidate (model_tasks.cc).
  ModelTask make_task(const Candidate& c) const;

  const Graph& g_;
  schedule_space::TargetTraits target_;
  EpilogueFuser fuser_;
  std::vector<LayerNormGroup> layer_norms_;
  std::map<size_t, size_t> in_layer_norm_;  // node -> its group
  QuantizedOps quantized_;
  std::map<size_t, size_t> quantized_at_;  // anchor node -> its QuantizedOp
  std::vector<ScaledSoftmax> scaled_softmaxes_;
  std::map<size_t, size_t> scaled_softmax_at_;  // Softmax node -> its ScaledSoftmax
  std::set<size_t> softmax_prologues_;          // Softmax nodes a batch_matmul reads as a_softmax
  // A uint8 operator a model build generates: node -> (reason, generated kernel).
  std::map<size_t, std::pair<std::string, std::string>> generated_at_;
  std::vector<GeneratedConv> generated_convs_;
};

}  // namespace ktune::frontend
