// JobSpec's JSON form and validation.
#include "rpc_runner/protocol/job_types.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <type_traits>

#include "frontend/model_tasks.h"
#include "rpc_runner/protocol/peer_checks.h"
#include "schedule_space/task.h"
#include "schedule_space/template_registry.h"
#include "support/error.h"
#include "tuner/task_scheduler.h"

namespace ktune::rpc_runner {
namespace {

template <typename T>
T field(const nlohmann::json& j, const char* name, T fallback) {
  if (!j.contains(name)) return fallback;
  const nlohmann::json& v = j.at(name);
  // nlohmann converts with a plain cast: a float or an integer out of T's range would be
  // undefined behaviour (1e72 as an int) or a silently wrapped value. Integers must fit.
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const bool fits =
        v.is_number_unsigned()
            ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
            : v.is_number_integer() &&
                  v.get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                  (std::is_unsigned_v<T> ||
                   v.get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max()));
    if (!fits)
      throw Error(ErrorKind::kInvalidArgument, std::string("job spec: field '") + name +
                                                   "' must be an integer in the range of its type");
  }
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string("job spec: field '") + name + "' has the wrong type");
  }
}

// The one JSON form of MeasureOptions (the "measure" object of a job spec).
nlohmann::json measure_json(const tuner::MeasureOptions& m) {
  return {{"number", m.number},
          {"repeat", m.repeat},
          {"min_repeat_ms", m.min_repeat_ms},
          {"build_timeout_s", m.build_timeout_s},
          {"run_timeout_s", m.run_timeout_s},
          {"cooldown_s", m.cooldown_s},
          {"flush_cache", m.flush_cache},
          {"check_correctness", m.check_correctness},
          {"rtol", m.rtol},
          {"atol", m.atol},
          {"run_threads", m.run_threads},
          {"data_seed", m.data_seed}};
}

// The "measure" object of a job spec; a missing field keeps its default. Specs written before
// run_threads and data_seed moved into "measure" have them beside it: those are read too, so
// a server resumes the jobs its log holds from an earlier version.
tuner::MeasureOptions measure_from_json(const nlohmann::json& spec) {
  const nlohmann::json m = spec.contains("measure") ? spec.at("measure") : nlohmann::json::object();
  tuner::MeasureOptions o;
  o.number = field<int>(m, "number", o.number);
  o.repeat = field<int>(m, "repeat", o.repeat);
  o.min_repeat_ms = field<double>(m, "min_repeat_ms", o.min_repeat_ms);
  o.build_timeout_s = field<double>(m, "build_timeout_s", o.build_timeout_s);
  o.run_timeout_s = field<double>(m, "run_timeout_s", o.run_timeout_s);
  o.cooldown_s = field<double>(m, "cooldown_s", o.cooldown_s);
  o.flush_cache = field<bool>(m, "flush_cache", o.flush_cache);
  o.check_correctness = field<bool>(m, "check_correctness", o.check_correctness);
  o.rtol = field<double>(m, "rtol", o.rtol);
  o.atol = field<double>(m, "atol", o.atol);
  o.run_threads = field<int>(m, "run_threads", field<int>(spec, "run_threads", 0));
  o.data_seed = field<uint64_t>(m, "data_seed", field<uint64_t>(spec, "data_seed", 0));
  return o;
}

}  // namespace

nlohmann::json JobSpec::to_json() const {
  return {{"template", template_name},
          {"args", args},
          {"target", target},
          {"device_key", session.device_key},
          {"trials", session.trials},
          {"tuner", session.tuner},
          {"seed", session.seed},
          {"batch_size", session.batch_size},
          {"early_stopping", session.early_stopping},
          {"xgb_features", session.xgb_features},
          {"transfer", session.transfer},
          {"measure", measure_json(measure)},
          {"priority", priority},
          {"owner", owner},
          {"model", model},
          {"strategy", strategy}};
}

std::string JobSpec::label() const {
  if (is_model()) {
    const size_t n =
        model.contains("tasks") && model["tasks"].is_array() ? model["tasks"].size() : 0;
    const std::string name = model.contains("model") && model["model"].is_string()
                                 ? model["model"].get<std::string>()
                                 : "?";
    // The workloads tuned (a pool a build generates is a task, not tuned; a task's other
    // algorithms are workloads of their own), as tune-model counts them.
    std::set<std::string> tuned;
    if (n > 0)
      for (const nlohmann::json& t : model["tasks"])
        if (t.is_object() && t.contains("tuned_as") && t["tuned_as"].is_string())
          tuned.insert(t["tuned_as"].get<std::string>());
    std::string label = "model " + name + " (" + std::to_string(n) + " tasks";
    if (!tuned.empty())
      label +=
          ", " + std::to_string(tuned.size()) + " tuned workload" + (tuned.size() == 1 ? "" : "s");
    return label + ")";
  }
  try {
    return schedule_space::Task::create(template_name, args, schedule_space::TargetTraits{})
        .workload_key();
  } catch (const Error&) {
    return template_name;  // a template this build no longer has
  }
}

JobSpec JobSpec::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error(ErrorKind::kInvalidArgument, "job spec: not a JSON object");
  JobSpec s;
  s.template_name = field<std::string>(j, "template", "");
  s.args = field<std::map<std::string, std::string>>(j, "args", {});
  s.target = field<std::string>(j, "target", s.target);
  tuner::SessionOptions& o = s.session;
  o.device_key = field<std::string>(j, "device_key", "");
  o.trials = field<size_t>(j, "trials", o.trials);
  o.tuner = field<std::string>(j, "tuner", o.tuner);
  o.seed = field<uint64_t>(j, "seed", 0);
  o.batch_size = field<size_t>(j, "batch_size", o.batch_size);
  o.early_stopping = field<size_t>(j, "early_stopping", 0);
  o.xgb_features = field<std::string>(j, "xgb_features", o.xgb_features);
  o.transfer = field<bool>(j, "transfer", true);
  s.measure = measure_from_json(j);
  s.priority = field<int>(j, "priority", 1);
  s.owner = field<std::string>(j, "owner", "");
  s.model = j.contains("model") ? j.at("model") : nlohmann::json();
  s.strategy = field<std::string>(j, "strategy", s.strategy);
  return s;
}

namespace {

// Refuses `value` of field `what` past `max` bytes or with a control character (C0, DEL); the
// message names the field and where, not the value (which may be megabytes of escape codes).
void check_text(const std::string& what, const std::string& value, size_t max) {
  if (value.size() > max)
    throw Error(ErrorKind::kInvalidArgument, what + " is " + std::to_string(value.size()) +
                                                 " bytes long; at most " + std::to_string(max));
  if (const size_t i = first_control(value); i != std::string::npos)
    throw Error(ErrorKind::kInvalidArgument,
                what + " has a control character (byte " +
                    std::to_string(static_cast<unsigned char>(value[i])) + " at " +
                    std::to_string(i) + "): only printable text is taken");
}

// Every string in a model's task list (names of tasks and layers), and how many layer names.
void check_model_text(const nlohmann::json& j, size_t& strings) {
  if (j.is_string()) {
    check_text("a string of the model's tasks", j.get_ref<const std::string&>(), kMaxModelText);
    if (++strings > kMaxModelLayers)
      throw Error(ErrorKind::kInvalidArgument,
                  "the model's tasks hold more than " + std::to_string(kMaxModelLayers) + " names");
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      check_text("a key of the model's tasks", key, kMaxJobText);
      check_model_text(value, strings);
    }
  } else if (j.is_array()) {
    for (const auto& value : j) check_model_text(value, strings);
  }
}

}  // namespace

void JobSpec::validate() const {
  check_text("the owner", owner, kMaxJobText);
  check_text("the device key", session.device_key, kMaxJobText);
  check_text("the target", target, kMaxJobText);
  check_text("the template", template_name, kMaxJobText);
  check_text("the tuner", session.tuner, kMaxJobText);
  check_text("the strategy", strategy, kMaxJobText);
  check_text("the xgb features", session.xgb_features, kMaxJobText);
  for (const auto& [key, value] : args) {
    check_text("an argument's name", key, kMaxJobText);
    check_text("argument " + key, value, kMaxJobText);
  }
  if (is_model()) {
    const auto tasks = model.find("tasks");
    if (tasks != model.end() && tasks->is_array() && tasks->size() > kMaxModelTasks)
      throw Error(ErrorKind::kInvalidArgument, "a model job of " + std::to_string(tasks->size()) +
                                                   " tasks; at most " +
                                                   std::to_string(kMaxModelTasks));
    if (const auto name = model.find("model"); name != model.end() && name->is_string())
      check_text("the model's name", name->get<std::string>(), kMaxJobText);
    size_t strings = 0;
    check_model_text(model, strings);
  }
  if (session.device_key.empty())
    throw Error(ErrorKind::kInvalidArgument, "a job needs a device key (--device-key)");
  if (session.trials < 1 || session.trials > kMaxJobTrials)
    throw Error(ErrorKind::kInvalidArgument, "trials must be between 1 and " +
                                                 std::to_string(kMaxJobTrials) + ", not " +
                                                 std::to_string(session.trials));
  if (priority < 1 || priority > kMaxJobPriority)
    throw Error(ErrorKind::kInvalidArgument,
                "priority must be between 1 and " + std::to_string(kMaxJobPriority));
  if (session.batch_size < 1 || session.batch_size > 4096)
    throw Error(ErrorKind::kInvalidArgument, "batch size must be between 1 and 4096");
  tuner::validate(measure);
  if (is_model()) {
    if (!template_name.empty() || !args.empty())
      throw Error(ErrorKind::kInvalidArgument,
                  "a model job names no template (its tasks are in the model)");
    tuner::TaskSchedulerOptions scheduler;
    scheduler.strategy = strategy;
    scheduler.trials = session.trials;
    scheduler.batch_size = session.batch_size;
    tuner::validate(scheduler);
    // The tasks as this server's templates read them (any target: each device's is its own).
    const frontend::ModelTasks tasks =
        frontend::tasks_from_json(model, schedule_space::TargetTraits{});
    if (std::none_of(tasks.tasks.begin(), tasks.tasks.end(),
                     [](const auto& t) { return t.tunable.has_value(); }))
      throw Error(ErrorKind::kInvalidArgument,
                  "model " + tasks.model + ": no task can be tuned with today's templates");
  } else {
    // Unknown template or argument: the registry's own message.
    schedule_space::parse_workload_args(template_name, [&] {
      std::vector<std::string> words;
      for (const auto& [k, v] : args) words.push_back(k + "=" + v);
      return words;
    }());
  }
  tuner::validate(session);
}

}  // namespace ktune::rpc_runner
