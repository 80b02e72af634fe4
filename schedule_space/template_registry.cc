// The template registry: registration, look-up and key=value argument parsing.
#include "schedule_space/template_registry.h"

#include "support/error.h"

namespace ktune::schedule_space {

TemplateRegistry& TemplateRegistry::global() {
  static TemplateRegistry* registry = [] {
    auto* r = new TemplateRegistry();  // never destroyed: templates may be used during exit
    register_builtin_templates(*r);
    return r;
  }();
  return *registry;
}

void TemplateRegistry::add(TemplateDef def) {
  if (def.name.empty()) throw Error(ErrorKind::kInvalidArgument, "template needs a name");
  if (!def.compute || !def.flop || !def.define || !def.apply)
    throw Error(ErrorKind::kInvalidArgument,
                "template '" + def.name + "' lacks compute, flop, define or apply");
  std::lock_guard lock(mutex_);
  if (templates_.count(def.name))
    throw Error(ErrorKind::kInvalidArgument, "template '" + def.name + "' is already registered");
  const std::string name = def.name;
  templates_.emplace(name, std::make_shared<const TemplateDef>(std::move(def)));
}

std::shared_ptr<const TemplateDef> TemplateRegistry::get(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = templates_.find(name);
  if (it != templates_.end()) return it->second;
  std::string names;
  for (const auto& [n, _] : templates_) names += (names.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::kInvalidArgument,
              "unknown template '" + name + "' (templates: " + names + ")");
}

bool TemplateRegistry::contains(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return templates_.count(name) > 0;
}

std::vector<std::shared_ptr<const TemplateDef>> TemplateRegistry::list() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const TemplateDef>> out;
  for (const auto& [_, t] : templates_) out.push_back(t);
  return out;
}

void register_template(TemplateDef def) { TemplateRegistry::global().add(std::move(def)); }

std::map<std::string, std::string> parse_workload_args(const std::string& template_name,
                                                       const std::vector<std::string>& words) {
  const auto def = TemplateRegistry::global().get(template_name);
  WorkloadArgs args(template_name, def->args, split_key_values(words));
  if (def->resolve) def->resolve(args);
  if (def->check) def->check(args);
  return args.to_map();
}

}  // namespace ktune::schedule_space
