// `ktune tasks model.onnx [--input name=DIMS] [--json] [--dump-graph]`: the tuning tasks of an
// ONNX model, the operators without a template, and whether a model build takes it.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/target.h"
#include "deploy/model_plan.h"
#include "frontend/graph_passes.h"
#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"
#include "support/error.h"
#include "tools/commands.h"

namespace ktune::tools {
namespace {

struct TasksOptions {
  std::string model;
  std::vector<std::string> inputs;
  std::string target = "host";
  bool json = false;
  bool dump_graph = false;
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// MFLOP to one decimal, or to 3 significant digits below a tenth (a pool of 256 flops).
std::string mflop(double flop) {
  const double v = flop / 1e6;
  if (v <= 0 || v >= 0.1) return fixed(v, 1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// What --input changed of a fixed shape, one line per input, under the model line: shape
// inference accepted the graph at the new shape, and the user sees it was not the model's own.
void print_replaced(const frontend::Graph& g) {
  for (const auto& [name, own] : g.replaced_inputs)
    std::printf("input %s: --input %s replaces the model's fixed shape %s\n", name.c_str(),
                frontend::shape_text(g.shape(name).value_or(std::vector<int64_t>{})).c_str(),
                frontend::shape_text(own).c_str());
  if (!g.replaced_inputs.empty()) std::printf("\n");
}

void print_table(const frontend::ModelTasks& m, const frontend::Graph& g) {
  size_t alternatives = 0;
  for (const auto& t : m.tasks) alternatives += t.alternative_of ? 1 : 0;
  const std::string other =
      alternatives ? " (" + std::to_string(alternatives) + " of them other algorithms)" : "";
  std::printf("model %s: %zu tasks%s, %.3f GFLOP per run\n\n", m.model.c_str(), m.tasks.size(),
              other.c_str(), m.total_flop() / 1e9);
  print_replaced(g);
  std::printf(
      "status: ok = the template takes the workload as listed; epilogue_unfused = it takes the "
      "shape, the\n"
      "epilogue is not fused yet; substitute = another template takes it; refused = none does "
      "today;\n"
      "generated = a model build runs a generated kernel instead (tune-model does not tune it)"
      "\n\n");
  std::printf("%3s  %5s  %9s  %-16s  %s\n", "#", "count", "MFLOP", "status", "workload");
  size_t i = 0;
  for (const auto& t : m.tasks) {
    const bool generated = !t.built_generated.empty();
    std::printf("%3zu  %5lld  %9s  %-16s  %s\n", ++i, static_cast<long long>(t.count),
                mflop(t.flop).c_str(),
                generated ? "generated" : frontend::to_string(t.status).c_str(), t.key().c_str());
    if (!t.note.empty()) std::printf("%40s  (%s)\n", "", t.note.c_str());
    // Today's templates and the task: the epilogue argument is pending (another branch), so an
    // unfused epilogue gets no further line; a substitute, a refusal or a generated kernel says
    // why.
    if (generated)
      std::printf("%40s  %s\n", "", t.built_generated.c_str());
    else if (t.status == frontend::TaskStatus::kSubstitute ||
             t.status == frontend::TaskStatus::kRefused)
      std::printf("%40s  refused: %s\n", "", t.refused.c_str());
    if (t.status == frontend::TaskStatus::kSubstitute)
      std::printf("%40s  tuned as %s\n", "", t.tunable->workload_key().c_str());
    if (t.alternative_of)
      std::printf("%40s  another algorithm for #%zu: a model build runs the faster measured\n", "",
                  *t.alternative_of + 1);
  }
  if (!m.unsupported.empty()) {
    std::printf(
        "\noperators no tuning task covers (count, reason, what a model build computes them "
        "with):\n");
    for (const auto& u : m.unsupported)
      std::printf("  %-20s x%-4lld %-40s %s\n", u.op.c_str(), static_cast<long long>(u.count),
                  u.reason.c_str(),
                  u.generated.empty() ? "unsupported" : ("generated " + u.generated).c_str());
  }
}

// The nodes a model build computes: all but the blocked ones and those they absorb.
size_t covered_nodes(size_t nodes, const std::vector<deploy::BlockedNode>& blocked) {
  for (const auto& b : blocked) nodes -= std::min(b.nodes, nodes);
  return nodes;
}

// The verdict: how many nodes a model build computes, and every node it cannot.
void print_verdict(size_t nodes, const std::vector<deploy::BlockedNode>& blocked) {
  // "Covered" is a build path, not a tuning task: the table above says which nodes tasks take.
  std::printf(
      "\ncovered %zu of %zu nodes (a model build computes them: in a tuned task, a "
      "generated kernel or a view)\n",
      covered_nodes(nodes, blocked), nodes);
  if (blocked.empty()) {
    std::printf("verdict: buildable\n");
    return;
  }
  std::printf("verdict: not buildable, %zu %s no path in a model build:\n", blocked.size(),
              blocked.size() == 1 ? "node has" : "nodes have");
  for (const auto& b : blocked)
    std::printf("  %s (%s): %s\n", b.node.c_str(), b.op.c_str(), b.reason.c_str());
}

void run_tasks(const TasksOptions& o) {
  std::vector<frontend::InputShape> inputs;
  for (const auto& text : o.inputs) inputs.push_back(frontend::parse_input_shape(text));
  const codegen::Target target = codegen::Target::parse(o.target);
  const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                         target.vector_bits(), target.cores());
  frontend::PassObserver dump;
  if (o.dump_graph)
    dump = [](const std::string& pass, const frontend::Model& m) {
      std::fprintf(stderr, "graph after %s: %s", pass.c_str(), frontend::graph_text(m).c_str());
    };
  const frontend::Model model = frontend::load_model(o.model, inputs, dump);
  frontend::ModelTasks tasks = frontend::extract_tasks(model.graph, traits);
  const std::vector<deploy::BlockedNode> blocked =
      deploy::plan_verdict(model.graph, model.constants, target.str());
  // The tasks a build runs generated are listed so, as tune-model (which does not tune them) does.
  if (blocked.empty())
    deploy::untune_generated_tasks(tasks, model.graph, model.constants, target.str());
  const size_t nodes = model.graph.nodes.size();
  if (o.json) {
    nlohmann::json j = frontend::to_json(tasks);
    j["nodes"] = nodes;
    j["covered"] = covered_nodes(nodes, blocked);
    j["buildable"] = blocked.empty();
    j["replaced_inputs"] = nlohmann::json::array();
    for (const auto& [name, own] : model.graph.replaced_inputs)
      j["replaced_inputs"].push_back(
          {{"input", name}, {"model", own}, {"given", model.graph.shape(name).value_or(own)}});
    j["blocking"] = nlohmann::json::array();
    for (const auto& b : blocked)
      j["blocking"].push_back({{"node", b.node}, {"op", b.op}, {"reason", b.reason}});
    std::cout << j.dump(2) << "\n";
  } else {
    print_table(tasks, model.graph);
    print_verdict(nodes, blocked);
  }
  // A model that cannot be built is a failed check, for a script as for a user.
  if (!blocked.empty())
    throw Error(ErrorKind::kUnsupported, o.model +
                                             " cannot be built: " + std::to_string(blocked.size()) +
                                             (blocked.size() == 1 ? " node has" : " nodes have") +
                                             " no path in a model build (listed above)");
}

void add_tasks(CLI::App& app) {
  auto o = std::make_shared<TasksOptions>();
  auto* cmd = app.add_subcommand(
      "tasks",
      "List the tuning tasks of an ONNX model (shapes inferred, epilogues fused) and whether a "
      "model build takes it (exit status 1 when not)");
  cmd->add_option("model", o->model, "ONNX model file")->required();
  cmd->add_option(
      "--input", o->inputs,
      "Shape of a graph input, name=1x3x224x224 (fills symbolic dimensions, overrides fixed ones)");
  cmd->add_option("--target", o->target, "Target: host or 'llvm -mtriple=... -mcpu=...'")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--dump-graph", o->dump_graph,
                "Print the graph to stderr after reading and after each clean-up pass");
  cmd->callback([o] { run_tasks(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(tasks, add_tasks);

}  // namespace ktune::tools
