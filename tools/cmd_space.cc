// `ktune space <template> key=value...`: the knobs, constraints and size of a workload's config
// space.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/target.h"
#include "schedule_space/task.h"
#include "tools/commands.h"

namespace ktune::tools {
namespace {

struct SpaceOptions {
  std::string template_name;
  std::vector<std::string> args;
  std::string target = "host";
  bool json = false;
};

void run_space(const SpaceOptions& o) {
  const codegen::Target target = codegen::Target::parse(o.target);
  const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                         target.vector_bits(), target.cores());
  const auto task = schedule_space::Task::create(
      o.template_name, schedule_space::parse_workload_args(o.template_name, o.args), traits);
  const auto& space = task.space();
  if (o.json) {
    nlohmann::json knobs = nlohmann::json::array();
    for (size_t i = 0; i < space.num_knobs(); ++i) {
      const auto& k = space.knob(i);
      knobs.push_back({{"name", k.name()},
                       {"kind", std::string(schedule_space::to_string(k.kind()))},
                       {"size", k.size()},
                       {"description", k.describe()}});
    }
    nlohmann::json constraints = nlohmann::json::array();
    for (const auto& c : space.constraints()) constraints.push_back(c.name);
    std::cout << nlohmann::json{{"workload", task.workload_key()},
                                {"target", traits.key},
                                {"flop", task.flop()},
                                {"size", space.size()},
                                {"knobs", knobs},
                                {"constraints", constraints},
                                {"fallback", task.fallback_config().to_json()}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << "workload: " << task.workload_key() << "\n"
            << "target:   " << traits.key << "\n"
            << "flop:     " << task.flop() << "\n";
  std::cout << space.describe();
  std::cout << "fallback: " << task.fallback_config().to_json_string() << "\n";
}

void add_space(CLI::App& app) {
  auto o = std::make_shared<SpaceOptions>();
  auto* cmd =
      app.add_subcommand("space", "Print the knobs and the size of a workload's config space");
  cmd->add_option("template", o->template_name, "Template name (see `ktune templates`)")
      ->required();
  cmd->add_option("args", o->args,
                  "Workload arguments key=value (omitted ones take their defaults)");
  cmd->add_option("--target", o->target, "Target: host or 'llvm -mtriple=... -mcpu=...'");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_space(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(space, add_space);

}  // namespace ktune::tools
