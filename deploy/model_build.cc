// build_model(), the model library's files, and ModelRunner.
#include "deploy/model_build.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "codegen/archive.h"
#include "codegen/codegen_llvm.h"
#include "codegen/model_driver.h"
#include "codegen/target.h"
#include "deploy/kernel_header.h"
#include "support/error.h"

namespace ktune::deploy {
namespace {

codegen::DriverArg driver_arg(const ModelPlan& plan, int64_t id) {
  const PlanTensor* t = &plan.tensors[static_cast<size_t>(id)];
  if (t->alias_of >= 0) t = &plan.tensors[static_cast<size_t>(t->alias_of)];
  switch (t->storage) {
    case Storage::kArena:
      return {codegen::DriverArg::Base::kArena, t->offset};
    case Storage::kWeights:
      return {codegen::DriverArg::Base::kWeights, t->offset};
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
      return "tuned";
    case ConfigChoice::Source::kNearest:
      return "nearest";
    case ConfigChoice::Source::kFallback:
      return "fallback";
  }
  return "";
}

// A buffer aligned as the kernel ABI wants.
float* aligned_floats(int64_t bytes) {
  void* p =
      std::aligned_alloc(64, static_cast<size_t>((std::max<int64_t>(bytes, 64) + 63) / 64 * 64));
  if (!p)
    throw Error(ErrorKind::kIo,
                "out of memory for a model arena of " + std::to_string(bytes) + " bytes");
  return static_cast<float*>(p);
}

}  // namespace

BuiltModel build_model(ModelPlan plan, const std::string& target, bool embed_weights) {
  const codegen::Target t = codegen::Target::parse(target);
  std::vector<te::LoweredFunc> funcs;
  for (const PlanStep& s : plan.steps) funcs.push_back(s.func);
  BuiltModel m;
  m.kernels = codegen::build_all(funcs, t);
  codegen::DriverSpec spec;
  spec.name = plan.name;
  spec.num_inputs = static_cast<int>(plan.inputs.size());
  spec.num_outputs = static_cast<int>(plan.outputs.size());
  spec.arena_bytes = plan.arena_bytes;
  spec.weights = plan.weights;
  spec.embed_weights = embed_weights;
  for (const PlanStep& s : plan.steps) {
    codegen::DriverCall call{s.symbol, {}};
    for (int64_t id : s.args) call.args.push_back(driver_arg(plan, id));
    spec.calls.push_back(std::move(call));
  }
  m.driver = codegen::build_model_driver(spec, t);
  m.plan = std::move(plan);
  m.embed_weights = embed_weights;
  return m;
}

BuiltModel build_model(const ModelRequest& r) {
  if (!is_c_identifier(r.name))
    throw Error(ErrorKind::kInvalidArgument, "model name '" + r.name + "' is not a C identifier");
  const frontend::Graph graph = frontend::load_onnx(r.model_path, r.inputs);
  const auto constants = frontend::load_constant_values(r.model_path);
  PlanOptions plan = r.plan;
  // Over a server with a device key, "host" means the key's devices' target.
  if (plan.history.is_server())
    plan.target =
        device_key_target(plan.history.server_options(), plan.history.device_key(), plan.target);
  return build_model(plan_model(graph, constants, r.name, plan), plan.target, r.embed_weights);
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
    << " * other ktune-built library's runtime). Buffers are float32, NCHW, 64-byte aligned\n"
    << " * (aligned_alloc(64, ...)). Contexts are independent: threads may each run their own. */\n"
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
      h << "/* " << kind << " " << i << ": \"" << t.name << "\", float32 " << dims(t.shape)
        << " */\n";
      h << "#define " << p.name << "_" << kind << i << "_ELEMENTS " << n << "\n";
      h << "static const int64_t " << p.name << "_" << kind << i << "_shape[" << t.shape.size()
        << "] = {";
      for (size_t d = 0; d < t.shape.size(); ++d) h << (d ? ", " : "") << t.shape[d];
      h << "};\n";
      params +=
          std::string(", ") + (input ? "const float* " : "float* ") + kind + std::to_string(i);
    }
  };
  io("INPUT", p.inputs, true);
  io("OUTPUT", p.outputs, false);
  h << "\n/* A context with its own arena; NULL when out of memory";
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
    << "int ktune_set_num_threads(int n);\n\n";
  h << "/* Layers (" << p.steps.size() << " kernels):\n";
  for (const PlanStep& s : p.steps) {
    h << " *   " << s.symbol << ": " << s.layer;
    if (s.task) h << " = " << s.task->workload_key() << " [" << source_name(s) << "]";
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

void ModelRunner::run(const std::vector<const float*>& inputs, const std::vector<float*>& outputs) {
  if (inputs.size() != plan_.inputs.size() || outputs.size() != plan_.outputs.size())
    throw Error(ErrorKind::kInvalidArgument,
                "the model takes " + std::to_string(plan_.inputs.size()) + " inputs and " +
                    std::to_string(plan_.outputs.size()) + " outputs");
  std::vector<void*> buffers;
  for (const float* p : inputs) buffers.push_back(const_cast<float*>(p));
  for (float* p : outputs) buffers.push_back(p);
  const int32_t rc = reinterpret_cast<int32_t (*)(void*, void* const*)>(run_)(ctx_, buffers.data());
  if (rc != 0)
    throw Error(ErrorKind::kRun, plan_.name + "_run returned " + std::to_string(rc) +
                                     (rc == 2 ? " (a buffer is not 64-byte aligned)" : ""));
}

std::vector<void*> ModelRunner::step_buffers(size_t step, const std::vector<const float*>& inputs,
                                             const std::vector<float*>& outputs) {
  if (!arena_) {
    arena_ = aligned_floats(plan_.arena_bytes);
    weights_ = aligned_floats(static_cast<int64_t>(plan_.weights.size()));
    std::memcpy(weights_, plan_.weights.data(), plan_.weights.size());
  }
  std::vector<void*> args;
  for (int64_t id : plan_.steps.at(step).args) {
    const PlanTensor* t = &plan_.tensors[static_cast<size_t>(id)];
    if (t->alias_of >= 0) t = &plan_.tensors[static_cast<size_t>(t->alias_of)];
    switch (t->storage) {
      case Storage::kArena:
        args.push_back(reinterpret_cast<char*>(arena_) + t->offset);
        break;
      case Storage::kWeights:
        args.push_back(reinterpret_cast<char*>(weights_) + t->offset);
        break;
      case Storage::kInput:
        args.push_back(const_cast<float*>(inputs.at(static_cast<size_t>(t->index))));
        break;
      case Storage::kOutput:
        args.push_back(outputs.at(static_cast<size_t>(t->index)));
        break;
    }
  }
  return args;
}

void ModelRunner::run_step(size_t step, const std::vector<void*>& args) {
  const int32_t rc = kernels_.at(step)(args.data());
  if (rc != 0)
    throw Error(ErrorKind::kRun, plan_.steps[step].symbol + " returned " + std::to_string(rc));
}

std::vector<double> ModelRunner::run_layers(const std::vector<const float*>& inputs,
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
