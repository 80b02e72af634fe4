// `ktune lower <template> key=value... [--config JSON] [--asm]`: the lowered loop IR (or the
// target assembly) of one config.
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "te/ir_printer.h"
#include "te/lower.h"
#include "tools/commands.h"

namespace ktune::tools {
namespace {

constexpr int64_t kNoIndex = std::numeric_limits<int64_t>::min();

struct LowerCmdOptions {
  std::string template_name;
  std::vector<std::string> args;
  std::string target = "host";
  std::string config;        // JSON text, or @path
  int64_t index = kNoIndex;  // a config index of the space
  bool reference = false;    // the plain reference schedule
  bool json = false;
  bool assembly = false;  // the target assembly instead of the loop IR
};

void run_lower(const LowerCmdOptions& o) {
  const codegen::Target target = codegen::Target::parse(o.target);
  const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                         target.vector_bits(), target.cores());
  const auto task = schedule_space::Task::create(
      o.template_name, schedule_space::parse_workload_args(o.template_name, o.args), traits);
  schedule_space::Config config = task.fallback_config();
  if (!o.config.empty()) {
    std::string text = o.config;
    if (text[0] == '@') {
      std::ifstream in(text.substr(1));
      if (!in) throw Error(ErrorKind::kIo, "cannot read config file " + text.substr(1));
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    config = schedule_space::Config::from_json_string(text);
  } else if (o.index != kNoIndex) {
    if (o.index < 0)
      throw Error(ErrorKind::kInvalidArgument,
                  "--index must be >= 0, got " + std::to_string(o.index));
    config = task.space().get(static_cast<uint64_t>(o.index));
  }
  const schedule_space::Instantiated inst =
      o.reference ? task.reference() : task.instantiate(config);
  const te::LoweredFunc f = te::lower(inst.schedule, inst.args, o.template_name);
  if (o.assembly) {
    std::cout << codegen::emit_assembly(f, target);
    return;
  }
  if (o.json) {
    nlohmann::json j = {{"workload", task.workload_key()}, {"ir", te::to_string(f)}};
    if (!o.reference) j["config"] = config.to_json();
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "// " << task.workload_key() << "\n";
  std::cout << "// target " << traits.key << ": " << traits.vector_bits << "-bit vectors, "
            << traits.vector_registers() << " vector registers\n";
  if (!o.reference) std::cout << "// config " << config.to_json_string() << "\n";
  std::cout << te::to_string(f);
}

void add_lower(CLI::App& app) {
  auto o = std::make_shared<LowerCmdOptions>();
  auto* cmd = app.add_subcommand(
      "lower", "Print the lowered loop IR of a workload under a config (fallback by default)");
  cmd->add_option("template", o->template_name, "Template name (see `ktune templates`)")
      ->required();
  cmd->add_option("args", o->args, "Workload arguments key=value");
  cmd->add_option("--target", o->target, "Target: host or 'llvm -mtriple=... -mcpu=...'");
  auto* config = cmd->add_option("--config", o->config, "Config JSON, or @file");
  cmd->add_option("--index", o->index, "Config index in the space")->excludes(config);
  cmd->add_flag("--reference", o->reference, "Lower the plain reference schedule instead");
  auto* json = cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--asm", o->assembly, "Print the target assembly instead of the loop IR")
      ->excludes(json);
  cmd->callback([o] { run_lower(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(lower, add_lower);

}  // namespace ktune::tools
