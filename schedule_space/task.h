// Defines Task: a template with its arguments on a target — workload key, FLOP count, config space,
// instantiation.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "schedule_space/config.h"
#include "schedule_space/config_space.h"
#include "schedule_space/template_registry.h"
#include "schedule_space/workload.h"

namespace ktune::schedule_space {

// Immutable after create(); cheap to copy (shares the space); safe to use from several threads.
class Task {
 public:
  // Looks the template up in TemplateRegistry::global(), validates the arguments (defaults fill
  // the omitted ones), defines the space and picks the fallback config.
  // Throws Error(kInvalidArgument): unknown template or argument, bad size, empty space.
  static Task create(const std::string& template_name,
                     const std::map<std::string, std::string>& args, const TargetTraits& target);

  const std::string& template_name() const { return def_->name; }
  // "matmul(M=1024,N=1024,K=1024,dtype=float32)": every argument in declared order. Does not
  // include the target (records key on both).
  const std::string& workload_key() const { return key_; }
  nlohmann::json args_json() const { return args_.to_json(); }
  const WorkloadArgs& args() const { return args_; }
  const TargetTraits& target() const { return target_; }
  const TemplateDef& template_def() const { return *def_; }
  // Floating-point operations of one run (multiply-add = 2).
  double flop() const { return flop_; }
  const ConfigSpace& space() const { return *space_; }
  // A copy of this task whose space also obeys `predicate` (e.g. only the configs of a recorded
  // landscape, which is what bench/tuner_replay searches). The fallback config is kept even if
  // the predicate rejects it.
  Task with_constraint(std::string name, std::function<bool(const EntityView&)> predicate) const;

  // The scheduled program of `config`. Works for a config read from JSON (its entities are
  // enough). Throws Error(kInstantiation): a config of another template, a missing knob or one of
  // another kind, a constraint it violates, or values the template or te cannot realise.
  Instantiated instantiate(const Config& config) const;
  // The compute under a plain, untiled schedule: the correctness reference.
  Instantiated reference() const;
  // A reasonable config when nothing was tuned (the template's choice).
  const Config& fallback_config() const { return fallback_; }

 private:
  Task() = default;
  std::shared_ptr<const TemplateDef> def_;
  WorkloadArgs args_;
  TargetTraits target_;
  std::shared_ptr<const ConfigSpace> space_;
  std::string key_;
  double flop_ = 0;
  Config fallback_;
};

}  // namespace ktune::schedule_space
