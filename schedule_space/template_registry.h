// Defines schedule templates (compute + knobs + schedule from a config) and the open registry that
// holds them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "schedule_space/config.h"
#include "schedule_space/config_space.h"
#include "schedule_space/workload.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::schedule_space {

// A scheduled program: lower(schedule, args, name) gives the kernel. args are the kernel's
// arguments in ABI order: the inputs, then the outputs.
struct Instantiated {
  te::Schedule schedule;
  std::vector<te::Tensor> args;
};

// The compute definition of a workload (no schedule): what the reference and every config
// compute. args = inputs then outputs, in kernel ABI order.
struct ComputeDef {
  std::vector<te::Tensor> args;
  std::vector<te::Tensor> outputs;
};

// A schedule template. `define` declares the knobs (and constraints) of a workload on a target;
// `apply` builds the scheduled program of one config from its entities alone (so a config
// read from a log works without the space) and throws Error(kInstantiation) for a config it
// cannot realise. All functions must be pure and thread-safe.
struct TemplateDef {
  std::string name;
  std::string doc;            // one line for `ktune templates`
  std::vector<ArgSpec> args;  // declared order = key order
  std::function<ComputeDef(const WorkloadArgs&)> compute;
  std::function<double(const WorkloadArgs&)> flop;
  std::function<void(const WorkloadArgs&, const TargetTraits&, ConfigSpace&)> define;
  std::function<Instantiated(const WorkloadArgs&, const TargetTraits&, const Config&)> apply;
  // Optional: the config used when nothing was tuned. Default: the first valid config in the
  // sampling order of seed 0.
  std::function<Config(const WorkloadArgs&, const TargetTraits&, const ConfigSpace&)> fallback =
      nullptr;
  // Optional: replaces argument values that stand for "choose from the others" (a block size of
  // 0 chosen from a channel count) by the chosen value, so that the workload key names what the
  // kernel does. Runs before check; throws Error(kInvalidArgument).
  std::function<void(WorkloadArgs&)> resolve = nullptr;
  // Optional: extra checks of the arguments (e.g. a kernel bigger than the padded input);
  // throws Error(kInvalidArgument).
  std::function<void(const WorkloadArgs&)> check = nullptr;
  // How far above its device's fp32 FMA peak the flop this template counts may run: 1 for
  // direct arithmetic; more where one instruction does several fp32 FMAs' counted work (bf16 and
  // int8 dot products) or the algorithm computes fewer products than it counts (Winograd). A
  // tuning server refuses a device's result above its calibrated peak times this.
  double peak_multiple = 1;
};

// The templates by name. global() holds the built-in templates; tests and other modules may
// register more (add). Thread-safe: a mutex guards the map; definitions are immutable once added.
class TemplateRegistry {
 public:
  // The process-wide registry, with the built-in templates registered on first use.
  static TemplateRegistry& global();

  // Adds a template; throws Error(kInvalidArgument) when the name is taken or a required
  // function (compute, flop, define, apply) is missing.
  void add(TemplateDef def);
  // The template `name`; throws Error(kInvalidArgument) naming the known templates.
  std::shared_ptr<const TemplateDef> get(const std::string& name) const;
  bool contains(const std::string& name) const;
  // Every template, sorted by name.
  std::vector<std::shared_ptr<const TemplateDef>> list() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const TemplateDef>> templates_;
};

// Registers `def` in the global registry (see TemplateRegistry::add).
void register_template(TemplateDef def);

// Parses `key=value` words for template `template_name` into canonical arguments (every
// argument, defaults filled in). Throws Error(kInvalidArgument): unknown template or argument,
// malformed word, bad value.
std::map<std::string, std::string> parse_workload_args(const std::string& template_name,
                                                       const std::vector<std::string>& words);

// Registers the built-in templates into `registry` (called once by global()).
void register_builtin_templates(TemplateRegistry& registry);

}  // namespace ktune::schedule_space
