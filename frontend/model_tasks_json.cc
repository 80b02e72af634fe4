// ModelTasks as JSON (`ktune tasks --json`, a tuning server's model jobs) and back.
#include <cmath>

#include "frontend/task_extractor.h"
#include "support/error.h"

namespace ktune::frontend {

nlohmann::json to_json(const ModelTasks& m) {
  nlohmann::json j;
  j["model"] = m.model;
  j["total_gflop"] = m.total_flop() / 1e9;
  j["tasks"] = nlohmann::json::array();
  for (size_t i = 0; i < m.tasks.size(); ++i) {
    const ModelTask& t = m.tasks[i];
    nlohmann::json tj = {{"template", t.template_name},
                         {"key", t.key()},
                         {"epilogue", t.epilogue},
                         {"count", t.count},
                         {"flop", t.flop},
                         {"gflop_total", t.flop * static_cast<double>(t.count) / 1e9},
                         {"layers", t.layers},
                         {"status", to_string(t.status)}};
    tj["args"] = t.args;
    if (!t.alternative_of) tj["occurrences"] = m.layers_of(i);
    if (!t.note.empty()) tj["note"] = t.note;
    if (t.status != TaskStatus::kOk) tj["refused"] = t.refused;
    if (!t.substitute.empty()) tj["substitute"] = t.substitute;
    if (t.tunable) tj["tuned_as"] = t.tunable->workload_key();
    if (!t.built_generated.empty()) tj["built_generated"] = t.built_generated;
    if (t.alternative_of) tj["alternative_of"] = *t.alternative_of;
    j["tasks"].push_back(std::move(tj));
  }
  j["unsupported"] = nlohmann::json::array();
  for (const auto& u : m.unsupported) {
    nlohmann::json uj = {
        {"op", u.op}, {"count", u.count}, {"reason", u.reason}, {"layers", u.layers}};
    if (!u.generated.empty()) uj["generated"] = u.generated;
    j["unsupported"].push_back(std::move(uj));
  }
  return j;
}

ModelTasks tasks_from_json(const nlohmann::json& j, const schedule_space::TargetTraits& target) {
  // A count from a peer: nlohmann would cast a float (1e30) to an integer, which is undefined.
  auto count_of = [](const nlohmann::json& v) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > 1'000'000'000))
      throw Error(ErrorKind::kInvalidArgument,
                  "model tasks: a count must be an integer up to 10^9");
    return v.get<int64_t>();
  };
  try {
    if (!j.is_object() || !j.at("tasks").is_array())
      throw Error(ErrorKind::kInvalidArgument, "model tasks: not an object with a task list");
    ModelTasks m;
    m.model = j.at("model").get<std::string>();
    for (const auto& tj : j.at("tasks")) {
      ModelTask t;
      t.template_name = tj.at("template").get<std::string>();
      t.args = tj.at("args").get<Args>();
      t.epilogue = tj.value("epilogue", "");
      t.count = count_of(tj.at("count"));
      t.flop = tj.at("flop").get<double>();
      t.layers = tj.value("layers", std::vector<std::string>{});
      t.occurrence_layers = tj.value("occurrences", std::vector<std::string>{});
      if (!t.occurrence_layers.empty() &&
          t.occurrence_layers.size() != static_cast<size_t>(t.count))
        throw Error(ErrorKind::kInvalidArgument, "model tasks: task " + t.key() + " lists " +
                                                     std::to_string(t.occurrence_layers.size()) +
                                                     " occurrences for a count of " +
                                                     std::to_string(t.count));
      t.note = tj.value("note", "");
      t.substitute = tj.value("substitute", "");
      if (t.count < 1 || !std::isfinite(t.flop) || t.flop < 0)
        throw Error(ErrorKind::kInvalidArgument,
                    "model tasks: task " + t.key() + " has a bad count or flop");
      if (tj.contains("alternative_of")) {
        const int64_t of = count_of(tj["alternative_of"]);
        if (of < 0 || static_cast<size_t>(of) >= m.tasks.size() ||
            m.tasks[static_cast<size_t>(of)].alternative_of)
          throw Error(ErrorKind::kInvalidArgument,
                      "model tasks: task " + t.key() + " is an alternative of no earlier task");
        t.alternative_of = static_cast<size_t>(of);
      }
      resolve(t, target);
      // The client planned the model: what its build runs generated stays untuned here.
      if (const std::string why = tj.value("built_generated", ""); !why.empty())
        t.mark_built_generated(why);
      m.tasks.push_back(std::move(t));
    }
    for (const auto& u : j.value("unsupported", nlohmann::json::array()))
      m.unsupported.push_back({u.at("op").get<std::string>(), count_of(u.at("count")),
                               u.value("reason", ""), u.value("layers", std::vector<std::string>{}),
                               u.value("generated", "")});
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument, std::string("model tasks: ") + e.what());
  }
}

}  // namespace ktune::frontend
