// Declares build_model() (a ModelPlan compiled: one kernel per step and the driver), the model
// library's files (static library, header, weights), and ModelRunner, the same library loaded in
// this process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/artifact.h"
#include "codegen/shared_object.h"
#include "deploy/model_plan.h"
#include "tuning_db/step_threads_store.h"

namespace ktune::deploy {

struct BuiltModel {
  ModelPlan plan;
  std::vector<codegen::Artifact> kernels;  // one per plan step, in step order
  codegen::Artifact driver;                // <name>_create / _run / _destroy
  bool embed_weights = true;
  std::string model_key;  // model_key() of the graph it was planned from ("" when not known)
  // The thread count the steps' caps (PlanStep::max_threads) were measured at; 0: no caps.
  int step_threads_at = 0;
};

// What `ktune build --model` and `ktune run` ask for.
struct ModelRequest {
  std::string model_path;                    // an ONNX file
  std::vector<frontend::InputShape> inputs;  // --input NAME=SHAPE
  std::string name;                          // C prefix of the entry points (a C identifier)
  PlanOptions plan;                          // target, tuning log, require_tuned
  bool embed_weights = true;
  // The per-step thread counts of the log (tuning_db::StepThreadsStore) to apply: those measured
  // at this thread count, else those measured at the most threads (a step capped at one thread
  // stays on one at any count); 0: those measured at the most threads; -1: none. A server's log
  // has none here.
  int step_threads = 0;
};

// The key of a model in the log's step_threads: a hash (FNV-1a) of its nodes (op, inputs, outputs)
// and of every tensor's shape, so the same graph with other input shapes is another model.
std::string model_key(const frontend::Graph& graph);

// Sets each step's max_threads from `choice` where the step at the same position has the same
// layer (a plan that changed since keeps the rest uncapped); returns how many steps it capped.
int apply_step_threads(ModelPlan& plan, const tuning_db::StepThreadsRow& choice);

// Loads the model and its weights, plans and compiles it. Throws what load_onnx, plan_model and
// build_model throw, and Error(kInvalidArgument) for a name that is not a C identifier.
BuiltModel build_model(const ModelRequest& request);

// Compiles every step's kernel for `target` in one LLVM session, and the driver. With
// embed_weights false the driver's create reads a weights file (model_weights_file()).
// Throws what codegen::build_all and build_model_driver throw.
BuiltModel build_model(ModelPlan plan, const std::string& target, bool embed_weights);

// The same model with the steps' max_threads set to `max_threads` (one per step) and
// step_threads_at to `measured_at`: only the driver is compiled again. Throws
// Error(kInvalidArgument) for a count that is not one per step, and what build_model_driver throws.
BuiltModel with_step_threads(const BuiltModel& model, const std::vector<int>& max_threads,
                             int measured_at);
// The same model with the caps of a measured choice (each step's max_threads, measured at
// choice.threads). Throws as the one above.
BuiltModel with_step_threads(const BuiltModel& model, const tuning_db::StepThreadsRow& choice);

// The static library: the kernels and the driver, one object each.
std::vector<uint8_t> model_library(const BuiltModel& model);
// The C header: the entry points, the inputs' and outputs' shapes, the arena size, the thread
// count of the runtime (ktune_set_num_threads), how each layer was built, and the steps capped at
// fewer threads (with the count they were measured at).
std::string model_header(const BuiltModel& model, const std::string& header_name);
// The weights file a driver built without embedded weights reads (its size and hash are checked).
const std::vector<uint8_t>& model_weights_file(const BuiltModel& model);

// The model's library linked into a shared object and loaded here: run() is the shipped
// <name>_run on a context of its own; run_layers() calls the same kernels one at a time on an
// arena and weights of its own, timing each. Not thread-safe (one context); independent
// ModelRunners may run at once.
class ModelRunner {
 public:
  // Throws what codegen::link_shared_objects and SharedLibrary::load throw, and Error(kIo) when
  // the driver's create fails (out of memory).
  explicit ModelRunner(const BuiltModel& model);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Runs the model: one 64-byte aligned buffer per graph input (float32, or its integer type),
  // then one float buffer per output, with the plan's shapes (NCHW). Throws Error(kRun) naming the
  // status when the driver fails.
  void run(const std::vector<const void*>& inputs, const std::vector<float*>& outputs);
  // Runs the steps one at a time; returns each step's seconds (one run). Outputs as run().
  std::vector<double> run_layers(const std::vector<const void*>& inputs,
                                 const std::vector<float*>& outputs);

  // The buffers step `step` of run_layers() reads and writes, in its kernel's argument order: its
  // own arena and weights, and `inputs` and `outputs` as run() takes them. For running a model
  // one step at a time (run_step) and looking at what each step read and wrote.
  std::vector<void*> step_buffers(size_t step, const std::vector<const void*>& inputs,
                                  const std::vector<float*>& outputs);
  // Calls step `step`'s kernel on `args` (step_buffers), with its max_threads as the driver runs
  // it. Throws Error(kRun) naming the kernel when it returns a non-zero status.
  void run_step(size_t step, const std::vector<void*>& args);

 private:
  const ModelPlan& plan_;
  codegen::SharedLibrary library_;
  void* ctx_ = nullptr;
  void (*destroy_)(void*) = nullptr;
  void* run_ = nullptr;
  std::vector<int32_t (*)(void* const*)> kernels_;
  float* arena_ = nullptr;  // run_layers' own
  float* weights_ = nullptr;
};

}  // namespace ktune::deploy
