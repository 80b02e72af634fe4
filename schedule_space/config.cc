// Config: entity look-up by name and the JSON round-trip.
#include "schedule_space/config.h"

#include "support/json_input.h"

#include "support/error.h"

namespace ktune::schedule_space {

Config::Config(std::string template_name, uint64_t index, std::vector<Entity> entities)
    : template_name_(std::move(template_name)), index_(index), entities_(std::move(entities)) {}

const Entity* Config::find(std::string_view name) const {
  for (const auto& e : entities_)
    if (e.name == name) return &e;
  return nullptr;
}

const Entity& Config::operator[](std::string_view name) const {
  if (const Entity* e = find(name)) return *e;
  throw Error(ErrorKind::kInstantiation,
              "config has no knob '" + std::string(name) + "'" +
                  (template_name_.empty() ? "" : " (template " + template_name_ + ")"));
}

nlohmann::json Config::to_json() const {
  nlohmann::json entity = nlohmann::json::array();
  for (const auto& e : entities_) entity.push_back(e.to_json());
  nlohmann::json j = nlohmann::json::object();
  j["index"] = index_;
  if (!template_name_.empty()) j["template"] = template_name_;
  j["entity"] = std::move(entity);
  return j;
}

std::string Config::to_json_string() const { return to_json().dump(); }

Config Config::from_json(const nlohmann::json& j) {
  if (!j.is_object())
    throw Error(ErrorKind::kInvalidArgument, "config must be a JSON object, got " + j.dump());
  if (!j.contains("index") || !j["index"].is_number_integer() || j["index"].get<int64_t>() < 0)
    throw Error(ErrorKind::kInvalidArgument, "config needs a non-negative integer \"index\"");
  if (!j.contains("entity") || !j["entity"].is_array())
    throw Error(ErrorKind::kInvalidArgument, "config needs an \"entity\" list");
  std::string template_name;
  if (j.contains("template")) {
    if (!j["template"].is_string())
      throw Error(ErrorKind::kInvalidArgument, "config \"template\" must be a string");
    template_name = j["template"].get<std::string>();
  }
  std::vector<Entity> entities;
  for (const auto& e : j["entity"]) {
    entities.push_back(Entity::from_json(e));
    for (size_t i = 0; i + 1 < entities.size(); ++i)
      if (entities[i].name == entities.back().name)
        throw Error(ErrorKind::kInvalidArgument,
                    "config names knob '" + entities.back().name + "' twice");
  }
  return Config(std::move(template_name), j["index"].get<uint64_t>(), std::move(entities));
}

Config Config::from_json_string(const std::string& text) {
  return from_json(parse_json_input(text, "config"));
}

}  // namespace ktune::schedule_space
