// build_model(), the model library's files, and ModelRunner.
#include "deploy/model_build.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "codegen/archive.h"
#include "codegen/codegen_llvm.h"
#include "codegen/model_driver.h"
#include "codegen/runtime.h"
#include "codegen/target.h"
#include "deploy/kernel_header.h"
#include "frontend/graph_passes.h"
#include "support/error.h"
#include "tuning_db/database.h"

namespace ktune::deploy {
namespace {

codegen::DriverArg driver_arg(const ModelPlan& plan, int64_t id) {
  // A view's own offset (place_in_arena: its root's plus view_offset); its root's storage.
  const int64_t offset = plan.tensors[static_cast<size_t>(id)].offset;
  const PlanTensor* t = &plan.tensors[static_cast<size_t>(id)];
  if (t->alias_of >= 0) t = &plan.tensors[static_cast<size_t>(t->alias_of)];
  switch (t->storage) {
    case Storage::kArena:
      return {codegen::DriverArg::Base::kArena, offset};
    case Storage::kWeights:
      return {codegen::DriverArg::Base::kWeights, offset};
    case Storage::kInput:
      return {codegen::DriverArg::Base::kInput, t->index};
    case Storage::kOutput:
      return {codegen::DriverArg::Base::kOutput, t->index};
  }
  return {};
}

std::string dims(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

std::string source_name(const PlanStep& s) {
  if (!s.choice) return s.kind;
  switch (s.choice->source) {
    case ConfigChoice::Source::kTuned:
      return s.choice->on_fallback_config() ? "tuned: the fallback config" : "tuned";
    case ConfigChoice::Source::kNearest:
      return "nearest";
    case ConfigChoice::Source::kFallback:
      return "fallback";
  }
  return "";
}

// The driver of `plan`: its kernels called in order on the arena, the weights and the buffers.
codegen::Artifact driver(const ModelPlan& plan, const codegen::Target& t, bool embed_weights) {
  codegen::DriverSpec spec;
  spec.name = plan.name;
  spec.num_inputs = static_cast<int>(plan.inputs.size());
  spec.num_outputs = static_cast<int>(plan.outputs.size());
  spec.arena_bytes = plan.arena_bytes;
  spec.weights = plan.weights;
  spec.embed_weights = embed_weights;
  for (const PlanStep& s : plan.steps) {
    codegen::DriverCall call{s.symbol, {}, s.max_threads};
    for (int64_t id : s.args) call.args.push_back(driver_arg(plan, id));
    spec.calls.push_back(std::move(call));
  }
  return codegen::build_model_driver(spec, t);
}

// The stored per-step thread counts `request` asks for, from its log; nullopt when there are none
// (a server's log, no log, a log without a choice for the model).
std::optional<tuning_db::StepThreadsRow> stored_step_threads(const ModelRequest& request,
                                                             const std::string& key,
                                                             const std::string& target) {
  const HistorySource& from = request.plan.history;
  if (request.step_threads < 0 || from.is_server() || from.is_untuned() ||
      !tuning_db::log_exists(from.db_path()))
    return std::nullopt;
  tuning_db::OpenOptions open;
  open.read_only = true;
  tuning_db::Database db = tuning_db::Database::open(from.db_path(), open);
  tuning_db::StepThreadsStore store(db);
  std::optional<tuning_db::StepThreadsRow> row;
  if (request.step_threads > 0) row = store.find(key, target, request.step_threads);
  return row ? row : store.find(key, target);
}

// Sets the calling thread's cap of parallel loops for its lifetime (none for max_threads 0).
class ThreadCap {
 public:
  explicit ThreadCap(int max_threads)
      : set_(max_threads > 0), previous_(set_ ? ktune_set_thread_cap(max_threads) : 0) {}
  ~ThreadCap() {
    if (set_) ktune_set_thread_cap(previous_);
  }
  ThreadCap(const ThreadCap&) = delete;
  ThreadCap& operator=(const ThreadCap&) = delete;

 private:
  bool set_;
  int previous_;
};

}  // namespace

std::string model_key(const frontend::Graph& graph) {
  std::string text;
  for (const frontend::Node& n : graph.nodes) {
    text += n.domain + "::" + n.op + "\n";
    for (const std::string& t : n.inputs) text += "<" + t + "\n";
    for (const std::string& t : n.outputs) text += ">" + t + "\n";
  }
  for (const auto& [name, shape] : graph.shapes) text += name + ":" + dims(shape) + "\n";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(
                    codegen::weights_hash(std::vector<uint8_t>(text.begin(), text.end()))));
  return "onnx-" + std::string(hex);
}

int apply_step_threads(ModelPlan& plan, const tuning_db::StepThreadsRow& choice) {
  int capped = 0;
  for (size_t k = 0; k < plan.steps.size() && k < choice.steps.size(); ++k) {
    PlanStep& s = plan.steps[k];
    s.max_threads = s.layer == choice.steps[k].layer ? choice.steps[k].max_threads : 0;
    capped += s.max_threads > 0 ? 1 : 0;
  }
  return capped;
}

BuiltModel build_model(ModelPlan plan, const std::string& target, bool embed_weights) {
  const codegen::Target t = codegen::Target::parse(target);
  std::vector<te::LoweredFunc> funcs;
  for (const PlanStep& s : plan.steps) funcs.push_back(s.func);
  BuiltModel m;
  m.kernels = codegen::build_all(funcs, t);
  m.driver = driver(plan, t, embed_weights);
  m.plan = std::move(plan);
  m.embed_weights = embed_weights;
  return m;
}

BuiltModel build_model(const ModelRequest& r) {
  if (!is_c_identifier(r.name))
    throw Error(ErrorKind::kInvalidArgument, "model name '" + r.name + "' is not a C identifier");
  const frontend::Model model = frontend::load_model(r.model_path, r.inputs);
  const frontend::Graph& graph = model.graph;
  PlanOptions plan = r.plan;
  // Over a server with a device key, "host" means the key's devices' target.
  if (plan.history.is_server())
    plan.target =
        device_key_target(plan.history.server_options(), plan.history.device_key(), plan.target);
  ModelPlan planned = plan_model(graph, model.constants, r.name, plan);
  const std::string key = model_key(graph);
  const std::string target = codegen::Target::parse(plan.target).str();
  int measured_at = 0;
  if (const auto choice = stored_step_threads(r, key, target))
    if (apply_step_threads(planned, *choice) > 0) measured_at = choice->threads;
  BuiltModel m = build_model(std::move(planned), plan.target, r.embed_weights);
  m.model_key = key;
  m.step_threads_at = measured_at;
  return m;
}

BuiltModel with_step_threads(const BuiltModel& model, const std::vector<int>& max_threads,
                             int measured_at) {
  if (max_threads.size() != model.plan.steps.size())
    throw Error(ErrorKind::kInvalidArgument,
                std::to_string(max_threads.size()) + " thread counts for a model of " +
                    std::to_string(model.plan.steps.size()) + " steps");
  BuiltModel m = model;
  bool any = false;
  for (size_t k = 0; k < max_threads.size(); ++k) {
    m.plan.steps[k].max_threads = max_threads[k];
    any = any || max_threads[k] > 0;
  }
  m.step_threads_at = any ? measured_at : 0;
  m.driver = driver(m.plan, codegen::Target::parse(m.driver.target), m.embed_weights);
  return m;
}

BuiltModel with_step_threads(const BuiltModel& model, const tuning_db::StepThreadsRow& choice) {
  std::vector<int> caps;
  for (const tuning_db::StepThreadsStep& s : choice.steps) caps.push_back(s.max_threads);
  return with_step_threads(model, caps, choice.threads);
}

std::vector<uint8_t> model_library(const BuiltModel& model) {
  std::vector<codegen::Artifact> objects = model.kernels;
  objects.push_back(model.driver);
  return codegen::static_library(objects);
}

const std::vector<uint8_t>& model_weights_file(const BuiltModel& model) {
  return model.plan.weights;
}

std::string model_header(const BuiltModel& model, const std::string& header_name) {
  const ModelPlan& p = model.plan;
  std::string guard = "KTUNE_MODEL_";
  for (char c : header_name)
    guard += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  std::ostringstream h;
  h << "/* " << header_name << ": the model '" << p.name << "' built by `ktune build --model` for "
    << model.driver.target << ".\n"
    << " * Link lib" << p.name
    << ".a and ktune's runtime (`ktune build --model ... --runtime FILE`, or any\n"
    << " * other ktune-built library's runtime). Buffers are float32 (an input of token ids: its\n"
    << " * integer type), NCHW, 64-byte aligned\n"
    << " * (aligned_alloc(64, ...)); buffers that start on a page (aligned_alloc(4096, ...)) are\n"
    << " * laid out as ktune timed them. Contexts are independent: threads may each run their own. "
       "*/\n"
    << "#ifndef " << guard << "\n#define " << guard
    << "\n\n#include <stddef.h>\n#include <stdint.h>\n\n"
    << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h << "/* Scratch memory of one context (intermediate tensors, reused by liveness). */\n"
    << "#define " << p.name << "_ARENA_BYTES " << p.arena_bytes << "\n";
  h << "#define " << p.name << "_WEIGHTS_BYTES " << p.weights.size() << "\n";
  h << "#define " << p.name << "_NUM_INPUTS " << p.inputs.size() << "\n#define " << p.name
    << "_NUM_OUTPUTS " << p.outputs.size() << "\n";
  std::string params;
  const auto io = [&](const char* kind, const std::vector<int64_t>& ids, bool input) {
    for (size_t i = 0; i < ids.size(); ++i) {
      const PlanTensor& t = p.tensors[static_cast<size_t>(ids[i])];
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      h << "/* " << kind << " " << i << ": \"" << t.name << "\", " << t.dtype.str() << " "
        << dims(t.shape) << " */\n";
      h << "#define " << p.name << "_" << kind << i << "_ELEMENTS " << n << "\n";
      h << "static const int64_t " << p.name << "_" << kind << i << "_shape[" << t.shape.size()
        << "] = {";
      for (size_t d = 0; d < t.shape.size(); ++d) h << (d ? ", " : "") << t.shape[d];
      h << "};\n";
      params += ", " + std::string(input ? "const " : "") + c_type(t.dtype.str()) + "* " + kind +
                std::to_string(i);
    }
  };
  io("INPUT", p.inputs, true);
  io("OUTPUT", p.outputs, false);
  const bool own_weights =
      codegen::model_buffer_placement(static_cast<int64_t>(p.weights.size())).huge;
  h << "\n/* A context with its own arena"
    << (model.embed_weights && own_weights ? " and its own copy of the weights" : "")
    << " (buffers of 2 MiB or more on huge pages); NULL when out of memory";
  if (!model.embed_weights)
    h << " or when weights_file cannot be read, or is not the one this library was built with "
         "(size "
      << p.weights.size() << ", FNV-1a 0x" << std::hex << codegen::weights_hash(p.weights)
      << std::dec << ")";
  h << ". */\nvoid* " << p.name << "_create("
    << (model.embed_weights ? "void" : "const char* weights_file") << ");\n";
  h << "/* Runs the model: 0, or a kernel's non-zero status (1 = out of memory), or 2 when a "
       "buffer is\n"
    << " * not 64-byte aligned. */\nint32_t " << p.name << "_run(void* ctx" << params << ");\n";
  h << "void " << p.name << "_destroy(void* ctx);\n\n";
  h << "/* The runtime's threads for parallel loops (the caller counts as one): 0, or -1 when n < "
       "1. */\n"
    << "int ktune_set_num_threads(int n);\n"
    << "/* 1 (the default): the runtime's workers are bound to CPUs of their own; 0: anywhere in "
       "the\n * affinity mask (as KTUNE_BIND_THREADS=0 in the environment). Returns the previous. "
       "*/\n"
    << "int ktune_set_thread_binding(int on);\n\n";
  if (model.step_threads_at > 0)
    h << "/* Steps marked [1 thread] below run on one thread whatever ktune_set_num_threads says:\n"
      << " * timed in the model's order at " << model.step_threads_at
      << " threads and at one, they ran clearly faster on one\n"
      << " * (the wake-up of a worker on another core cost more than their share of the work).\n"
      << " * So they need a runtime with ktune_set_thread_cap (any runtime of this ktune). */\n"
      << "#define " << p.name << "_STEP_THREADS_MEASURED_AT " << model.step_threads_at << "\n\n";
  h << "/* Layers (" << p.steps.size() << " kernels):\n";
  for (const PlanStep& s : p.steps) {
    h << " *   " << s.symbol << ": " << s.layer;
    if (s.task) h << " = " << s.task->workload_key() << " [" << source_name(s) << "]";
    if (s.max_threads > 0)
      h << " [" << s.max_threads << (s.max_threads == 1 ? " thread]" : " threads]");
    h << "\n";
  }
  h << " */\n\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
  return h.str();
}

ModelRunner::ModelRunner(const BuiltModel& model)
    : plan_(model.plan), library_([&] {
        std::vector<codegen::Artifact> objects = model.kernels;
        objects.push_back(model.driver);
        return codegen::SharedLibrary::load(codegen::link_shared_objects(objects));
      }()) {
  if (!model.embed_weights)
    throw Error(ErrorKind::kInvalidArgument, "a model runs in process with embedded weights");
  auto create = reinterpret_cast<void* (*)()>(library_.symbol(plan_.name + "_create"));
  destroy_ = reinterpret_cast<void (*)(void*)>(library_.symbol(plan_.name + "_destroy"));
  run_ = library_.symbol(plan_.name + "_run_args");
  for (const PlanStep& s : plan_.steps)
    kernels_.push_back(reinterpret_cast<int32_t (*)(void* const*)>(library_.symbol(s.symbol)));
  ctx_ = create();
  if (!ctx_) throw Error(ErrorKind::kIo, "the model's create failed (out of memory)");
}

ModelRunner::~ModelRunner() {
  if (ctx_) destroy_(ctx_);
  std::free(arena_);
  std::free(weights_);
}

void ModelRunner::run(const std::vector<const void*>& inputs, const std::vector<float*>& outputs) {
  if (inputs.size() != plan_.inputs.size() || outputs.size() != plan_.outputs.size())
    throw Error(ErrorKind::kInvalidArgument,
                "the model takes " + std::to_string(plan_.inputs.size()) + " inputs and " +
                    std::to_string(plan_.outputs.size()) + " outputs");
  std::vector<void*> buffers;
  for (const void* p : inputs) buffers.push_back(const_cast<void*>(p));
  for (float* p : outputs) buffers.push_back(p);
  const int32_t rc = reinterpret_cast<int32_t (*)(void*, void* const*)>(run_)(ctx_, buffers.data());
  if (rc != 0)
    throw Error(ErrorKind::kRun, plan_.name + "_run returned " + std::to_string(rc) +
                                     (rc == 2 ? " (a buffer is not 64-byte aligned)" : ""));
}

std::vector<void*> ModelRunner::step_buffers(size_t step, const std::vector<const void*>& inputs,
                                             const std::vector<float*>& outputs) {
  if (!arena_) {
    // Placed as the driver places its own (codegen::model_buffer_placement), so the layers are
    // timed on the memory layout a linked program runs on.
    arena_ = static_cast<float*>(codegen::allocate_model_buffer(plan_.arena_bytes));
    weights_ = static_cast<float*>(
        codegen::allocate_model_buffer(static_cast<int64_t>(plan_.weights.size())));
    std::memcpy(weights_, plan_.weights.data(), plan_.weights.size());
  }
  std::vector<void*> args;
  for (int64_t id : plan_.steps.at(step).args) {
    const int64_t offset = plan_.tensors[static_cast<size_t>(id)].offset;  // as driver_arg
    const PlanTensor* t = &plan_.tensors[static_cast<size_t>(id)];
    if (t->alias_of >= 0) t = &plan_.tensors[static_cast<size_t>(t->alias_of)];
    switch (t->storage) {
      case Storage::kArena:
        args.push_back(reinterpret_cast<char*>(arena_) + offset);
        break;
      case Storage::kWeights:
        args.push_back(reinterpret_cast<char*>(weights_) + offset);
        break;
      case Storage::kInput:
        args.push_back(const_cast<void*>(inputs.at(static_cast<size_t>(t->index))));
        break;
      case Storage::kOutput:
        args.push_back(outputs.at(static_cast<size_t>(t->index)));
        break;
    }
  }
  return args;
}

void ModelRunner::run_step(size_t step, const std::vector<void*>& args) {
  const ThreadCap cap(plan_.steps.at(step).max_threads);
  const int32_t rc = kernels_.at(step)(args.data());
  if (rc != 0)
    throw Error(ErrorKind::kRun, plan_.steps[step].symbol + " returned " + std::to_string(rc));
}

std::vector<double> ModelRunner::run_layers(const std::vector<const void*>& inputs,
                                            const std::vector<float*>& outputs) {
  std::vector<double> seconds;
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const std::vector<void*> args = step_buffers(i, inputs, outputs);
    const auto start = std::chrono::steady_clock::now();
    run_step(i, args);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return seconds;
}

}  // namespace ktune::deploy
