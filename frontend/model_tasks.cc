// Task extraction: walks a Graph, hands each anchor to its family's mapper (tasks_conv.cc,
// tasks_matmul.cc, tasks_pool.cc, tasks_quantized.cc), lists every other node with the generated
// kernel the operator table gives it, and merges identical workloads.
#include "frontend/model_tasks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <variant>

#include "frontend/operators.h"
#include "frontend/task_extractor.h"
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/epilogue.h"
#include "support/error.h"

namespace ktune::frontend {

TaskExtractor::TaskExtractor(const Graph& graph, const schedule_space::TargetTraits& target)
    : g_(graph),
      target_(target),
      fuser_(graph),
      layer_norms_(find_layer_norms(graph)),
      quantized_(find_quantized_ops(graph)),
      scaled_softmaxes_(find_scaled_softmaxes(graph)) {
  // An int8 operator's DequantizeLinear, Relu and QuantizeLinear nodes are its own.
  for (size_t k = 0; k < quantized_.ops.size(); ++k) {
    const QuantizedOp& q = quantized_.ops[k];
    quantized_at_[q.node] = k;
    for (size_t n : q.prologue) fuser_.exclude(n);
    for (size_t n : q.epilogue) fuser_.exclude(n);
  }
  // So are a uint8 Add's and a uint8 max pool's (generated kernels, listed at their operator).
  for (const QuantizedAdd& a : quantized_.adds) {
    generated_at_[a.node] = {g_.nodes[a.node].op == "QLinearAdd"
                                 ? "int8 add (QLinearAdd)"
                                 : "int8 add (DequantizeLinear pair, Add, QuantizeLinear)",
                             "quantized_add"};
    fuser_.exclude(a.node);
    for (size_t n : a.prologue) fuser_.exclude(n);
    for (size_t n : a.epilogue) fuser_.exclude(n);
  }
  for (const QuantizedMaxPool& p : quantized_.max_pools) {
    generated_at_[p.node] = {
        "uint8 max pool (between DequantizeLinear and QuantizeLinear of "
        "one scale)",
        "max_pool_u8"};
    for (size_t n : {p.node, p.dequantize, p.quantize}) fuser_.exclude(n);
  }
  for (const QuantizedGlobalAveragePool& p : quantized_.global_pools) {
    std::string how = g_.nodes[p.node].op == "QLinearGlobalAveragePool"
                          ? "uint8 global average pool (QLinearGlobalAveragePool)"
                          : "uint8 global average pool (between DequantizeLinear and "
                            "QuantizeLinear)";
    if (p.epilogue.size() == 2)  // a Flatten or Reshape before the QuantizeLinear
      how.insert(how.size() - 1, ", its " + g_.nodes[p.epilogue.front()].op + " a view");
    generated_at_[p.node] = {how, "global_average_pool_u8"};
    for (size_t n : p.prologue) fuser_.exclude(n);
    for (size_t n : p.epilogue) fuser_.exclude(n);
  }
  // A LayerNorm stays whole: no anchor takes its nodes into an epilogue.
  for (size_t k = 0; k < layer_norms_.size(); ++k)
    for (size_t n : layer_norms_[k].nodes) {
      in_layer_norm_[n] = k;
      fuser_.exclude(n);
    }
  // A Softmax of scaled scores scales them as it reads them: the Mul or Div is its own.
  std::erase_if(scaled_softmaxes_, [&](const ScaledSoftmax& m) {
    return fuser_.fused(m.scale_node) || fuser_.fused(m.softmax);
  });
  for (size_t k = 0; k < scaled_softmaxes_.size(); ++k) {
    scaled_softmax_at_[scaled_softmaxes_[k].softmax] = k;
    fuser_.exclude(scaled_softmaxes_[k].scale_node);
  }
}

Mapped TaskExtractor::map_anchor(size_t i) {
  const Node& n = g_.nodes[i];
  if (auto r = quantized_.refused.find(i); r != quantized_.refused.end())
    return NotMapped{"not int8: " + r->second};
  if (quantized_at_.count(i)) return map_quantized(i);
  const OperatorInfo* info = operator_info(n.op, n.domain);
  if (!info || info->family != OpFamily::kAnchor) return std::monostate{};
  // The task families by the operator table's name for them, each mapped in its own file.
  using Family = Mapped (*)(TaskExtractor&, size_t);
  static const std::map<std::string, Family> kFamilies = {
      {"conv", [](TaskExtractor& t, size_t node) { return t.map_conv(node); }},
      {"matmul", [](TaskExtractor& t, size_t node) { return t.map_gemm(node); }},
      {"pool", [](TaskExtractor& t, size_t node) { return t.map_pool(t.g_.nodes[node]); }},
  };
  return kFamilies.at(info->tasks)(*this, i);
}

ModelTasks TaskExtractor::run() {
  ModelTasks result;
  result.model = g_.name;
  std::map<std::string, size_t> task_index;
  std::map<std::string, size_t> unsupported_index;
  auto add_unsupported = [&](const std::string& op, const std::string& layer,
                             const std::string& reason, const std::string& generated) {
    const std::string key = op + "\n" + reason + "\n" + generated;
    auto [it, fresh] = unsupported_index.emplace(key, result.unsupported.size());
    if (fresh) result.unsupported.push_back({op, 0, reason, {}, generated});
    UnsupportedOp& u = result.unsupported[it->second];
    ++u.count;
    u.layers.push_back(layer);
  };
  // Every anchor first, in graph order: an epilogue may take a node the graph lists before its
  // anchor (the Resize of an upsampled residual), which then is no kernel of its own.
  std::map<size_t, Mapped> mapped_at;
  for (size_t i = 0; i < g_.nodes.size(); ++i)
    if (!in_layer_norm_.count(i) && !scaled_softmax_at_.count(i) && !generated_at_.count(i) &&
        !fuser_.fused(i))
      mapped_at.emplace(i, map_anchor(i));
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (auto ln = in_layer_norm_.find(i); ln != in_layer_norm_.end()) {
      const LayerNormGroup& group = layer_norms_[ln->second];
      if (group.nodes.front() != i) continue;
      std::string layer;
      for (size_t n : group.nodes) layer += (layer.empty() ? "" : "+") + g_.nodes[n].name;
      add_unsupported("LayerNorm", layer, "no template", "layer_norm");
      continue;
    }
    const Node& node = g_.nodes[i];
    if (auto sm = scaled_softmax_at_.find(i); sm != scaled_softmax_at_.end()) {
      const ScaledSoftmax& m = scaled_softmaxes_[sm->second];
      add_unsupported(node.op, g_.nodes[m.scale_node].name + "+" + node.name,
                      reason_without_template(node.op), generated_kernel(node, g_));
      continue;
    }
    if (auto gen = generated_at_.find(i); gen != generated_at_.end()) {
      add_unsupported(node.op, node.name, gen->second.first, gen->second.second);
      continue;
    }
    if (fuser_.fused(i)) continue;
    const Mapped mapped = std::move(mapped_at.at(i));
    if (std::holds_alternative<std::monostate>(mapped)) {
      add_unsupported(node.op, node.name, reason_without_template(node.op),
                      generated_kernel(node, g_));
      continue;
    }
    if (auto* nm = std::get_if<NotMapped>(&mapped)) {
      add_unsupported(node.op, nm->layer.empty() ? node.name : nm->layer, nm->reason,
                      nm->generated);
      continue;
    }
    Candidate c = std::get<Candidate>(mapped);
    ModelTask t = make_task(c);
    auto [it, fresh] = task_index.emplace(t.key(), result.tasks.size());
    if (fresh) {
      resolve(t, target_);
      result.tasks.push_back(std::move(t));
    }
    ModelTask& task = result.tasks[it->second];
    ++task.count;
    TaskOccurrence occ{it->second, i, c.epilogue.nodes, c.prologue, node.name, c.first_input};
    task.layers.push_back(node.name);
    for (size_t f : c.epilogue.nodes) {
      task.layers.push_back(g_.nodes[f].name);
      occ.layer += "+" + g_.nodes[f].name;
    }
    for (size_t p : c.prologue) {
      task.layers.push_back(g_.nodes[p].name);
      occ.layer += "+" + g_.nodes[p].name;
    }
    const std::vector<std::string> layers = task.layers;
    const size_t primary = it->second;
    result.occurrences.push_back(std::move(occ));
    for (Candidate& alt : c.alternatives) {
      alt.epilogue = c.epilogue;
      ModelTask a = make_task(alt);
      a.alternative_of = primary;
      auto [at, new_alt] = task_index.emplace(a.key(), result.tasks.size());
      if (new_alt) {
        resolve(a, target_);
        if (a.status != TaskStatus::kOk) {
          task_index.erase(at);  // optional: an algorithm no template takes is not listed
          continue;
        }
        result.tasks.push_back(std::move(a));
      }
      ModelTask& listed = result.tasks[at->second];
      ++listed.count;
      listed.layers = layers;
    }
  }
  result.layer_norms = layer_norms_;
  result.scaled_softmaxes = scaled_softmaxes_;
  std::erase_if(result.scaled_softmaxes,
                [&](const ScaledSoftmax& m) { return softmax_prologues_.count(m.softmax) > 0; });
  result.quantized = quantized_.ops;
  result.quantized_adds = quantized_.adds;
  result.quantized_max_pools = quantized_.max_pools;
  result.quantized_global_pools = quantized_.global_pools;
  result.generated_convs = generated_convs_;
  return result;
}

// The listed form: the arguments the model determines (shape, float32, the epilogue). The
// template's other arguments (e.g. conv2d_nchwc's blocking) keep their defaults, which are the
// template's to choose: the tuned workload's key (tunable) shows them.
ModelTask TaskExtractor::make_task(const Candidate& c) const {
  ModelTask t;
  t.template_name = c.template_name;
  t.args = c.args;
  // ONNX float tensors; the test models and the templates' default.
  if (!c.dtype.empty()) t.args["dtype"] = c.dtype;
  t.epilogue = c.epilogue.steps;
  if (!t.epilogue.empty()) t.args["epilogue"] = t.epilogue;
  for (const auto& [k, v] : c.epilogue.args) t.args[k] = v;
  if (c.epilogue.residual_upsample != 1)
    t.args["residual_upsample"] = std::to_string(c.epilogue.residual_upsample);
  t.flop = c.flop;
  t.note = c.note;
  t.substitute = c.substitute;
  return t;
}

// Sets status, refused and tunable by asking the templates (Task::create) for the listed form,
// then the bare operator, then the substitute template (with the epilogue, then without).
void ModelTask::mark_built_generated(const std::string& why) {
  built_generated = why;
  tunable.reset();
  status = TaskStatus::kRefused;
  refused = why;
}

namespace {

// A blocked template's args as its NCHW substitute takes them: without the channel blocks.
Args unblocked(Args args) {
  args.erase("ic_block");
  return args;
}

}  // namespace

void resolve(ModelTask& t, const schedule_space::TargetTraits& target) {
  t.refused.clear();
  t.tunable.reset();
  auto attempt = [&](const std::string& name,
                     const Args& args) -> std::optional<schedule_space::Task> {
    try {
      return schedule_space::Task::create(name, args, target);
    } catch (const Error& e) {
      // Every distinct reason: the epilogue argument and the shape may be refused separately.
      if (t.refused.find(e.what()) == std::string::npos)
        t.refused += (t.refused.empty() ? "" : "; ") + std::string(e.what());
      return std::nullopt;
    }
  };
  Args bare = t.args;
  bare.erase("epilogue");
  bare.erase("residual_upsample");
  for (const std::string& k : schedule_space::templates::activation_arg_names()) bare.erase(k);
  if ((t.tunable = attempt(t.template_name, t.args))) {
    t.status = TaskStatus::kOk;
  } else if (!t.epilogue.empty() && (t.tunable = attempt(t.template_name, bare))) {
    t.status = TaskStatus::kEpilogueUnfused;
  } else if (!t.substitute.empty() &&
             ((!t.epilogue.empty() && (t.tunable = attempt(t.substitute, unblocked(t.args)))) ||
              (t.tunable = attempt(t.substitute, unblocked(bare))))) {
    t.status = TaskStatus::kSubstitute;
  } else {
    t.status = TaskStatus::kRefused;
  }
}

std::string to_string(TaskStatus status) {
  switch (status) {
    case TaskStatus::kOk:
      return "ok";
    case TaskStatus::kEpilogueUnfused:
      return "epilogue_unfused";
    case TaskStatus::kSubstitute:
      return "substitute";
    case TaskStatus::kRefused:
      return "refused";
  }
  return "?";
}

std::string ModelTask::key() const {
  // The shape in the template's declared order (like WorkloadArgs::key), then any other
  // argument, then dtype and epilogue last: the same key whatever order a template declares them
  // in.
  std::string text = template_name + "(";
  const std::vector<std::string>& params = schedule_space::templates::activation_arg_names();
  std::set<std::string> done = {"dtype", "epilogue"};
  done.insert(params.begin(), params.end());
  bool first = true;
  auto add = [&](const std::string& k) {
    auto it = args.find(k);
    if (it == args.end()) return;
    text += (first ? "" : ",") + k + "=" + it->second;
    first = false;
    done.insert(k);
  };
  if (schedule_space::TemplateRegistry::global().contains(template_name))
    for (const auto& spec : schedule_space::TemplateRegistry::global().get(template_name)->args)
      if (!done.count(spec.name)) add(spec.name);
  for (const auto& [k, v] : args)
    if (!done.count(k)) add(k);
  add("dtype");
  add("epilogue");
  for (const std::string& k : params) add(k);
  return text + ")";
}

double ModelTasks::total_flop() const {
  double sum = 0;
  for (const auto& t : tasks)
    if (!t.alternative_of) sum += static_cast<double>(t.count) * t.flop;
  return sum;
}

std::vector<size_t> ModelTasks::alternatives_of(size_t task) const {
  std::vector<size_t> alts;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (tasks[i].alternative_of == task) alts.push_back(i);
  return alts;
}

std::vector<std::string> ModelTasks::layers_of(size_t task) const {
  if (task < tasks.size() && tasks[task].alternative_of) task = *tasks[task].alternative_of;
  std::vector<std::string> layers;
  for (const auto& occ : occurrences)
    if (occ.task == task) layers.push_back(occ.layer);
  if (occurrences.empty() && task < tasks.size()) return tasks[task].occurrence_layers;
  return layers;
}

ModelTasks extract_tasks(const Graph& graph, const schedule_space::TargetTraits& target) {
  return TaskExtractor(graph, target).run();
}

}  // namespace ktune::frontend
