// Defines Config, one point of a config space: its index and the entity of every knob, with a
// stable JSON form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "schedule_space/knob.h"

namespace ktune::schedule_space {

// A config is self-contained: its entities are enough to rebuild the schedule, so a config read
// from a log works without the space it came from. Value type; thread-compatible.
class Config {
 public:
  Config() = default;
  Config(std::string template_name, uint64_t index, std::vector<Entity> entities);

  uint64_t index() const { return index_; }
  const std::vector<Entity>& entities() const { return entities_; }
  // Name of the template the config belongs to ("" when unknown, e.g. a hand-written config).
  const std::string& template_name() const { return template_name_; }

  // The entity of knob `name`; throws Error(kInstantiation) when the config has no such knob.
  const Entity& operator[](std::string_view name) const;
  // Pointer to the entity of knob `name`, or nullptr.
  const Entity* find(std::string_view name) const;

  // {"index": N, "template": "matmul", "entity": [[name, kind, value], ...]} (AutoTVM's layout,
  // plus the template name). Keys and entity order are stable.
  nlohmann::json to_json() const;
  // Compact one-line form of to_json().
  std::string to_json_string() const;
  // Inverse of to_json; "template" is optional. Throws Error(kInvalidArgument) naming what is
  // wrong.
  static Config from_json(const nlohmann::json& j);
  // Parses text then from_json; throws Error(kInvalidArgument) for malformed JSON.
  static Config from_json_string(const std::string& text);

  bool operator==(const Config&) const = default;

 private:
  std::string template_name_;
  uint64_t index_ = 0;
  std::vector<Entity> entities_;
};

}  // namespace ktune::schedule_space
