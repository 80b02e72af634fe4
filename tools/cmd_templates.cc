// `ktune templates`: the registered schedule templates with their arguments and defaults.
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "schedule_space/template_registry.h"
#include "tools/commands.h"

namespace ktune::tools {
namespace {

void add_templates(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("templates", "List the schedule templates, their arguments and defaults");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([json] {
    const auto templates = schedule_space::TemplateRegistry::global().list();
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& t : templates) {
        nlohmann::json args = nlohmann::json::array();
        for (const auto& a : t->args) {
          nlohmann::json j = {
              {"name", a.name},
              {"type", a.type == schedule_space::ArgSpec::Type::kInt ? "int" : "string"},
              {"doc", a.doc}};
          if (a.default_value.empty())
            j["required"] = true;
          else
            j["default"] = a.default_value;
          if (!a.choices.empty()) j["choices"] = a.choices;
          args.push_back(j);
        }
        out.push_back({{"name", t->name}, {"doc", t->doc}, {"args", args}});
      }
      std::cout << out.dump(2) << "\n";
      return;
    }
    for (const auto& t : templates) {
      std::cout << t->name << "  " << t->doc << "\n";
      for (const auto& a : t->args) {
        std::cout << "    " << a.name
                  << (a.default_value.empty() ? " (required)" : "=" + a.default_value);
        if (!a.choices.empty()) {
          std::cout << " {";
          for (size_t i = 0; i < a.choices.size(); ++i) std::cout << (i ? "|" : "") << a.choices[i];
          std::cout << "}";
        }
        std::cout << "  " << a.doc << "\n";
      }
    }
  });
}

}  // namespace

KTUNE_REGISTER_COMMAND(templates, add_templates);

}  // namespace ktune::tools
